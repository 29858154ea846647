"""One request's events, carried from the engine gateway's thread onto the event loop, and
its end when the client goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.types import Receive

from app.engine.messages import ContextTrimmed, Failed, Finished, Generate
from app.server.gateway import EngineGateway


class GenerationStream:
    """Submits `command` to the gateway; iterate to get its events, the last one Finished or
    Failed. `cancel()` stops it in the engine (the cancel flag), and `disconnected_at` says
    when the client went away (time.monotonic(), the engine's clock too). `start()` waits
    for the engine to begin, so the reply's status line can depend on how it began."""

    def __init__(self, gateway: EngineGateway, command: Generate) -> None:
        self.gateway, self.command = gateway, command
        self.ended = False
        self.disconnected_at = 0.0
        self.dropped_messages = 0  # the oldest chat messages left out to fit the context
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[object] = asyncio.Queue()
        gateway.submit(command, self._on_event)

    def _on_event(self, event: object) -> None:  # the gateway's thread
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:  # the server stopped and its loop closed: nobody is listening
            pass

    async def next_event(self) -> object:
        event = await self._events.get()
        self.ended = self.ended or isinstance(event, (Finished, Failed))
        if isinstance(event, ContextTrimmed):
            self.dropped_messages = event.dropped_messages
        return event

    async def events(self) -> AsyncIterator[object]:
        """The events still to come, the last one Finished or Failed."""
        while not self.ended:
            yield await self.next_event()

    async def start(self) -> object:
        """The first event after any ContextTrimmed: PromptStarted when the engine began on
        the prompt, or the request's end (Failed: the prompt does not fit; Finished:
        cancelled while it waited)."""
        while True:
            event = await self.next_event()
            if not isinstance(event, ContextTrimmed):
                return event

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
