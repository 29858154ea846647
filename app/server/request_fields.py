"""The request fields each route serves: the one list a client's field is checked against.

A field not listed here is refused with a 400 that names it (`param`), never ignored, so a
client never gets a reply that silently disregards what it asked for. Fields OpenAI defines
that we do not implement are accepted only at the value that asks for nothing (NEUTRAL).
To serve a new field, add its name to the route's set below (one line) and parse it in
openai_request.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# Both routes: OpenAI's fields we implement, then llama.cpp's sampling extensions.
COMMON_FIELDS = frozenset(
    {"model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "stop"}
    | {"seed", "n", "user"}  # n: only 1; user: the caller's own id, not used in the reply
    | {"top_k", "min_p", "repeat_penalty"}
)
CHAT_FIELDS = COMMON_FIELDS | {"messages", "max_completion_tokens"}
CHAT_FIELDS |= {"response_format", "logit_bias", "logprobs", "top_logprobs"}
CHAT_FIELDS |= {"tools", "tool_choice", "parallel_tool_calls"}  # tool_request.py
COMPLETION_FIELDS = COMMON_FIELDS | {"prompt"}
COMPLETION_FIELDS |= {"response_format", "logit_bias", "logprobs"}
MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id"})
STREAM_OPTION_FIELDS = frozenset({"include_usage"})

# Not implemented, but accepted at these values, which ask for nothing (clients such as
# LangChain send presence_penalty=0 and logprobs=false with every request).
NEUTRAL: Mapping[str, object] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logprobs": False,
    "echo": False,
    "best_of": 1,
    "store": False,
}
SHOWN_NAME_CHARS = 64


class UnsupportedField(Exception):
    """`names` (the first is `param`) are not served on this route."""

    def __init__(self, names: list[str], where: str) -> None:
        shown = ", ".join(f"'{name}'" for name in names)
        verb = "is" if len(names) == 1 else "are"
        super().__init__(
            f"{shown} {verb} not supported by this server{where}; remove "
            f"{'it' if len(names) == 1 else 'them'} from the request."
        )
        self.param = names[0]


def check_fields(
    fields: Mapping[str, object], supported: Iterable[str], prefix: str = "", where: str = ""
) -> None:
    """Raise UnsupportedField naming every field of `fields` that is neither in `supported`
    nor at its NEUTRAL value (`prefix`: where the object sits, as 'messages[2].')."""
    allowed = frozenset(supported)
    refused = [
        prefix + _safe_name(name)
        for name, value in fields.items()
        if name not in allowed and not _is_neutral(name, value, prefix)
    ]
    if refused:
        raise UnsupportedField(refused, where)


def _is_neutral(name: str, value: object, prefix: str) -> bool:
    if prefix or name not in NEUTRAL:
        return False
    neutral = NEUTRAL[name]
    # False == 0 in Python; a boolean stands only for a boolean
    return value is None or (
        value == neutral and isinstance(value, bool) is isinstance(neutral, bool)
    )


def _safe_name(name: str) -> str:
    """The field's name as it may appear in a message and a log: printable, short."""
    shown = "".join(c if c.isprintable() and c not in "'\\" else "?" for c in name)
    return shown[:SHOWN_NAME_CHARS] + ("…" if len(shown) > SHOWN_NAME_CHARS else "")
