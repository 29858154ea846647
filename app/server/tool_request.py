"""A chat request's `tools`, `tool_choice` and `parallel_tool_calls`, and the tool parts of
its messages (an assistant turn's `tool_calls`, a `tool` turn's `tool_call_id`), checked and
turned into the engine's ToolSpec/ToolCall and, where a call is required, the grammar it must
follow (llama-cpp-python's JSON-schema converter, as response_format uses).

Raises ToolRequestError (a sentence and the field's name); openai_request turns it into a
400 with OpenAI's error shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.engine.response_format import ResponseFormatError, response_grammar
from app.engine.tool_messages import ToolCall, ToolSpec
from app.server.request_fields import UnsupportedField, check_fields

MAX_TOOLS = 128  # as OpenAI
# The tools as JSON text: each schema becomes grammar, which takes time in proportion (about
# 1 s for 170 KB on 2 cores), and the call's grammar may be at most 256 KiB anyway.
MAX_TOOLS_CHARS = 256 * 1024
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
TOOL_FIELDS = frozenset({"type", "function"})
FUNCTION_FIELDS = frozenset({"name", "description", "parameters", "strict"})
CALL_FIELDS = frozenset({"id", "type", "function"})
CALL_FUNCTION_FIELDS = frozenset({"name", "arguments"})
_CHOICES = '\'none\', \'auto\', \'required\' or {"type": "function", "function": {"name": ...}}'


class ToolRequestError(ValueError):
    def __init__(self, message: str, param: str, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.code = param, code


@dataclass(frozen=True)
class ToolUse:
    """How the reply may use the offered tools: `required` (a grammar makes it one call to
    one of `names`) or not (the reply is read as a call when it is one)."""

    tools: tuple[ToolSpec, ...]
    names: tuple[str, ...]  # the functions the reply may call
    required: bool
    grammar: str  # "" unless required


def tool_use(fields: Mapping[str, object]) -> ToolUse | None:
    """The request's tool use; None when it offers no tools or says tool_choice 'none'
    (the reply is then words, and the tools are left out of the prompt)."""
    tools = _tools(fields.get("tools"))
    choice = fields.get("tool_choice")
    parallel = fields.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        where = "parallel_tool_calls"
        raise ToolRequestError(f"'{where}' must be true or false.", where)
    if choice == "none" or (choice is None and not tools):
        return None
    choice = "auto" if choice is None else choice
    if not tools:
        raise ToolRequestError("'tool_choice' needs 'tools' to choose from.", "tool_choice")
    names = _chosen(choice, tools)
    required = choice != "auto"
    grammar = _call_grammar(tools, names) if required else ""
    return ToolUse(tools, names, required, grammar)


def tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
    """An assistant message's `tool_calls` as the client sends them back."""
    if not isinstance(value, list) or not value:
        raise ToolRequestError(f"'{where}' must be a non-empty array of tool calls.", where)
    calls = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        call = _object(item, at, CALL_FIELDS)
        if call.get("type", "function") != "function":
            raise ToolRequestError(f"'{at}.type' must be 'function'.", f"{at}.type")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ToolRequestError(f"'{at}.id' must be a non-empty string.", f"{at}.id")
        function = _object(call.get("function"), f"{at}.function", CALL_FUNCTION_FIELDS)
        name = _name(function.get("name"), f"{at}.function.name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str) or not isinstance(_json(arguments), dict):
            raise ToolRequestError(
                f"'{at}.function.arguments' must be a JSON object written as a string.",
                f"{at}.function.arguments",
            )
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)


def tool_call_id(value: object, where: str, earlier: Sequence[ToolCall]) -> str:
    """A tool message's `tool_call_id`: the id of a call an earlier assistant turn made."""
    if not isinstance(value, str) or not value:
        raise ToolRequestError(
            f"'{where}' must name the tool call this message answers.", where, "missing"
        )
    if value not in {call.id for call in earlier}:
        raise ToolRequestError(
            f"'{where}' names no tool call of an earlier assistant message.", where
        )
    return value


def _tools(value: object) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ToolRequestError("'tools' must be an array of function tools.", "tools")
    if len(value) > MAX_TOOLS:
        raise ToolRequestError(f"'tools' may hold at most {MAX_TOOLS} functions.", "tools")
    if len(json.dumps(value, ensure_ascii=False)) > MAX_TOOLS_CHARS:
        raise ToolRequestError(
            f"'tools' is over {MAX_TOOLS_CHARS // 1024} KiB of JSON, more than this server "
            "turns into grammar for one request.",
            "tools",
        )
    specs: list[ToolSpec] = []
    for index, item in enumerate(value):
        at = f"tools[{index}]"
        tool = _object(item, at, TOOL_FIELDS)
        if tool.get("type") != "function":
            raise ToolRequestError(f"'{at}.type' must be 'function'.", f"{at}.type")
        function = _object(tool.get("function"), f"{at}.function", FUNCTION_FIELDS)
        name = _name(function.get("name"), f"{at}.function.name")
        if any(spec.name == name for spec in specs):
            raise ToolRequestError(
                f"'{at}.function.name' repeats the name '{name}'.", f"{at}.function.name"
            )
        description = function.get("description", "")
        if not isinstance(description, str):
            raise ToolRequestError(
                f"'{at}.function.description' must be a string.", f"{at}.function.description"
            )
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise ToolRequestError(
                f"'{at}.function.strict' must be true or false.", f"{at}.function.strict"
            )
        parameters = _parameters(function.get("parameters"), f"{at}.function.parameters")
        specs.append(ToolSpec(name, description, parameters))
    return tuple(specs)


def _parameters(value: object, where: str) -> str:
    """The parameters' schema as JSON text, once the grammar converter has taken it."""
    if value is None:
        value = {"type": "object", "properties": {}}
    if not isinstance(value, dict) or value.get("type", "object") != "object":
        raise ToolRequestError(
            f"'{where}' must be a JSON Schema of type 'object' (the arguments are an object).",
            where,
        )
    _grammar(value, where)
    return json.dumps(value, ensure_ascii=False)


def _chosen(choice: object, tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    names = tuple(tool.name for tool in tools)
    if choice in ("auto", "required"):
        return names
    if not isinstance(choice, dict) or choice.get("type") != "function":
        raise ToolRequestError(f"'tool_choice' must be {_CHOICES}.", "tool_choice")
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or name not in names:
        shown = f"'{name}'" if isinstance(name, str) and NAME.fullmatch(name) else "a function"
        raise ToolRequestError(
            f"'tool_choice' names {shown} that is not in 'tools'.", "tool_choice.function.name"
        )
    return (name,)


def _call_grammar(tools: Sequence[ToolSpec], names: Sequence[str]) -> str:
    """A grammar for one call, `{"name": ..., "arguments": ...}`, to one of `names`, its
    arguments following that function's parameters."""
    alternatives = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.name},
                "arguments": json.loads(tool.parameters),
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
        if tool.name in names
    ]
    return _grammar({"oneOf": alternatives}, "tools")


def _grammar(schema: Mapping[str, object], where: str) -> str:
    try:
        return response_grammar({"type": "json_schema", "json_schema": {"schema": schema}})
    except ResponseFormatError as error:  # its sentence, about the tool's schema
        message = str(error).replace("'response_format.json_schema.schema'", f"'{where}'")
        raise ToolRequestError(message, where) from None


def _object(value: object, where: str, fields: frozenset[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ToolRequestError(f"'{where}' must be an object.", where)
    try:
        check_fields(value, fields, f"{where}.")
    except UnsupportedField as refused:
        raise ToolRequestError(str(refused), refused.param, "unsupported_parameter") from None
    return value


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ToolRequestError(
            f"'{where}' must be a function name of 1 to 64 letters, digits, _ or -.", where
        )
    return value


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None
