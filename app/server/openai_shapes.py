"""The JSON bodies and server-sent event chunks OpenAI's clients parse."""

from __future__ import annotations

import json
from typing import Any

from app.engine.messages import Finished
from app.server.gateway import ModelInfo

FINISH_REASONS = {"stop": "stop", "length": "length", "cancelled": "stop"}


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def models_list(model: ModelInfo | None) -> dict[str, Any]:
    """GET /v1/models: the loaded model, with its KV mode and KV bytes as extra fields."""
    data = []
    if model is not None:
        data.append(
            {
                "id": model.id,
                "object": "model",
                "created": model.created,
                "owned_by": "kvstudio",
                "context_length": model.n_ctx,
                "kv_mode": model.kv_mode,
                "kv_bytes": model.kv_bytes,
            }
        )
    return {"object": "list", "data": data}


def usage(finished: Finished) -> dict[str, int]:
    return {
        "prompt_tokens": finished.prompt_tokens,
        "completion_tokens": finished.generated_tokens,
        "total_tokens": finished.prompt_tokens + finished.generated_tokens,
    }


def chat_completion(reply_id: str, created: int, model: str, finished: Finished) -> dict[str, Any]:
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": finished.text},
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(finished.stop_reason, "stop"),
            }
        ],
        "usage": usage(finished),
    }


def text_completion(reply_id: str, created: int, model: str, finished: Finished) -> dict[str, Any]:
    return {
        "id": reply_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": finished.text,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(finished.stop_reason, "stop"),
            }
        ],
        "usage": usage(finished),
    }


class ChunkWriter:
    """The stream's `data:` lines for one reply, chat or completion."""

    def __init__(
        self, reply_id: str, created: int, model: str, chat: bool, include_usage: bool
    ) -> None:
        self.reply_id, self.created, self.model = reply_id, created, model
        self.chat, self.include_usage = chat, include_usage

    def opening(self) -> bytes:
        """Chat streams start with the assistant's role (no text yet)."""
        return self._chunk({"role": "assistant", "content": ""}, None) if self.chat else b""

    def text(self, text: str) -> bytes:
        return self._chunk({"content": text}, None, text)

    def end(self, finished: Finished) -> bytes:
        reason = FINISH_REASONS.get(finished.stop_reason, "stop")
        out = self._chunk({}, reason)
        if self.include_usage:
            body = self._base()
            body["choices"] = []
            body["usage"] = usage(finished)
            out += _event(body)
        return out + b"data: [DONE]\n\n"

    def _base(self) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.reply_id, "object": kind, "created": self.created, "model": self.model}

    def _chunk(self, delta: dict[str, str], finish_reason: str | None, text: str = "") -> bytes:
        body = self._base()
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": text}
        choice.update({"logprobs": None, "finish_reason": finish_reason})
        body["choices"] = [choice]
        if self.include_usage:
            body["usage"] = None
        return _event(body)


def error_event(message: str, kind: str = "server_error") -> bytes:
    """An error after the stream began (the status line is already sent)."""
    return _event(error_body(message, kind)) + b"data: [DONE]\n\n"


def _event(body: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"\n\n"
    )
