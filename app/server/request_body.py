"""A POST's body, read whole before the request may take one of the server's request slots:
only JSON, within the size bound, within the body timeout. A client that stalls its upload
so holds nothing but its own connection, and only until the timeout."""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive

from app.server.openai_request import ApiError


class ClientGoneError(ConnectionError):
    """The client closed its connection before it had sent its whole body."""


def content_type_refusal(content_type: str) -> ApiError | None:
    """Only JSON: a web page can POST text/plain or a form to any address without asking (no
    CORS preflight), but not application/json."""
    if content_type.partition(";")[0].strip().lower() == "application/json":
        return None
    given = f"'{content_type}'" if content_type else "none"
    return ApiError(
        415,
        f"Send the body as JSON with 'Content-Type: application/json' (this request's content "
        f"type is {given}).",
        code="unsupported_media_type",
    )


async def read_body(receive: Receive, declared: str, limit: int, timeout_s: float) -> bytes:
    """The whole body; ApiError 413 past `limit` bytes (said before reading when the
    Content-Length already says so), 408 after `timeout_s`; ClientGoneError."""
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGoneError
                body += message.get("body", b"")
                if len(body) > limit:
                    raise _too_large(len(body), limit)
                if not message.get("more_body", False):
                    return bytes(body)
    except TimeoutError:
        raise ApiError(
            408,
            f"The request body did not all come within {timeout_s:g} s; send it at once.",
            code="request_timeout",
        ) from None


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app the body already read, then the connection's own
    messages (so that a disconnect is still seen while the reply is made)."""
    given = False

    async def receive_again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive_again


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is {size:,} bytes or more; this server takes at most {limit:,}.",
        code="request_too_large",
    )
