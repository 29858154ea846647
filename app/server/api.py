"""The OpenAI-compatible routes: GET /v1/models, POST /v1/chat/completions, /v1/completions.

An ASGI app (Starlette) over an EngineGateway; uvicorn serves it (server_runner.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import TypedDict

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.engine.messages import Failed, Finished, PromptStarted, Token
from app.server.gateway import EngineGateway, ModelInfo
from app.server.generation_stream import GenerationStream
from app.server.guard import Guard
from app.server.openai_request import (
    ApiError,
    ParsedRequest,
    parse_chat,
    parse_completion,
)
from app.server.openai_shapes import (
    ChunkWriter,
    chat_completion,
    error_body,
    error_event,
    models_list,
    text_completion,
)
from app.server.options import ServerOptions
from app.server.request_log import PROMPT_SHOWN_CHARS, RequestLog, RequestRecord

log = logging.getLogger(__name__)


def build_app(gateway: EngineGateway, options: ServerOptions, requests: RequestLog) -> Starlette:
    """The ASGI app: CORS only for the listed origins, then the key and request limits."""
    routes = _Routes(gateway, options, requests)
    middleware = []
    if options.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    middleware.append(Middleware(Guard, api_key=options.api_key, max_requests=options.max_requests))
    return Starlette(
        routes=[
            Route("/v1/models", routes.models, methods=["GET"]),
            Route("/v1/chat/completions", routes.chat, methods=["POST"]),
            Route("/v1/completions", routes.completion, methods=["POST"]),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


class _Routes:
    def __init__(self, gateway: EngineGateway, options: ServerOptions, requests: RequestLog):
        self.gateway, self.options, self.requests = gateway, options, requests

    async def models(self, _request: Request) -> Response:
        return JSONResponse(models_list(self.gateway.model()))

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def completion(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def _generate(self, request: Request, chat: bool) -> Response:
        arrived = time.time()
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        record = _RecordMaker(request, request_id, arrived, self.requests)
        try:
            body = await _read_json(request, self.options.max_body_bytes)
            parse = parse_chat if chat else parse_completion
            parsed = parse(body, request_id, self.options.max_tokens_limit)
            model = self.gateway.model()
            if model is None:
                raise ApiError(
                    503,
                    "No model is loaded in KV Studio; load one in the app first.",
                    code="model_not_loaded",
                    kind="server_error",
                )
        except ApiError as error:
            record.refused(error)
            return _error_response(error)
        if self.options.log_prompts:
            record.prompt = _prompt_text(parsed)
        stream = GenerationStream(self.gateway, parsed.command)
        writer = ChunkWriter(request_id, int(arrived), model.id, chat, parsed.include_usage)
        if parsed.stream:
            return _EventStream(stream, writer, record)
        return await self._complete(request, stream, parsed, model, record)

    async def _complete(
        self,
        request: Request,
        stream: GenerationStream,
        parsed: ParsedRequest,
        model: ModelInfo,
        record: _RecordMaker,
    ) -> Response:
        watcher = asyncio.create_task(stream.cancel_on_disconnect(request.receive))
        try:
            last: object = None
            async for event in stream.events():
                last = event
        finally:
            watcher.cancel()
        if isinstance(last, Failed):
            error = ApiError(500, last.message, kind="server_error")
            record.refused(error)
            return _error_response(error)
        assert isinstance(last, Finished)
        record.finished(last)
        shape = chat_completion if parsed.command.messages else text_completion
        created = int(record.arrived)
        return JSONResponse(shape(parsed.command.request_id, created, model.id, last))


class _EventStream(Response):
    """Server-sent events: one chunk per piece of text, the end, [DONE]; a client that goes
    away stops the generation at once (not at the next token it would have been sent)."""

    def __init__(self, stream: GenerationStream, writer: ChunkWriter, record: _RecordMaker):
        super().__init__(media_type="text/event-stream")
        self.stream, self.writer, self.record = stream, writer, record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        watcher = asyncio.create_task(self.stream.cancel_on_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            async for event in self.stream.events():
                if isinstance(event, PromptStarted):
                    await self._send(send, self.writer.opening())
                elif isinstance(event, Token):
                    await self._send(send, self.writer.text(event.text))
                elif isinstance(event, Finished):
                    self.record.finished(event, self.stream.disconnected_at)
                    await self._send(send, self.writer.end(event))
                elif isinstance(event, Failed):
                    self.record.refused(ApiError(500, event.message, kind="server_error"))
                    await self._send(send, error_event(event.message))
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away; the watcher has cancelled the generation
            self.stream.cancel()
        finally:
            watcher.cancel()
            self.stream.cancel()

    async def _send(self, send: Send, body: bytes) -> None:
        if body and not self.stream.disconnected_at:
            await send({"type": "http.response.body", "body": body, "more_body": True})


class _RecordHead(TypedDict):
    """The fields every RequestRecord of a request starts with."""

    request_id: str
    at: float
    client: str
    method: str
    path: str


class _RecordMaker:
    """The request's line in the request log, written once."""

    def __init__(self, request: Request, request_id: str, arrived: float, log_: RequestLog):
        self.request_id, self.arrived, self.log = request_id, arrived, log_
        self.client = request.client.host if request.client else ""
        self.method, self.path = request.method, request.url.path
        self.prompt = ""
        self.done = False

    def refused(self, error: ApiError) -> None:
        self._add(RequestRecord(**self._head(), status=error.status, error=error.message))

    def finished(self, finished: Finished, disconnected_at: float = 0.0) -> None:
        reason = "cancelled" if disconnected_at else finished.stop_reason
        self._add(
            RequestRecord(
                **self._head(),
                status=200,
                prompt_tokens=finished.prompt_tokens,
                completion_tokens=finished.generated_tokens,
                tokens_per_second=finished.tokens_per_second,
                time_to_first_token_s=finished.time_to_first_token_s,
                finish_reason=reason,
                ended_at=finished.at,
                prompt=self.prompt,
            )
        )

    def _head(self) -> _RecordHead:
        return {
            "request_id": self.request_id,
            "at": self.arrived,
            "client": self.client,
            "method": self.method,
            "path": self.path,
        }

    def _add(self, record: RequestRecord) -> None:
        if not self.done:
            self.done = True
            self.log.add(record)


async def _read_json(request: Request, limit: int) -> object:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(len(body), limit)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(
            400, "We could not parse the JSON body of your request.", code="invalid_json"
        ) from None


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is {size:,} bytes or more; this server takes at most {limit:,}.",
        code="request_too_large",
    )


def _prompt_text(parsed: ParsedRequest) -> str:
    command = parsed.command
    text = command.messages[-1].content if command.messages else (command.prompt or "")
    return text[:PROMPT_SHOWN_CHARS]


def _error_response(error: ApiError) -> Response:
    body = error_body(error.message, error.kind, error.param, error.code)
    return JSONResponse(body, status_code=error.status)


async def _http_error(_request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    words = {
        404: "Unknown URL: this server has /v1/models, /v1/chat/completions and /v1/completions.",
        405: "That method is not allowed on this URL.",
    }
    message = words.get(status, str(getattr(exc, "detail", "")) or "Request failed.")
    return JSONResponse(error_body(message, "invalid_request_error"), status_code=status)


async def _server_error(_request: Request, exc: Exception) -> Response:
    log.error("server error", exc_info=exc)
    body = error_body(f"The server failed: {type(exc).__name__}.", "server_error")
    return JSONResponse(body, status_code=500)
