"""uvicorn's h11 protocol with a deadline for each request's line and headers.

uvicorn only times out connections that are idle between requests: one that sends half a
request line and then nothing stays open for ever, and forty of them used to fill uvicorn's
connection limit, so that every other client got 503 (issue 24). Here each connection has
`header_timeout_s` to send a whole request head, and one client address may keep only
`waiting_connections_per_client` connections waiting for their heads: beyond that its oldest
waiting connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.server.client_limits import ClientLimits
from app.server.openai_shapes import error_body

log = logging.getLogger(__name__)


class _WaitingForHeads:
    """The connections of each client address that have not sent a whole request head yet,
    oldest first. Only touched on the server's event loop."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self._by_client: dict[str, OrderedDict[_GuardedH11, None]] = {}

    def add(self, connection: _GuardedH11) -> None:
        waiting = self._by_client.setdefault(connection.client_host, OrderedDict())
        waiting[connection] = None
        while len(waiting) > self.per_client:
            oldest, _ = waiting.popitem(last=False)
            log.debug("closed a connection of %s that waited for its request", oldest.client_host)
            oldest.close_waiting()

    def discard(self, connection: _GuardedH11) -> None:
        waiting = self._by_client.get(connection.client_host)
        if waiting is not None:
            waiting.pop(connection, None)
            if not waiting:
                del self._by_client[connection.client_host]


class _GuardedH11(H11Protocol):
    limits: ClassVar[ClientLimits]
    waiting: ClassVar[_WaitingForHeads]
    _head_deadline: asyncio.TimerHandle | None = None

    @property
    def client_host(self) -> str:
        return self.client[0] if self.client else ""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.conn.their_state is not h11.IDLE:
            self._stop_waiting()
        elif self._head_deadline is None:
            # The start of the next request on a kept-alive connection: uvicorn's keep-alive
            # timer is off once anything came, so this one's deadline starts now.
            self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot read (malformed, or a head over the size bound), answered in
        OpenAI's error shape instead of uvicorn's plain text."""
        message = (
            "This server could not read that HTTP request: it is malformed, or its line and "
            f"headers are over {self.limits.max_header_bytes:,} bytes."
        )
        body = json.dumps(error_body(message, "invalid_request_error", None, "bad_http")).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def close_waiting(self) -> None:
        """Close the connection: its request head did not come in time, or it was the oldest
        waiting one of its client. There is no request to answer yet, so nothing is sent."""
        self._stop_waiting()
        if not self.transport.is_closing():
            self.transport.close()

    def _wait_for_head(self) -> None:
        self._stop_waiting()
        self._head_deadline = self.loop.call_later(
            self.limits.header_timeout_s, self._on_head_deadline_passed
        )
        self.waiting.add(self)

    def _on_head_deadline_passed(self) -> None:
        log.debug("closed a connection of %s: no whole request in time", self.client_host)
        self._head_deadline = None
        self.close_waiting()

    def _stop_waiting(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None
        self.waiting.discard(self)


def guarded_h11(limits: ClientLimits) -> type[H11Protocol]:
    """The protocol class for one server: its limits, and its own record of waiting
    connections (uvicorn makes one protocol object per connection from the class)."""
    waiting = _WaitingForHeads(limits.waiting_connections_per_client)
    return type("GuardedH11", (_GuardedH11,), {"limits": limits, "waiting": waiting})
