"""The routes, each also without the /v1 prefix as llama-server serves them:
GET /health, GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, /v1/completions
(OpenAI's), /v1/messages (Anthropic's Messages API), /v1/responses (OpenAI's Responses API,
its text subset) and /v1/embeddings (embeddings_route.py). Each generating route's reply goes
through its ReplyShape (reply_shape.py).

An ASGI app (Starlette) over an EngineGateway; uvicorn serves it (server_runner.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Literal

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.anthropic_request import parse_messages
from app.server.anthropic_shapes import AnthropicShape, anthropic_error
from app.server.embedder_process import Embedder
from app.server.embeddings_route import embed, parse_embedding_request
from app.server.gateway import EngineGateway, ModelInfo
from app.server.generation_stream import GenerationStream
from app.server.openai_request import (
    ApiError,
    ParsedRequest,
    parse_chat,
    parse_completion,
)
from app.server.openai_shapes import ChunkWriter, error_body, model_entry, models_list
from app.server.options import ServerOptions
from app.server.reply import Reply
from app.server.reply_shape import OpenAiShape, ReplyShape
from app.server.request_log import PROMPT_SHOWN_CHARS, RequestLog
from app.server.request_record import RequestRecorder
from app.server.responses_request import parse_response_request
from app.server.responses_shapes import ResponsesShape

log = logging.getLogger(__name__)


def build_app(
    gateway: EngineGateway,
    options: ServerOptions,
    requests: RequestLog,
    embedder: Embedder | None = None,
) -> Starlette:
    """The ASGI app: CORS only for the listed origins (the Host, key and request limits are
    checked before, by server_runner's Guard)."""
    routes = _Routes(gateway, options, requests, embedder or Embedder())

    middleware = []
    if options.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "X-Api-Key", "Content-Type"],
            )
        )
    paths = [
        ("/health", routes.health, "GET"),
        ("/models", routes.models, "GET"),
        ("/models/{model_id:path}", routes.model, "GET"),
        ("/chat/completions", routes.chat, "POST"),
        ("/completions", routes.completion, "POST"),
        ("/messages", routes.messages, "POST"),
        ("/responses", routes.responses, "POST"),
        ("/embeddings", routes.embeddings, "POST"),
    ]
    return Starlette(
        routes=[
            Route(prefix + path, endpoint, methods=[method])
            for path, endpoint, method in paths
            for prefix in ("/v1", "")
        ],
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


class _Routes:
    def __init__(
        self,
        gateway: EngineGateway,
        options: ServerOptions,
        requests: RequestLog,
        embedder: Embedder,
    ):
        self.gateway, self.options, self.requests = gateway, options, requests
        self.embedder = embedder  # its process starts at the first /v1/embeddings

    async def health(self, _request: Request) -> Response:
        """llama-server's /health: 200 while a model is loaded and its engine runs, else 503
        with the reason (a load balancer or a script waits on it)."""
        problem = self.gateway.health()
        if problem:
            body = error_body(problem, "unavailable_error", code="unavailable")
            return JSONResponse(body, status_code=503)
        return JSONResponse({"status": "ok"})

    async def models(self, _request: Request) -> Response:
        return JSONResponse(models_list(self.gateway.model()))

    async def model(self, request: Request) -> Response:
        model_id = request.path_params["model_id"]
        model = self.gateway.model()
        if model is None or model.id != model_id:
            error = ApiError(
                404,
                "No such model here; GET /v1/models lists the one this server has.",
                param="model",
                code="model_not_found",
            )
            return _error_response(error)
        return JSONResponse(model_entry(model))

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, "chat")

    async def completion(self, request: Request) -> Response:
        return await self._generate(request, "completion")

    async def messages(self, request: Request) -> Response:
        return await self._generate(request, "messages")

    async def responses(self, request: Request) -> Response:
        return await self._generate(request, "responses")

    async def embeddings(self, request: Request) -> Response:
        """Embeddings from the loaded model's file (embeddings_route.py); any model may."""
        arrived = time.time()
        request_id = f"embd-{uuid.uuid4().hex[:24]}"
        record = RequestRecorder(request, request_id, arrived, self.requests)
        try:
            body = await _read_json(request, self.options.max_body_bytes)
            inputs, encoding = parse_embedding_request(body)
            model = self._model_for(chat=False)
            reply, finished = await embed(self.embedder, model, inputs, encoding)
        except ApiError as error:
            record.refused(error)
            return _error_response(error)
        record.finished(finished)
        return JSONResponse(reply)

    async def _generate(self, request: Request, route: ApiRoute) -> Response:
        arrived = time.time()
        request_id = f"{_ID_PREFIXES[route]}-{uuid.uuid4().hex[:24]}"
        record = RequestRecorder(request, request_id, arrived, self.requests)
        try:
            body = await _read_json(request, self.options.max_body_bytes)
            # off the event loop: turning tools' and response_format's schemas into grammars
            # takes time in proportion to what a client sends, and other clients wait on the loop
            parse, limit = _PARSERS[route], self.options.max_tokens_limit
            parsed = await asyncio.to_thread(parse, body, request_id, limit)
            model = self._model_for(route != "completion")
        except ApiError as error:
            record.refused(error)
            if route == "messages":
                body = anthropic_error(error.status, error.message)
                return JSONResponse(body, status_code=error.status)
            return _error_response(error)
        if self.options.log_prompts:
            record.prompt = _prompt_text(parsed)
        stream = GenerationStream(self.gateway, parsed.command)
        return Reply(stream, parsed, _shape(route, parsed, model.id, int(arrived)), record)

    def _model_for(self, chat: bool) -> ModelInfo:
        """The loaded model, if it can serve this request."""
        model = self.gateway.model()
        if model is None:
            raise ApiError(
                503,
                "No model is loaded in KV Studio; load one in the app first.",
                code="model_not_loaded",
                kind="server_error",
            )
        if chat and model.base_model and not self.options.allow_chat_on_base_model:
            raise ApiError(
                400,
                f"{model.id} is a base model ({model.base_model}): it continues text rather "
                "than answering a chat, so send your text to /v1/completions instead "
                "(or start the server with --allow-chat-on-base-model).",
                param="model",
                code="model_not_chat",
            )
        return model


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


ApiRoute = Literal["chat", "completion", "messages", "responses"]
_ID_PREFIXES: dict[ApiRoute, str] = {
    "chat": "chatcmpl",
    "completion": "cmpl",
    "messages": "msg",
    "responses": "resp",
}
_PARSERS: dict[ApiRoute, Callable[[object, str, int], ParsedRequest]] = {
    "chat": parse_chat,
    "completion": parse_completion,
    "messages": parse_messages,
    "responses": parse_response_request,
}


def _shape(route: ApiRoute, parsed: ParsedRequest, model: str, created: int) -> ReplyShape:
    if route == "messages":
        return AnthropicShape(parsed, model)
    if route == "responses":
        return ResponsesShape(parsed, model, created)
    request_id, chat = parsed.command.request_id, route == "chat"
    writer = ChunkWriter(request_id, created, model, chat, parsed.include_usage)
    return OpenAiShape(parsed, writer, created)


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
        404: "Unknown URL: this server has /health, /v1/models, /v1/chat/completions, "
        "/v1/completions, /v1/messages, /v1/responses and /v1/embeddings (each also "
        "without /v1).",
        405: "That method is not allowed on this URL.",
    }
    message = words.get(status, str(getattr(exc, "detail", "")) or "Request failed.")
    return JSONResponse(error_body(message, "invalid_request_error"), status_code=status)


async def _server_error(_request: Request, exc: Exception) -> Response:
    log.error("server error", exc_info=exc)
    body = error_body(f"The server failed: {type(exc).__name__}.", "server_error")
    return JSONResponse(body, status_code=500)
