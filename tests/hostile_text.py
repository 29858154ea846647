"""Text a file's author or the Hub could write, and what showing it safely means: no escape
sequence (they retitle the window and clear the screen), no bidi override, bounded length,
and the words themselves still there as text."""

from __future__ import annotations

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
HTML = "<b>bold<img src=x.png>"
# No "/" in it: it is also a file name and a repo's file name.
HOSTILE = f"{HTML}{ESCAPES}\u202eevil\x9b1m"
LONG = "N" * 300_000
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e")


def assert_clean(text: str, max_lines: int, max_chars: int) -> None:
    """`text` holds no byte a terminal or a widget would act on, and is short."""
    for char in FORBIDDEN:
        assert char not in text, (char, text[:200])
    lines = text.splitlines() or [""]
    assert len(lines) <= max_lines, len(lines)
    assert max(len(line) for line in lines) <= max_chars, max(len(line) for line in lines)
