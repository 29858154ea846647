"""OpenAI's `response_format` as a llama.cpp grammar (GBNF text) that sampling must follow.

`{"type": "json_object"}` is any JSON object; `{"type": "json_schema", "json_schema":
{"schema": ...}}` is JSON that the schema accepts, through llama-cpp-python's own schema
converter (the one llama-server's Python port uses). The server checks a request's format
here, before it queues it, so a schema the converter cannot follow is a 400, not a failed
reply; the engine gets the grammar text (SamplingSettings.grammar).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import cast

from app.platform.errors import BadInputError

MAX_GRAMMAR_CHARS = 256 * 1024  # a schema's grammar; real ones are a few KiB
_FORMATS = "'text', 'json_object' or 'json_schema'"


class ResponseFormatError(BadInputError):
    """The request's response_format cannot be followed; the message says why."""


def response_grammar(response_format: object) -> str:
    """The grammar text for `response_format` ("" for none or {"type": "text"}).

    Raises ResponseFormatError with a sentence naming what is wrong."""
    if response_format is None:
        return ""
    if not isinstance(response_format, dict):
        raise ResponseFormatError(
            f"'response_format' must be an object whose 'type' is {_FORMATS}."
        )
    kind = response_format.get("type")
    if kind == "text":
        return ""
    if kind == "json_object":
        return cast(str, _llama_grammar().JSON_GBNF)
    if kind != "json_schema":
        raise ResponseFormatError(f"'response_format.type' must be {_FORMATS}.")
    described = response_format.get("json_schema")
    if not isinstance(described, dict):
        raise ResponseFormatError(
            "'response_format.json_schema' must be an object holding the 'schema'."
        )
    schema = described.get("schema")
    if not isinstance(schema, dict):
        raise ResponseFormatError(
            "'response_format.json_schema.schema' must be a JSON Schema object."
        )
    return _schema_grammar(schema)


def _schema_grammar(schema: dict[str, object]) -> str:
    convert = cast(Callable[[str], str], _llama_grammar().json_schema_to_gbnf)
    try:
        grammar = convert(json.dumps(schema))
    except RecursionError:
        raise ResponseFormatError(
            "'response_format.json_schema.schema' nests too deeply."
        ) from None
    except Exception as error:  # noqa: BLE001 - the converter raises bare Exception, KeyError ...
        reason = str(error).strip() or type(error).__name__
        if "allow-fetch" in reason:  # the converter's words for its command line
            reason = "it refers to a remote schema by URL; put that schema in the request"
        raise ResponseFormatError(
            f"'response_format.json_schema.schema' cannot be followed: {reason[:200]}."
        ) from None
    if len(grammar) > MAX_GRAMMAR_CHARS:
        raise ResponseFormatError(
            "'response_format.json_schema.schema' is too large to follow "
            f"(its grammar is over {MAX_GRAMMAR_CHARS // 1024} KiB)."
        )
    return grammar


@functools.cache
def _llama_grammar() -> ModuleType:
    """llama-cpp-python's llama_grammar.py, loaded on its own. It is plain Python (re, json);
    importing it through its package would load libllama into the server's process, which
    never runs a model."""
    package = importlib.util.find_spec("llama_cpp")
    folders = package.submodule_search_locations if package is not None else None
    if not folders:
        raise ResponseFormatError("response_format needs llama-cpp-python, which is missing.")
    path = Path(next(iter(folders))) / "llama_grammar.py"
    spec = importlib.util.spec_from_file_location("kvstudio_llama_grammar", path)
    if spec is None or spec.loader is None:
        raise ResponseFormatError("response_format needs llama-cpp-python's llama_grammar.py.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
