"""The JSON bodies and server-sent event chunks OpenAI's clients parse."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

from app.engine.messages import Finished, TokenLogprob
from app.server.gateway import ModelInfo
from app.server.logprob_shapes import (
    ChatLogprobs,
    CompletionLogprobs,
    chat_logprobs,
    completion_logprobs,
)
from app.server.tool_calls import MadeCall, call_deltas, call_entries

FINISH_REASONS = {"stop": "stop", "length": "length", "cancelled": "stop"}
CALLED = "tool_calls"  # the finish_reason of a reply that is tool calls


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorDetail


class ModelEntry(TypedDict):
    """One model of GET /v1/models, with KV Studio's kv_mode (the mode's label) and kv_bytes."""

    id: str
    object: str
    created: int
    owned_by: str
    context_length: int
    kv_mode: str
    kv_bytes: int


class ModelList(TypedDict):
    object: str
    data: list[ModelEntry]


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatReplyMessage(TypedDict):
    role: str
    content: str | None  # None when the reply is tool calls
    tool_calls: NotRequired[list[dict[str, object]]]


class ChatChoice(TypedDict):
    index: int
    message: ChatReplyMessage
    logprobs: ChatLogprobs | None
    finish_reason: str


class TextChoice(TypedDict):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str


class KvStudioNote(TypedDict):
    """KV Studio's own field of a reply: what it did to the request to serve it."""

    dropped_messages: int  # the oldest chat messages left out to fit the context


class Completion(TypedDict):
    """A whole reply: chat.completion (ChatChoice) or text_completion (TextChoice), with
    `kvstudio` when messages were dropped to fit the context."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoice | TextChoice]
    usage: Usage
    kvstudio: NotRequired[KvStudioNote]


class ChunkChoice(TypedDict):
    index: int
    delta: NotRequired[dict[str, object]]  # chat streams
    text: NotRequired[str]  # completion streams
    logprobs: ChatLogprobs | CompletionLogprobs | None
    finish_reason: str | None


class Chunk(TypedDict):
    """One server-sent event of a stream."""

    id: str
    object: str
    created: int
    model: str
    choices: NotRequired[list[ChunkChoice]]
    usage: NotRequired[Usage | None]
    kvstudio: NotRequired[KvStudioNote]  # the first chunk, when messages were dropped


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> ErrorBody:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def models_list(model: ModelInfo | None) -> ModelList:
    """GET /v1/models: the loaded model, with its KV mode and KV bytes as extra fields."""
    return {"object": "list", "data": [model_entry(model)] if model is not None else []}


def model_entry(model: ModelInfo) -> ModelEntry:
    """GET /v1/models/{id}, and each entry of the list."""
    return {
        "id": model.id,
        "object": "model",
        "created": model.created,
        "owned_by": "kvstudio",
        "context_length": model.n_ctx,
        "kv_mode": model.kv_mode.label,
        "kv_bytes": model.kv_bytes,
    }


def usage(finished: Finished) -> Usage:
    return {
        "prompt_tokens": finished.prompt_tokens,
        "completion_tokens": finished.generated_tokens,
        "total_tokens": finished.prompt_tokens + finished.generated_tokens,
    }


def chat_completion(
    reply_id: str,
    created: int,
    model: str,
    finished: Finished,
    dropped_messages: int = 0,
    calls: Sequence[MadeCall] = (),
) -> Completion:
    """A whole chat reply: its text, or the tool calls it is (`calls`)."""
    message: ChatReplyMessage = {"role": "assistant", "content": finished.text}
    reason = FINISH_REASONS.get(finished.stop_reason, "stop")
    if calls:
        message = {"role": "assistant", "content": None, "tool_calls": call_entries(calls)}
        reason = CALLED
    body: Completion = {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": chat_logprobs(finished.logprobs),
                "finish_reason": reason,
            }
        ],
        "usage": usage(finished),
    }
    if dropped_messages:
        body["kvstudio"] = {"dropped_messages": dropped_messages}
    return body


def text_completion(
    reply_id: str, created: int, model: str, finished: Finished, dropped_messages: int = 0
) -> Completion:
    body: Completion = {
        "id": reply_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": finished.text,
                "logprobs": completion_logprobs(finished.logprobs),
                "finish_reason": FINISH_REASONS.get(finished.stop_reason, "stop"),
            }
        ],
        "usage": usage(finished),
    }
    if dropped_messages:
        body["kvstudio"] = {"dropped_messages": dropped_messages}
    return body


class ChunkWriter:
    """The stream's `data:` lines for one reply, chat or completion."""

    def __init__(
        self, reply_id: str, created: int, model: str, chat: bool, include_usage: bool
    ) -> None:
        self.reply_id, self.created, self.model = reply_id, created, model
        self.chat, self.include_usage = chat, include_usage
        self.sent_chars = 0  # of the reply's text: where the next chunk's text_offset starts

    def opening(self, dropped_messages: int = 0) -> bytes:
        """Chat streams start with the assistant's role (no text yet), and with `kvstudio`
        when messages were dropped to fit the context."""
        if not self.chat:
            return b""
        note: KvStudioNote | None = None
        if dropped_messages:
            note = {"dropped_messages": dropped_messages}
        return self._chunk({"role": "assistant", "content": ""}, None, note=note)

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...] = ()) -> bytes:
        chunk = self._chunk({"content": text}, None, text, logprobs=logprobs)
        self.sent_chars += len(text)
        return chunk

    def tool_calls(self, calls: Sequence[MadeCall]) -> bytes:
        """The reply's calls, once it is known to be calls (chat streams)."""
        return b"".join(self._chunk({"tool_calls": [delta]}, None) for delta in call_deltas(calls))

    def end(self, finished: Finished, called: bool = False) -> bytes:
        reason = CALLED if called else FINISH_REASONS.get(finished.stop_reason, "stop")
        out = self._chunk({}, reason)
        if self.include_usage:
            body = self._base()
            body["choices"] = []
            body["usage"] = usage(finished)
            out += _event(body)
        return out + b"data: [DONE]\n\n"

    def _base(self) -> Chunk:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.reply_id, "object": kind, "created": self.created, "model": self.model}

    def _chunk(
        self,
        delta: dict[str, object],
        finish_reason: str | None,
        text: str = "",
        note: KvStudioNote | None = None,
        logprobs: tuple[TokenLogprob, ...] = (),
    ) -> bytes:
        body = self._base()
        choice: ChunkChoice
        if self.chat:
            chat = chat_logprobs(logprobs)
            choice = {"index": 0, "delta": delta, "logprobs": chat, "finish_reason": finish_reason}
        else:
            legacy = completion_logprobs(logprobs, self.sent_chars)
            choice = {"index": 0, "text": text, "logprobs": legacy, "finish_reason": finish_reason}
        body["choices"] = [choice]
        if self.include_usage:
            body["usage"] = None
        if note is not None:
            body["kvstudio"] = note
        return _event(body)


def error_event(message: str, kind: str = "server_error") -> bytes:
    """An error after the stream began (the status line is already sent)."""
    return _event(error_body(message, kind)) + b"data: [DONE]\n\n"


def _event(body: Mapping[str, object]) -> bytes:
    return (
        b"data: "
        + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"\n\n"
    )
