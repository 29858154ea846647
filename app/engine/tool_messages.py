"""Function tools in a chat: what the client offers the model (ToolSpec), the calls an
assistant turn made (ToolCall), and how a conversation holding them reaches a chat template.

A template that knows tools (the GGUF's own, when it uses `tools`) gets them as Hugging Face
templates expect: `tools` beside `messages`, `tool_calls` on assistant turns with the
arguments as an object, `tool_call_id` on tool results. Any other template (the plain
fallbacks, a base model's) gets the same conversation in words: the functions described in a
system message, each call as the JSON object the model is asked to reply with, each result as
a user turn. Pure Python (no llama_cpp): tested without a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: its name, what it does, its parameters' JSON Schema
    (as JSON text, so the command stays plain values)."""

    name: str
    description: str = ""
    parameters: str = '{"type": "object", "properties": {}}'


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant turn made: the id the tool's result answers, the function's
    name, its arguments as JSON text (an object)."""

    id: str
    name: str
    arguments: str


def call_reply_text(name: str, arguments: object) -> str:
    """A call as the model is asked to write it (and as the server's grammar makes it)."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def describe_tools(tools: Sequence[ToolSpec]) -> str:
    """The system text that offers `tools` to a model whose template does not know tools."""
    lines = [
        "You can call functions. To call one, reply with only a JSON object of the form "
        '{"name": <the function\'s name>, "arguments": <an object of its parameters>}, and '
        "nothing else. The result comes back in the next message. Otherwise reply in words.",
        "",
        "Functions:",
    ]
    for tool in tools:
        about = f": {tool.description}" if tool.description else ""
        lines.append(f"- {tool.name}{about} Parameters (JSON Schema): {tool.parameters}")
    return "\n".join(lines)


def template_tools(tools: Sequence[ToolSpec]) -> list[dict[str, object]]:
    """`tools` as a template that knows tools reads them (OpenAI's shape)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": json.loads(tool.parameters),
            },
        }
        for tool in tools
    ]


def template_calls(calls: Sequence[ToolCall]) -> list[dict[str, object]]:
    """An assistant turn's calls as Hugging Face templates read them (arguments an object)."""
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.loads(call.arguments)},
        }
        for call in calls
    ]
