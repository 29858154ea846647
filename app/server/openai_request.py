"""OpenAI request bodies checked and turned into the engine's Generate command.

A field this server does not serve (request_fields.py keeps the list) is refused, never
ignored; it, or a field of the wrong type or out of range, raises ApiError(400) naming it
(`param`), with OpenAI's error shape (openai_shapes.error_body).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from app.engine.messages import ChatMessage, Generate, SamplingSettings
from app.engine.tool_messages import ToolCall
from app.server.output_controls import OutputControlError, output_settings
from app.server.request_fields import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    MESSAGE_FIELDS,
    STREAM_OPTION_FIELDS,
    UnsupportedField,
    check_fields,
)
from app.server.tool_request import (
    ToolRequestError,
    ToolUse,
    tool_call_id,
    tool_calls,
    tool_use,
)

MAX_STOP_STRINGS = 4  # as OpenAI
MAX_STOP_CHARS = 200
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
ROLES["tool"] = "tool"  # a function's result (tool_request.py)


class ApiError(Exception):
    """A request refused with an HTTP status and OpenAI's error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = (
            status,
            message,
            param,
            code,
            kind,
        )


@dataclass(frozen=True)
class ParsedRequest:
    command: Generate
    stream: bool
    include_usage: bool
    model: str  # the name the client asked for (any name is served by the loaded model)
    tools: ToolUse | None = None  # how the reply may call the offered functions (chat)


def parse_chat(body: object, request_id: str, max_tokens_limit: int) -> ParsedRequest:
    fields = _object(body)
    check_served_fields(fields, CHAT_FIELDS, where=" on /v1/chat/completions")
    messages = fields.get("messages")
    if messages is None:
        raise _invalid("you must provide a 'messages' parameter.", "messages", "missing")
    if not isinstance(messages, list) or not messages:
        raise _invalid("'messages' must be a non-empty array of messages.", "messages")
    chat: list[ChatMessage] = []
    for index, item in enumerate(messages):
        earlier = [call for m in chat for call in m.tool_calls]
        chat.append(_message(item, index, earlier))
    parsed = _parsed(fields, request_id, max_tokens_limit, messages=tuple(chat))
    try:
        use = tool_use(fields)
    except ToolRequestError as error:
        raise _invalid(str(error), error.param, error.code) from None
    return _with_tools(parsed, use) if use is not None else parsed


def _with_tools(parsed: ParsedRequest, use: ToolUse) -> ParsedRequest:
    """The request with its tools offered, and a required call's grammar in its sampling."""
    sampling = parsed.command.sampling
    if sampling.logprobs is not None:
        raise _invalid("'logprobs' cannot be combined with 'tools' on this server.", "logprobs")
    if use.required and sampling.grammar:
        raise _invalid(
            "'response_format' cannot be combined with a required tool call: the call's "
            "arguments already follow the function's parameters.",
            "response_format",
        )
    if use.required:
        sampling = replace(sampling, grammar=use.grammar)
    command = replace(parsed.command, sampling=sampling, tools=use.tools)
    return replace(parsed, command=command, tools=use)


def parse_completion(body: object, request_id: str, max_tokens_limit: int) -> ParsedRequest:
    fields = _object(body)
    check_served_fields(fields, COMPLETION_FIELDS, where=" on /v1/completions")
    prompt = fields.get("prompt")
    if prompt is None:
        raise _invalid("you must provide a 'prompt' parameter.", "prompt", "missing")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]  # a batch of one, as some clients send it
    if not isinstance(prompt, str):
        raise _invalid("'prompt' must be a string (one prompt per request here).", "prompt")
    if not prompt:
        raise _invalid("'prompt' must not be empty.", "prompt")
    return _parsed(fields, request_id, max_tokens_limit, prompt=prompt)


def _parsed(
    fields: Mapping[str, object],
    request_id: str,
    max_tokens_limit: int,
    messages: tuple[ChatMessage, ...] = (),
    prompt: str | None = None,
) -> ParsedRequest:
    model = fields.get("model")
    if model is None:
        raise _invalid("you must provide a model parameter.", "model", "missing")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("'model' must be a non-empty string.", "model")
    n = _integer(fields, "n", 1, 1)
    if n != 1:
        raise _invalid("only n=1 is supported: one choice per request.", "n")
    stream = _boolean(fields, "stream", False)
    stream_options = fields.get("stream_options")
    include_usage = False
    if stream_options is not None:
        if not isinstance(stream_options, dict):
            raise _invalid("'stream_options' must be an object.", "stream_options")
        check_served_fields(stream_options, STREAM_OPTION_FIELDS, "stream_options.")
        include_usage = _boolean(stream_options, "include_usage", False, "stream_options.")
    sampling = _sampling(fields, max_tokens_limit)
    try:  # response_format, logit_bias, logprobs (app.server.output_controls)
        sampling = replace(sampling, **output_settings(fields, chat=prompt is None))
    except OutputControlError as error:
        raise _invalid(str(error), error.param) from None
    command = Generate(request_id, sampling, messages=messages, prompt=prompt)
    return ParsedRequest(command, stream, include_usage, model)


def _sampling(fields: Mapping[str, object], max_tokens_limit: int) -> SamplingSettings:
    base = SamplingSettings(max_tokens=max_tokens_limit)
    name = "max_completion_tokens" if "max_completion_tokens" in fields else "max_tokens"
    max_tokens = _integer(fields, name, base.max_tokens, 1)
    if max_tokens > max_tokens_limit:
        raise _invalid(
            f"'{name}' is {max_tokens}; this server allows at most {max_tokens_limit}.", name
        )
    seed = None if fields.get("seed") is None else _integer(fields, "seed", 0, 0)
    return replace(
        base,
        max_tokens=max_tokens,
        temperature=_number(fields, "temperature", base.temperature, 0.0, 2.0),
        top_p=_number(fields, "top_p", base.top_p, 0.0, 1.0),
        top_k=_integer(fields, "top_k", base.top_k, 0),
        min_p=_number(fields, "min_p", base.min_p, 0.0, 1.0),
        repeat_penalty=_number(fields, "repeat_penalty", base.repeat_penalty, 0.0, 10.0),
        stop=_stop(fields.get("stop")),
        seed=seed,
    )


def _message(item: object, index: int, earlier: list[ToolCall]) -> ChatMessage:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise _invalid(f"'{where}' must be an object with 'role' and 'content'.", where)
    check_served_fields(item, MESSAGE_FIELDS, f"{where}.")
    role = item.get("role")
    if role not in ROLES:
        raise _invalid(
            f"'{where}.role' must be one of system, developer, user, assistant or tool, "
            f"not {_shown(role)}.",
            f"{where}.role",
        )
    content = _content(item.get("content"), f"{where}.content")
    try:
        if role == "tool":
            answered = tool_call_id(item.get("tool_call_id"), f"{where}.tool_call_id", earlier)
            return ChatMessage("tool", content, tool_call_id=answered)
        if item.get("tool_call_id") is not None:
            raise ToolRequestError(
                f"'{where}.tool_call_id' belongs on a message of role tool.",
                f"{where}.tool_call_id",
            )
        calls = item.get("tool_calls")
        if calls is not None and role != "assistant":
            raise ToolRequestError(
                f"'{where}.tool_calls' belongs on a message of role assistant.",
                f"{where}.tool_calls",
            )
        made = tool_calls(calls, f"{where}.tool_calls") if calls is not None else ()
    except ToolRequestError as error:
        raise _invalid(str(error), error.param, error.code) from None
    return ChatMessage(ROLES[role], content, tool_calls=made)


def _content(content: object, where: str) -> str:
    """A string, or OpenAI's array of content parts of which only text parts are served."""
    if content is None:
        return ""  # an assistant turn that only called tools
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _invalid(f"'{where}' may only hold text parts here.", where)
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid(f"'{where}' has a text part without a string 'text'.", where)
            parts.append(text)
        return "".join(parts)
    raise _invalid(f"'{where}' must be a string or an array of text parts.", where)


def _stop(stop: object) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _invalid("'stop' must be a string or an array of strings.", "stop")
    if len(stops) > MAX_STOP_STRINGS or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise _invalid(
            f"'stop' may hold at most {MAX_STOP_STRINGS} strings of at most "
            f"{MAX_STOP_CHARS} characters.",
            "stop",
        )
    return tuple(s for s in stops if s)


def check_served_fields(
    fields: Mapping[str, object], supported: frozenset[str], prefix: str = "", where: str = ""
) -> None:
    """ApiError(400, unsupported_parameter) naming the first field the server does not serve;
    every route checks its body with this (request_fields.check_fields)."""
    try:
        check_fields(fields, supported, prefix, where)
    except UnsupportedField as refused:
        raise ApiError(
            400, str(refused), param=refused.param, code="unsupported_parameter"
        ) from None


def _object(body: object) -> dict[str, object]:
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", None)
    return body


def _number(
    fields: Mapping[str, object], name: str, default: float, low: float, high: float
) -> float:
    value = fields.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _invalid(f"'{name}' must be a number, not {_shown(value)}.", name)
    if not low <= value <= high:
        raise _invalid(f"'{name}' must be between {low:g} and {high:g}, not {value}.", name)
    return float(value)


def _integer(fields: Mapping[str, object], name: str, default: int, low: int) -> int:
    value = fields.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"'{name}' must be an integer, not {_shown(value)}.", name)
    if value < low:
        raise _invalid(f"'{name}' must be at least {low}, not {value}.", name)
    return value


def _boolean(fields: Mapping[str, object], name: str, default: bool, prefix: str = "") -> bool:
    value = fields.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(f"'{prefix}{name}' must be true or false, not {_shown(value)}.", name)
    return value


def _shown(value: object) -> str:
    """A value in an error message: its JSON type, never the client's text itself (an error
    body is logged, and a prompt could be in it)."""
    kinds = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    kinds.update({list: "an array", dict: "an object", type(None): "null"})
    return kinds.get(type(value), "another type")


def _invalid(message: str, param: str | None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)
