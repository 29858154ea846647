"""POST /v1/embeddings: OpenAI's request and response, computed by the embedder process
(app.engine.embedder, through embedder_process.Embedder) from the loaded model's file.

Served: model, input (a string, an array of strings, an array of token ids, or an array of
such arrays; at most MAX_INPUTS, none empty), encoding_format ("float" or "base64": the
little-endian float32 bytes, as OpenAI sends them), user. Anything else is a 400 naming it.
"""

from __future__ import annotations

import asyncio
import base64
import sys
import time
from array import array

from app.engine.embedder import Embeddings, EmbedRefused, EmbedRequest
from app.engine.messages import Finished
from app.server.embedder_process import Embedder, EmbedderFailed
from app.server.gateway import ModelInfo
from app.server.openai_request import ApiError, check_served_fields

EMBEDDING_FIELDS = frozenset({"model", "input", "encoding_format", "user"})
MAX_INPUTS = 2048  # as OpenAI
ENCODINGS = ("float", "base64")


def parse_embedding_request(body: object) -> tuple[EmbedRequest, str]:
    """The inputs to embed and the encoding asked for; ApiError(400) naming the field."""
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", None)
    check_served_fields(body, EMBEDDING_FIELDS, "", " on /v1/embeddings")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("you must provide a model parameter.", "model")
    encoding = body.get("encoding_format", "float")
    if encoding not in ENCODINGS:
        raise _invalid("'encoding_format' must be 'float' or 'base64'.", "encoding_format")
    return EmbedRequest(_inputs(body.get("input"))), str(encoding)


async def embed(
    embedder: Embedder, model: ModelInfo, request: EmbedRequest, encoding: str
) -> tuple[dict[str, object], Finished]:
    """The response body, and a Finished for the request log. Raises ApiError."""
    started = time.monotonic()
    try:
        answer = await asyncio.to_thread(embedder.embed, model.path, model.id, request)
    except EmbedderFailed as failed:
        # A 400, as for a chat to a base model: this model cannot serve the request, and
        # clients (the openai SDK) retry a 5xx, which would only fail again.
        raise ApiError(400, str(failed), code="embeddings_unsupported") from None
    if isinstance(answer, EmbedRefused):
        code = "context_length_exceeded" if "at most" in answer.message else None
        raise ApiError(400, answer.message, param=answer.param, code=code)
    assert isinstance(answer, Embeddings)
    tokens = sum(answer.token_counts)
    data = [
        {"object": "embedding", "index": index, "embedding": _encoded(vector, encoding)}
        for index, vector in enumerate(answer.vectors)
    ]
    body: dict[str, object] = {
        "object": "list",
        "data": data,
        "model": model.id,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    now = time.monotonic()
    return body, Finished("", "", tokens, 0, now - started, 0.0, "stop", tokens, now)


def _inputs(given: object) -> tuple[str | tuple[int, ...], ...]:
    if given is None:
        raise _invalid("you must provide an 'input' parameter.", "input")
    if isinstance(given, str) or _is_tokens(given):
        items: list[object] = [given]
    elif isinstance(given, list) and given:
        items = list(given)
    else:
        raise _invalid(
            "'input' must be a string, an array of strings or an array of token arrays.",
            "input",
        )
    if len(items) > MAX_INPUTS:
        raise _invalid(f"'input' may hold at most {MAX_INPUTS} inputs.", "input")
    inputs: list[str | tuple[int, ...]] = []
    for index, item in enumerate(items):
        where = f"input[{index}]" if len(items) > 1 else "input"
        if isinstance(item, str) and item:
            inputs.append(item)
        elif _is_tokens(item):
            assert isinstance(item, list)
            inputs.append(tuple(item))
        else:
            raise _invalid(
                f"'{where}' must be a non-empty string or a non-empty array of token ids.", where
            )
    return tuple(inputs)


def _is_tokens(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    )


def _encoded(vector: bytes, encoding: str) -> object:
    if encoding == "base64":
        return base64.b64encode(vector).decode("ascii")
    floats = array("f", vector)
    if sys.byteorder != "little":
        floats.byteswap()
    return floats.tolist()


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, param=param)
