"""The reply to a generation request, whole (JSON) or streamed (server-sent events).

Its status line waits until the engine begins on the prompt, as llama-server's does: a prompt
that does not fit the context is then a 400 for a stream too (not an error event after a
200), and the number of messages dropped to fit goes in a header as well as in the body.
"""

from __future__ import annotations

import asyncio
import json

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.engine.messages import Failed, Finished, PromptStarted, Token
from app.platform.errors import ContextLengthExceededError
from app.server.generation_stream import GenerationStream
from app.server.openai_request import ApiError, ParsedRequest
from app.server.reply_shape import ReplyShape
from app.server.request_record import RequestRecorder

DROPPED_HEADER = b"x-kvstudio-dropped-messages"


class Reply(Response):
    """Runs `stream` for `parsed` and answers with its result in `shape`'s bodies; a client
    that goes away stops the generation at once (not at the next token it would have been
    sent)."""

    def __init__(
        self,
        stream: GenerationStream,
        parsed: ParsedRequest,
        shape: ReplyShape,
        record: RequestRecorder,
    ) -> None:
        super().__init__(media_type="text/event-stream" if parsed.stream else "application/json")
        self.stream, self.parsed, self.shape, self.record = stream, parsed, shape, record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(self.stream.cancel_on_disconnect(receive))
        try:
            first = await self.stream.start()
            if isinstance(first, Failed):
                await self._refuse(send, failure_error(first, self.parsed))
            elif self.parsed.stream:
                await self._send_stream(send, first)
            else:
                await self._send_whole(send, first)
        except OSError:  # the client went away; the watcher has cancelled the generation
            self.stream.cancel()
        finally:
            watcher.cancel()
            self.stream.cancel()

    def _reply_headers(self, content_type: bytes) -> list[tuple[bytes, bytes]]:
        headers = [(b"content-type", content_type)]
        if self.stream.dropped_messages:
            headers.append((DROPPED_HEADER, str(self.stream.dropped_messages).encode()))
        return headers

    async def _send_whole(self, send: Send, first: object) -> None:
        last = first
        async for event in self.stream.events():
            last = event
        if isinstance(last, Failed):
            await self._refuse(send, failure_error(last, self.parsed))
            return
        assert isinstance(last, Finished)
        self.record.finished(last)
        body = self.shape.whole(last, self.stream.dropped_messages)
        await _send_json(send, 200, body, self._reply_headers(b"application/json"))

    async def _send_stream(self, send: Send, first: object) -> None:
        headers = self._reply_headers(b"text/event-stream") + [(b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._send_event(send, first)
        async for event in self.stream.events():
            await self._send_event(send, event)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_event(self, send: Send, event: object) -> None:
        if isinstance(event, PromptStarted):
            await self._send(send, self.shape.opening(event, self.stream.dropped_messages))
        elif isinstance(event, Token):
            await self._send(send, self.shape.text(event))
        elif isinstance(event, Finished):
            self.record.finished(event, self.stream.disconnected_at)
            await self._send(send, self.shape.end(event))
        elif isinstance(event, Failed):  # after the status line: an error event ends it
            self.record.refused(ApiError(500, event.message, kind="server_error"))
            await self._send(send, self.shape.failure(event.message))

    async def _send(self, send: Send, body: bytes) -> None:
        if body and not self.stream.disconnected_at:
            await send({"type": "http.response.body", "body": body, "more_body": True})

    async def _refuse(self, send: Send, error: ApiError) -> None:
        self.record.refused(error)
        body = self.shape.refusal(error)
        await _send_json(send, error.status, body, self._reply_headers(b"application/json"))


def failure_error(failed: Failed, parsed: ParsedRequest) -> ApiError:
    """The engine's failure as the client sees it: a prompt too long for the context is the
    client's to fix (400, OpenAI's context_length_exceeded); anything else is ours (500)."""
    if failed.code == ContextLengthExceededError.code:
        param = "messages" if parsed.command.messages else "prompt"
        return ApiError(400, failed.message, param=param, code=failed.code)
    if failed.code == "invalid_logit_bias":  # a token id the loaded model does not have
        return ApiError(400, failed.message, param="logit_bias")
    return ApiError(500, failed.message, kind="server_error")


async def _send_json(
    send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = [*headers, (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
