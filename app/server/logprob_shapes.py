"""Log-probabilities as OpenAI's clients parse them: chat's `{"content": [{token, logprob,
bytes, top_logprobs}]}` and the legacy completions' `{tokens, token_logprobs,
top_logprobs, text_offset}`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from app.engine.messages import TokenLogprob


class TopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]


class ContentLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class ChatLogprobs(TypedDict):
    content: list[ContentLogprob]


class CompletionLogprobs(TypedDict):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


def chat_logprobs(entries: Sequence[TokenLogprob]) -> ChatLogprobs | None:
    """The `logprobs` of a chat choice or chunk; None when none were asked for."""
    if not entries:
        return None
    return {
        "content": [
            {
                "token": entry.token,
                "logprob": entry.logprob,
                "bytes": list(entry.data),
                "top_logprobs": [
                    {"token": token, "logprob": logprob, "bytes": list(data)}
                    for token, logprob, data in entry.top
                ],
            }
            for entry in entries
        ]
    }


def completion_logprobs(
    entries: Sequence[TokenLogprob], text_offset: int = 0
) -> CompletionLogprobs | None:
    """The legacy `logprobs` of a completion choice or chunk, its offsets counted from
    `text_offset` (the characters of the reply before it); None when none were asked for."""
    if not entries:
        return None
    offsets, at = [], text_offset
    for entry in entries:
        offsets.append(at)
        at += len(entry.token)
    return {
        "tokens": [entry.token for entry in entries],
        "token_logprobs": [entry.logprob for entry in entries],
        "top_logprobs": [_by_text(entry) for entry in entries],
        "text_offset": offsets,
    }


def _by_text(entry: TokenLogprob) -> dict[str, float]:
    """The alternatives, likeliest first; a text two token ids share keeps the likelier."""
    alternatives: dict[str, float] = {}
    for token, logprob, _data in entry.top:
        alternatives.setdefault(token, logprob)
    return alternatives
