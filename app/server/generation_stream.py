"""One request's events, carried from the engine gateway's thread onto the event loop, and
its end when the client goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.types import Receive

from app.engine.messages import Failed, Finished, Generate
from app.server.gateway import EngineGateway


class GenerationStream:
    """Submits `command` to the gateway; iterate to get its events, the last one Finished or
    Failed. `cancel()` stops it in the engine (the cancel flag), and `disconnected_at` says
    when the client went away (time.monotonic(), the engine's clock too)."""

    def __init__(self, gateway: EngineGateway, command: Generate) -> None:
        self.gateway, self.command = gateway, command
        self.ended = False
        self.disconnected_at = 0.0
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[object] = asyncio.Queue()
        gateway.submit(command, self._on_event)

    def _on_event(self, event: object) -> None:  # the gateway's thread
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:  # the server stopped and its loop closed: nobody is listening
            pass

    async def events(self) -> AsyncIterator[object]:
        while not self.ended:
            event = await self._events.get()
            self.ended = isinstance(event, (Finished, Failed))
            yield event

    def cancel(self) -> None:
        if not self.ended:
            self.gateway.cancel(self.command.request_id)

    async def cancel_on_disconnect(self, receive: Receive) -> None:
        """Run beside the response: the client closing its connection stops the generation,
        whether it is waiting for the engine or generating."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected_at = time.monotonic()
                self.cancel()
                return
