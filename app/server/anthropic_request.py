"""Anthropic's Messages API request (POST /v1/messages) checked and made the chat request it
asks for: `system` becomes the first message, `stop_sequences` the stops, text blocks the
text, and openai_request.parse_chat does the rest (the same limits, the same engine command).

Served: model, max_tokens (required), messages (user and assistant turns whose content is a
string or text blocks), system (a string or text blocks), stop_sequences, temperature (0 to 1,
as Anthropic's), top_p, top_k, stream, metadata.user_id. Anything else is a 400 that names it.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.server.openai_request import ApiError, ParsedRequest, check_served_fields, parse_chat

MESSAGES_FIELDS = frozenset(
    {"model", "max_tokens", "messages", "system", "stop_sequences", "temperature"}
    | {"top_p", "top_k", "stream", "metadata"}
)
TURN_FIELDS = frozenset({"role", "content"})
# cache_control asks to cache a prompt prefix, which the engine does for every request anyway
BLOCK_FIELDS = frozenset({"type", "text", "cache_control"})
METADATA_FIELDS = frozenset({"user_id"})
MAX_STOP_SEQUENCES = 4  # as the chat route's `stop`


def parse_messages(body: object, request_id: str, max_tokens_limit: int) -> ParsedRequest:
    """The chat request an Anthropic Messages body asks for; ApiError(400) naming the field
    that cannot be served."""
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", None)
    check_served_fields(body, MESSAGES_FIELDS, "", " on /v1/messages")
    if body.get("max_tokens") is None:
        raise _invalid("max_tokens: Field required", "max_tokens")
    metadata = body.get("metadata")
    if metadata is not None:
        check_served_fields(
            _object(metadata, "metadata"), METADATA_FIELDS, "metadata.", " on /v1/messages"
        )
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not 0 <= temperature <= 1:
        raise _invalid("temperature: must be between 0 and 1.", "temperature")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise _invalid("messages: must be a non-empty array of turns.", "messages")
    messages = [_system(body.get("system"))] if body.get("system") is not None else []
    messages += [_turn(turn, index) for index, turn in enumerate(turns)]
    chat: dict[str, object] = {
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": body.get("max_tokens"),
    }
    chat.update({k: body[k] for k in ("temperature", "top_p", "top_k", "stream") if k in body})
    stops = _stop_sequences(body.get("stop_sequences"))
    if stops:
        chat["stop"] = stops
    return parse_chat(chat, request_id, max_tokens_limit)


def _system(system: object) -> dict[str, object]:
    return {"role": "system", "content": _text(system, "system")}


def _turn(turn: object, index: int) -> dict[str, object]:
    where = f"messages.{index}"
    fields = _object(turn, where)
    check_served_fields(fields, TURN_FIELDS, f"{where}.", " on /v1/messages")
    role = fields.get("role")
    if role not in ("user", "assistant"):
        raise _invalid(f"{where}.role: must be 'user' or 'assistant'.", f"{where}.role")
    return {"role": role, "content": _text(fields.get("content"), f"{where}.content")}


def _text(content: object, where: str) -> str:
    """A string, or text blocks joined (images, documents and tool blocks are refused)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}: must be a string or an array of text blocks.", where)
    texts = []
    for index, block in enumerate(content):
        at = f"{where}.{index}"
        fields = _object(block, at)
        if fields.get("type") != "text":
            raise _invalid(
                f"{at}.type: only 'text' blocks are supported by this server.", f"{at}.type"
            )
        check_served_fields(fields, BLOCK_FIELDS, f"{at}.", " on /v1/messages")
        text = fields.get("text")
        if not isinstance(text, str):
            raise _invalid(f"{at}.text: must be a string.", f"{at}.text")
        texts.append(text)
    return "".join(texts)


def _stop_sequences(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise _invalid("stop_sequences: must be an array of strings.", "stop_sequences")
    if len(value) > MAX_STOP_SEQUENCES:
        raise _invalid(
            f"stop_sequences: at most {MAX_STOP_SEQUENCES} are supported.", "stop_sequences"
        )
    return value


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise _invalid(f"{where}: must be an object.", where)
    return value


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, param=param)
