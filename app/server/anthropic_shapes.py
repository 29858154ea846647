"""Anthropic's Messages API replies: the whole message, the stream's named events
(message_start, content_block_start, content_block_delta, content_block_stop, message_delta,
message_stop) and errors in Anthropic's shape ({"type": "error", "error": {...}})."""

from __future__ import annotations

import json
from collections.abc import Mapping

from app.engine.messages import Finished, PromptStarted, Token
from app.server.openai_request import ApiError, ParsedRequest

# Anthropic's error types by HTTP status (its docs' table); anything else is api_error.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str) -> dict[str, object]:
    return {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
    }


class AnthropicShape:
    """One reply to POST /v1/messages (app.server.reply_shape.ReplyShape)."""

    def __init__(self, parsed: ParsedRequest, model: str) -> None:
        self.parsed, self.model = parsed, model
        self.stops = parsed.command.sampling.stop  # the client's stop_sequences

    def refusal(self, error: ApiError) -> object:
        return anthropic_error(error.status, error.message)

    def whole(self, finished: Finished, dropped_messages: int) -> object:
        body = self._message(finished.prompt_tokens, finished.generated_tokens)
        body["content"] = [{"type": "text", "text": finished.text}]
        body.update(self._stopped(finished))
        return body

    def opening(self, started: PromptStarted, dropped_messages: int) -> bytes:
        message = self._message(started.prompt_tokens, 0)
        message.update({"stop_reason": None, "stop_sequence": None})
        block = {"type": "text", "text": ""}
        return _event("message_start", {"message": message}) + _event(
            "content_block_start", {"index": 0, "content_block": block}
        )

    def text(self, token: Token) -> bytes:
        delta = {"type": "text_delta", "text": token.text}
        return _event("content_block_delta", {"index": 0, "delta": delta})

    def end(self, finished: Finished) -> bytes:
        usage = {"output_tokens": finished.generated_tokens}
        return (
            _event("content_block_stop", {"index": 0})
            + _event("message_delta", {"delta": self._stopped(finished), "usage": usage})
            + _event("message_stop", {})
        )

    def failure(self, message: str) -> bytes:
        return _event("error", anthropic_error(500, message))

    def _message(self, input_tokens: int, output_tokens: int) -> dict[str, object]:
        return {
            "id": "msg_" + self.parsed.command.request_id.rsplit("-", 1)[-1],
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }

    def _stopped(self, finished: Finished) -> dict[str, object]:
        if finished.stop_reason == "length":
            return {"stop_reason": "max_tokens", "stop_sequence": None}
        if finished.stop_string and finished.stop_string in self.stops:
            return {"stop_reason": "stop_sequence", "stop_sequence": finished.stop_string}
        return {"stop_reason": "end_turn", "stop_sequence": None}


def _event(name: str, fields: Mapping[str, object]) -> bytes:
    body = {"type": name, **fields}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()
