"""OpenAI's Responses API replies: the response object with one output message, and the
stream's events (response.created, response.in_progress, response.output_item.added,
response.content_part.added, response.output_text.delta ..., response.output_text.done,
response.content_part.done, response.output_item.done, response.completed), each numbered."""

from __future__ import annotations

import json
from collections.abc import Mapping

from app.engine.messages import Finished, PromptStarted, Token
from app.server.openai_request import ApiError, ParsedRequest
from app.server.openai_shapes import error_body


class ResponsesShape:
    """One reply to POST /v1/responses (app.server.reply_shape.ReplyShape)."""

    def __init__(self, parsed: ParsedRequest, model: str, created: int) -> None:
        self.parsed, self.model, self.created = parsed, model, created
        suffix = parsed.command.request_id.rsplit("-", 1)[-1]
        self.id, self.item_id = f"resp_{suffix}", f"msg_{suffix}"
        self.sequence = 0
        self.sent: list[str] = []

    def refusal(self, error: ApiError) -> object:
        return error_body(error.message, error.kind, error.param, error.code)

    def whole(self, finished: Finished, dropped_messages: int) -> object:
        return self._response(finished)

    def opening(self, started: PromptStarted, dropped_messages: int) -> bytes:
        begun = self._response(None)
        item = {**self._item("", "in_progress"), "content": []}
        return (
            self._event("response.created", response=begun)
            + self._event("response.in_progress", response=begun)
            + self._event("response.output_item.added", output_index=0, item=item)
            + self._event("response.content_part.added", **self._at(), part=_part(""))
        )

    def text(self, token: Token) -> bytes:
        self.sent.append(token.text)
        return self._event("response.output_text.delta", **self._at(), delta=token.text)

    def end(self, finished: Finished) -> bytes:
        text = "".join(self.sent)
        status = "incomplete" if finished.stop_reason == "length" else "completed"
        return (
            self._event("response.output_text.done", **self._at(), text=text)
            + self._event("response.content_part.done", **self._at(), part=_part(text))
            + self._event("response.output_item.done", output_index=0, item=self._item(text))
            + self._event(f"response.{status}", response=self._response(finished))
        )

    def failure(self, message: str) -> bytes:
        return self._event("error", code="server_error", message=message, param=None)

    def _response(self, finished: Finished | None) -> dict[str, object]:
        """The response object: in progress (finished None), completed or incomplete."""
        sampling = self.parsed.command.sampling
        system = [m.content for m in self.parsed.command.messages if m.role == "system"]
        body: dict[str, object] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": "in_progress",
            "model": self.model,
            "output": [],
            "instructions": system[0] if system else None,
            "max_output_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "tools": [],
            "tool_choice": "none",
            "parallel_tool_calls": False,
            "text": {"format": {"type": "text"}},
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }
        if finished is not None:
            cut = finished.stop_reason == "length"
            body["status"] = "incomplete" if cut else "completed"
            body["incomplete_details"] = {"reason": "max_output_tokens"} if cut else None
            body["output"] = [self._item(finished.text)]
            body["usage"] = {
                "input_tokens": finished.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": finished.generated_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": finished.prompt_tokens + finished.generated_tokens,
            }
        return body

    def _item(self, text: str, status: str = "completed") -> dict[str, object]:
        return {
            "type": "message",
            "id": self.item_id,
            "status": status,
            "role": "assistant",
            "content": [_part(text)],
        }

    def _at(self) -> dict[str, object]:
        return {"item_id": self.item_id, "output_index": 0, "content_index": 0}

    def _event(self, name: str, **fields: object) -> bytes:
        body: Mapping[str, object] = {"type": name, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return f"event: {name}\ndata: {data}\n\n".encode()


def _part(text: str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": []}
