"""How big a request may be before any work starts on it: how deeply its JSON nests, how many
messages and how many characters of text it has. Checked on the body as read, before it is
parsed into a request and long before it is tokenized (20,000 short messages once kept every
client waiting for minutes)."""

from __future__ import annotations

import json

from app.server.client_limits import ClientLimits
from app.server.openai_request import ApiError


def check_bounds(body: bytes, limits: ClientLimits) -> None:
    """ApiError 400 for a request over a bound. A body that is not JSON passes: the route
    says so in its own words."""
    try:
        request = json.loads(body)
    except RecursionError:
        raise _too_deep(limits) from None
    except (ValueError, UnicodeDecodeError):
        return
    depth, characters = _measure(request, limits.max_json_depth)
    if depth > limits.max_json_depth:
        raise _too_deep(limits)
    # the turns: `messages` (chat, Anthropic's messages) or `input` (Responses)
    field = "input" if isinstance(request, dict) and "input" in request else "messages"
    messages = request.get(field) if isinstance(request, dict) else None
    if isinstance(messages, list) and len(messages) > limits.max_messages:
        raise ApiError(
            400,
            f"This request has {len(messages):,} messages; this server takes at most "
            f"{limits.max_messages:,} messages in one request.",
            param=field,
            code="array_above_max_length",
        )
    if characters > limits.max_text_chars:
        raise ApiError(
            400,
            f"This request has {characters:,} characters of text; this server takes at most "
            f"{limits.max_text_chars:,} characters in one request.",
            param="messages" if isinstance(messages, list) else "prompt",
            code="string_above_max_length",
        )


def _measure(value: object, max_depth: int) -> tuple[int, int]:
    """How deep the arrays and objects go (stopping past `max_depth`), and the characters in
    all its strings but the keys."""
    deepest, characters = 0, 0
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            characters += len(item)
            continue
        if not isinstance(item, (list, dict)):
            continue
        deepest = max(deepest, depth + 1)
        if deepest > max_depth:
            break
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children)
    return deepest, characters


def _too_deep(limits: ClientLimits) -> ApiError:
    return ApiError(
        400,
        f"The JSON body is nested too deeply; this server takes at most "
        f"{limits.max_json_depth} levels of arrays and objects.",
        code="invalid_json",
    )
