"""A conversation with tools, made plain for a chat template that does not know tools.

The functions are offered in a system message (after the client's own system messages, so
trimming to fit the context keeps it), each assistant call becomes the JSON object the model
is asked to reply with, and each tool result a user turn that names the function it came
from. Every piece stays message content: it is tokenized as plain text, never as markers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from app.engine.messages import ChatMessage
from app.engine.tool_messages import ToolSpec, call_reply_text, describe_tools


def uses_tools(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> bool:
    """Whether the conversation has anything a template must know tools for."""
    return bool(tools) or any(m.tool_calls or m.role == "tool" for m in messages)


def tools_in_words(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[ChatMessage]:
    """`messages` with `tools` described and calls and results written as text."""
    names: dict[str, str] = {}  # call id -> function name, for the results that answer it
    plain: list[ChatMessage] = []
    for message in messages:
        if message.tool_calls:
            names.update((call.id, call.name) for call in message.tool_calls)
            calls = [call_reply_text(c.name, json.loads(c.arguments)) for c in message.tool_calls]
            text = "\n".join(([message.content] if message.content else []) + calls)
            plain.append(ChatMessage(message.role, text))
        elif message.role == "tool":
            name = names.get(message.tool_call_id, "the function")
            plain.append(ChatMessage("user", f"Result of {name}: {message.content}"))
        else:
            plain.append(replace(message, tool_calls=(), tool_call_id=""))
    if tools:
        first_turn = next((i for i, m in enumerate(plain) if m.role != "system"), len(plain))
        plain.insert(first_turn, ChatMessage("system", describe_tools(tools)))
    return plain
