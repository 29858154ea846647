"""A reply read as tool calls, whole or as it streams, and the calls in OpenAI's shapes.

A reply is a call when it is nothing but one or more JSON objects `{"name": ..., "arguments":
{...}}` naming offered functions (`"parameters"` for `"arguments"`, as Llama 3.1 writes it;
each may sit in `<tool_call>...</tool_call>`, as Hermes and Qwen templates ask). A required
call is made that way by a grammar (tool_request.py); under tool_choice 'auto' the model's own
reply is read so. While a streamed reply could still turn out to be a call it is held back;
once it cannot, it streams as text.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.server.tool_request import ToolUse

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"})


@dataclass(frozen=True)
class MadeCall:
    """A call the reply made: a fresh id, the function, its arguments as JSON text."""

    id: str
    name: str
    arguments: str


def read_calls(text: str, names: Sequence[str]) -> tuple[MadeCall, ...]:
    """The calls `text` is, when it is nothing but calls to `names`; () otherwise."""
    decoder = json.JSONDecoder()
    calls: list[MadeCall] = []
    at = 0
    while True:
        at = _skip(text, at, OPEN)
        if at == len(text):
            return tuple(calls)
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return ()
        for item in value if isinstance(value, list) else [value]:
            call = _call(item, names)
            if call is None:
                return ()
            calls.append(call)
        at = _skip(text, at, CLOSE)


def call_entries(calls: Sequence[MadeCall]) -> list[dict[str, object]]:
    """A whole reply's `message.tool_calls`."""
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in calls
    ]


def call_deltas(calls: Sequence[MadeCall]) -> list[dict[str, object]]:
    """A stream's `delta.tool_calls`, as OpenAI sends them: each call's id, type and name
    first (arguments ""), then its arguments."""
    deltas: list[dict[str, object]] = []
    for index, call in enumerate(calls):
        named = {"name": call.name, "arguments": ""}
        deltas.append({"index": index, "id": call.id, "type": "function", "function": named})
        deltas.append({"index": index, "function": {"arguments": call.arguments}})
    return deltas


class CallWatcher:
    """A streamed reply's text, held back while it could still be a call."""

    def __init__(self, use: ToolUse) -> None:
        self.use = use
        self.held = ""
        self.passing = False  # the reply is words: its text goes out as it comes

    def push(self, text: str) -> str:
        """Add text; return what may be sent as content now."""
        if self.passing:
            return text
        self.held += text
        if self.use.required or _could_be_call(self.held):
            return ""
        self.passing = True
        out, self.held = self.held, ""
        return out

    def finish(self) -> tuple[str, tuple[MadeCall, ...]]:
        """At the reply's end: the text still held (words) or the calls it is."""
        held, self.held = self.held, ""
        calls = read_calls(held, self.use.names) if held.strip() else ()
        return ("", calls) if calls else (held, ())


def _could_be_call(held: str) -> bool:
    start = held.lstrip()
    return not start or start[0] in "{[" or start.startswith(OPEN) or OPEN.startswith(start)


def _skip(text: str, at: int, marker: str) -> int:
    """Past whitespace and, if it is there, `marker` and the whitespace after it."""
    while at < len(text) and text[at].isspace():
        at += 1
    if text.startswith(marker, at):
        at += len(marker)
        while at < len(text) and text[at].isspace():
            at += 1
    return at


def _call(item: object, names: Sequence[str]) -> MadeCall | None:
    if not isinstance(item, dict) or set(item) not in _CALL_KEYS or item["name"] not in names:
        return None
    arguments = item.get("arguments", item.get("parameters"))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    text = json.dumps(arguments, ensure_ascii=False)
    return MadeCall(f"call_{uuid.uuid4().hex[:24]}", str(item["name"]), text)
