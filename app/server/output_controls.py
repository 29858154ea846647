"""The request fields that shape or report each token: response_format, logit_bias, and
logprobs (chat: `logprobs` true with `top_logprobs` 0..20; completions: `logprobs` 0..5, as
OpenAI's legacy API), checked and turned into SamplingSettings fields.

Raises OutputControlError (a sentence and the field's name); openai_request turns it into a
400 with OpenAI's error shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

from app.engine.response_format import ResponseFormatError, response_grammar

MAX_TOP_LOGPROBS = 20  # chat, as OpenAI
MAX_COMPLETION_LOGPROBS = 5  # completions, as OpenAI's legacy API
MAX_BIASED_TOKENS = 1024


class OutputControlError(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class OutputSettings(TypedDict):
    grammar: str
    logit_bias: tuple[tuple[int, float], ...]
    logprobs: int | None


def output_settings(fields: Mapping[str, object], chat: bool) -> OutputSettings:
    try:
        grammar = response_grammar(fields.get("response_format"))
    except ResponseFormatError as error:
        raise OutputControlError(str(error), "response_format") from None
    return {
        "grammar": grammar,
        "logit_bias": _logit_bias(fields.get("logit_bias")),
        "logprobs": _chat_logprobs(fields) if chat else _completion_logprobs(fields),
    }


def _logit_bias(value: object) -> tuple[tuple[int, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise OutputControlError(
            "'logit_bias' must be an object mapping token ids to numbers from -100 to 100.",
            "logit_bias",
        )
    if len(value) > MAX_BIASED_TOKENS:
        raise OutputControlError(
            f"'logit_bias' may hold at most {MAX_BIASED_TOKENS} tokens.", "logit_bias"
        )
    biases = []
    for key, bias in value.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()):
            raise OutputControlError(
                "'logit_bias' keys must be token ids (whole numbers written as strings).",
                "logit_bias",
            )
        number = _number(bias)
        if number is None or not -100 <= number <= 100:
            raise OutputControlError(
                f"'logit_bias' for token {int(key)} must be a number from -100 to 100.",
                "logit_bias",
            )
        biases.append((int(key), number))
    return tuple(biases)


def _chat_logprobs(fields: Mapping[str, object]) -> int | None:
    wanted = fields.get("logprobs")
    top = fields.get("top_logprobs")
    if wanted is not None and not isinstance(wanted, bool):
        raise OutputControlError("'logprobs' must be true or false.", "logprobs")
    count = _whole(top)
    if top is not None:
        if count is None or not 0 <= count <= MAX_TOP_LOGPROBS:
            raise OutputControlError(
                f"'top_logprobs' must be a whole number from 0 to {MAX_TOP_LOGPROBS}.",
                "top_logprobs",
            )
        if not wanted:
            raise OutputControlError("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
    return (count or 0) if wanted else None


def _completion_logprobs(fields: Mapping[str, object]) -> int | None:
    wanted = fields.get("logprobs")
    if wanted is None or wanted is False:
        return None
    count = _whole(wanted)
    if count is None or not 0 <= count <= MAX_COMPLETION_LOGPROBS:
        raise OutputControlError(
            f"'logprobs' must be a whole number from 0 to {MAX_COMPLETION_LOGPROBS} here "
            "(how many likely tokens to list beside each one).",
            "logprobs",
        )
    return count


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
