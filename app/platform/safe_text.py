"""Text taken from a file or the Hub, made safe to show: in a terminal and in a widget.

A GGUF's name, description, licence, tensor names and a repo's file names are whatever the
file's author wrote: escape sequences that retitle or clear a terminal, bidi overrides that
show text reversed, megabytes in one "name". `safe_text` keeps the words and drops the rest;
`safe_stream` does the same for a model's streamed reply, which keeps its line breaks and tabs.
"""

from __future__ import annotations

import unicodedata

# Bidi embeddings, overrides and isolates, plus the invisible marks that reorder text.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
ELLIPSIS = "…"


def _is_control(char: str) -> bool:
    """C0, DEL, C1 (ESC, CSI and all a terminal acts on), lone surrogates and bidi controls."""
    return char in _BIDI or unicodedata.category(char) in ("Cc", "Cs")


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def safe_text(value: object, limit: int = 200, keep_newlines: bool = False) -> str:
    """`value` as one line (or lines, with `keep_newlines`) of at most `limit` characters:
    control characters (C0, DEL, C1: ESC and all that follows from it) and bidi controls
    become a visible '?', line breaks a space, and anything longer is cut with an ellipsis."""
    text = value if isinstance(value, str) else str(value)
    out: list[str] = []
    for char in text[:limit]:  # never scan megabytes to show two hundred characters
        if char == "\n" and keep_newlines:
            out.append(char)
        elif char in "\t\r\n\u2028\u2029":
            out.append(" ")
        elif _is_control(char):
            out.append("?")
        else:
            out.append(char)
    shown = "".join(out)
    return shown[: max(limit - 1, 0)] + ELLIPSIS if len(text) > limit else shown


def safe_stream(text: str) -> str:
    """A piece of a model's reply as it may reach a terminal: newlines and tabs kept, every
    other control character dropped (a '?' per escape would litter a reply that a model
    decorated with colours). Each character is judged alone, so a reply cleaned token by
    token reads the same as cleaned whole, and a multi-byte character is never split."""
    return "".join(c for c in text if c in "\n\t" or not _is_control(c))
