"""What the conversation store hands out: a conversation and a message as frozen snapshots
of their rows, the statuses a reply goes through, and the numbers a finished reply keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

# Message.status values. CUT: the reply reached its token limit (it can be continued).
DONE, STREAMING, STOPPED, FAILED, INTERRUPTED, CUT = (
    "done",
    "streaming",
    "stopped",
    "failed",
    "interrupted",
    "cut",
)


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    system_prompt: str
    # SamplingSettings fields as JSON; missing keys mean the defaults. The store only keeps
    # it: the chat reads it into SamplingSettings, ignoring what it does not know.
    sampling: dict[str, object]
    model: str | None


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "system" | "user" | "assistant"
    content: str
    created_at: float
    updated_at: float
    status: str = DONE
    model: str | None = None
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    tokens_per_second: float | None = None
    time_to_first_token_s: float | None = None
    version: int = 1  # which of the reply's versions this is, 1-based
    versions: int = 1  # how many versions the reply has (regenerating adds one)
    error: str = ""  # a failed reply: why, in one sentence


class ReplyStats(TypedDict, total=False):
    """What a finished reply keeps besides its text (ChatStore.finish_message's keywords)."""

    prompt_tokens: int | None
    generated_tokens: int | None
    tokens_per_second: float | None
    time_to_first_token_s: float | None
    error: str
