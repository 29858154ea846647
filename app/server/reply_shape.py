"""What a reply looks like to its client: the one seam between the engine's events and an
API's bodies. reply.Reply runs the generation and asks a ReplyShape for the bytes; OpenAI's
chat and completions (OpenAiShape, here), Anthropic's messages (anthropic_shapes.py) and
OpenAI's Responses (responses_shapes.py) each have one."""

from __future__ import annotations

from typing import Protocol

from app.engine.messages import Finished, PromptStarted, Token
from app.server.openai_request import ApiError, ParsedRequest
from app.server.openai_shapes import (
    ChunkWriter,
    chat_completion,
    error_body,
    error_event,
    text_completion,
)
from app.server.tool_calls import CallWatcher, read_calls


class ReplyShape(Protocol):
    def refusal(self, error: ApiError) -> object:
        """The JSON body of a refused request (its status is error.status)."""
        ...

    def whole(self, finished: Finished, dropped_messages: int) -> object:
        """The JSON body of a whole reply."""
        ...

    def opening(self, started: PromptStarted, dropped_messages: int) -> bytes:
        """A stream's first events, when the engine begins on the prompt."""
        ...

    def text(self, token: Token) -> bytes:
        """The events for one more piece of the reply."""
        ...

    def end(self, finished: Finished) -> bytes:
        """A stream's last events."""
        ...

    def failure(self, message: str) -> bytes:
        """The events that end a stream the engine failed in (after the status line)."""
        ...


class OpenAiShape:
    """Chat completions and completions, in OpenAI's shapes; a chat offered tools is read
    as tool calls where it is one (tool_calls.py)."""

    def __init__(self, parsed: ParsedRequest, writer: ChunkWriter, created: int) -> None:
        self.parsed, self.writer, self.created = parsed, writer, created
        self.watcher = CallWatcher(parsed.tools) if parsed.tools is not None else None

    def refusal(self, error: ApiError) -> object:
        return error_body(error.message, error.kind, error.param, error.code)

    def whole(self, finished: Finished, dropped_messages: int) -> object:
        command, model = self.parsed.command, self.writer.model
        if not command.messages:
            return text_completion(
                command.request_id, self.created, model, finished, dropped_messages
            )
        tools = self.parsed.tools
        calls = read_calls(finished.text, tools.names) if tools is not None else ()
        return chat_completion(
            command.request_id, self.created, model, finished, dropped_messages, calls
        )

    def opening(self, started: PromptStarted, dropped_messages: int) -> bytes:
        return self.writer.opening(dropped_messages)

    def text(self, token: Token) -> bytes:
        if self.watcher is None:
            return self.writer.text(token.text, token.logprobs)
        shown = self.watcher.push(token.text)
        return self.writer.text(shown) if shown else b""

    def end(self, finished: Finished) -> bytes:
        if self.watcher is None:
            return self.writer.end(finished)
        held, calls = self.watcher.finish()
        out = self.writer.text(held) if held else b""
        if calls:
            out += self.writer.tool_calls(calls)
        return out + self.writer.end(finished, called=bool(calls))

    def failure(self, message: str) -> bytes:
        return error_event(message)
