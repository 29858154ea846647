"""What to tell the user when the engine process died: how it ended and, when llama.cpp gave
up on purpose (GGML_ASSERT, GGML_ABORT, an uncaught C++ exception), the line it wrote before
aborting, in one sentence.

Pure functions over the exit code and the tail of the engine's stderr capture
(app.engine.process); the engine turns ggml's debugger backtrace off, so that line is near
the end of the tail.
"""

from __future__ import annotations

import re
import signal

MAX_REASON_CHARS = 300  # an assert's text can quote a file's values; never a wall of text

# ggml_abort writes "<source path>:<line>: <message>" (GGML_ASSERT: "GGML_ASSERT(x) failed").
_ABORT_LINE = re.compile(r"([^\s/\\]+\.(?:c|cc|cpp|cu|h|hpp|m|mm)):(\d+): (.+)$")
# libstdc++'s terminate handler: "terminate called after throwing ..." then "  what():  ...".
_WHAT_LINE = re.compile(r"^\s*what\(\):\s*(.+)$")


def how_it_ended(exitcode: int | None) -> str:
    """'killed by signal 9, SIGKILL', 'exited with code 1' or 'stopped answering'."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"killed by signal {-exitcode}, {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def abort_reason(tail: str) -> str:
    """The line llama.cpp wrote when it gave up ('llama-model.cpp:1328: GGML_ASSERT(...)
    failed', 'std::bad_alloc'), shortened and without control characters; '' if none."""
    for line in reversed(tail.splitlines()):
        found = _ABORT_LINE.search(line.strip())
        if found:
            return _clean(f"{found.group(1)}:{found.group(2)}: {found.group(3)}")
        what = _WHAT_LINE.match(line)
        if what:
            return _clean(what.group(1))
    return ""


def crash_sentence(exitcode: int | None, tail: str) -> str:
    """One sentence for a dead engine; the tail follows only when no abort line explains it."""
    reason = abort_reason(tail)
    sentence = f"The engine stopped ({how_it_ended(exitcode)})"
    if reason:
        return f"{sentence}: llama.cpp gave up at {reason}."
    if tail.strip():  # details, after the sentence's line (the GUI's box shows them folded)
        return f"{sentence}.\nLast lines of its output:\n{tail}"
    return f"{sentence}."


def _clean(text: str) -> str:
    text = "".join(c if c.isprintable() else " " for c in text).strip()
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1] + "…"
    return text
