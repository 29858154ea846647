"""A conversation as a Markdown or JSON file the user keeps or shares.

Pure functions of what the conversation store holds, so they are tested without Qt. They take
the conversation and its messages only: nothing else (settings, tokens) can end up in a file.
Each reply is written as the version shown; JSON also lists a regenerated reply's other versions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import NotRequired, TypedDict

from app.chats.records import Conversation, Message
from app.platform.atomic_write import write_atomically

FORMAT = "kvstudio-conversation"
FORMAT_VERSION = 1
_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


class ExportedMessage(TypedDict):
    """One message in the JSON export (`all_versions`: a regenerated reply's every version)."""

    role: str
    text: str
    model: str | None
    time: str
    status: str
    generated_tokens: NotRequired[int]
    tokens_per_second: NotRequired[float]
    version: NotRequired[int]
    versions: NotRequired[int]
    all_versions: NotRequired[list[ExportedMessage]]


class ExportedConversation(TypedDict):
    """The JSON export's top level (FORMAT, version FORMAT_VERSION)."""

    format: str
    format_version: int
    title: str
    created_at: str
    updated_at: str
    system_prompt: str
    sampling: dict[str, object]
    messages: list[ExportedMessage]


# A reply's versions by message id (ChatStore.reply_versions), for the JSON export.
VersionsOf = Callable[[int], list[Message]]


def _time(seconds: float) -> str:
    """Local time with its offset, to the second (ISO 8601)."""
    return datetime.fromtimestamp(seconds).astimezone().isoformat(timespec="seconds")


def _model_name(path: str | None) -> str | None:
    if not path:
        return None
    return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".gguf")


def conversation_markdown(conversation: Conversation, messages: Sequence[Message]) -> str:
    """The conversation as Markdown: a title, then each message under a heading naming who
    wrote it (and for a reply, the model), its text as it was written (Markdown stays Markdown)."""
    lines = [f"# {_one_line(conversation.title)}", "", f"*{_time(conversation.created_at)}*", ""]
    if conversation.system_prompt.strip():
        lines += ["## System prompt", "", conversation.system_prompt.strip(), ""]
    for message in messages:
        heading = _ROLE_NAMES.get(message.role, message.role)
        model = _model_name(message.model)
        if message.role == "assistant" and model:
            heading += f" ({model})"
        if message.versions > 1:
            heading += f", version {message.version} of {message.versions}"
        lines += [f"## {heading}", "", f"*{_time(message.created_at)}*", ""]
        lines += [message.content.rstrip() or "*(no text)*", ""]
    return "\n".join(lines)


def conversation_json(
    conversation: Conversation,
    messages: Sequence[Message],
    versions_of: VersionsOf | None = None,
) -> str:
    """The conversation as JSON: its title, times, system prompt and sampling, and its
    messages in order with role, text, model, time and status; `versions_of` adds every
    version of a regenerated reply."""
    data: ExportedConversation = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "title": conversation.title,
        "created_at": _time(conversation.created_at),
        "updated_at": _time(conversation.updated_at),
        "system_prompt": conversation.system_prompt,
        "sampling": conversation.sampling,
        "messages": [],
    }
    for message in messages:
        item = _message(message)
        if message.versions > 1:
            item["version"] = message.version
            item["versions"] = message.versions
            if versions_of is not None:
                item["all_versions"] = [_message(v) for v in versions_of(message.id)]
        data["messages"].append(item)
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _message(message: Message) -> ExportedMessage:
    item: ExportedMessage = {
        "role": message.role,
        "text": message.content,
        "model": message.model,
        "time": _time(message.created_at),
        "status": message.status,
    }
    if message.generated_tokens is not None:
        item["generated_tokens"] = message.generated_tokens
    if message.tokens_per_second is not None:
        item["tokens_per_second"] = round(message.tokens_per_second, 2)
    return item


def write_export(path: Path, text: str) -> None:
    """Write an export whole or not at all (a full disk leaves no half file)."""
    write_atomically(path, text)


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "Untitled"
