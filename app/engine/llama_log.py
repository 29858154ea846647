"""Route llama.cpp's log into Python `logging` and keep its lines for parsing.

llama.cpp calls the log callback from its own threads with fragments of lines (level
GGML_LOG_LEVEL_CONT continues the previous one), so fragments are buffered until a
newline. The ctypes callback object must stay referenced for as long as llama.cpp may
call it, which is why it lives on the module-level router.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from _ctypes import CFuncPtr  # the type of a ctypes function object
from collections import deque

log = logging.getLogger("llama_cpp")

# enum ggml_log_level (ggml.h; llama-cpp-python's _logger.py has an older order):
# NONE=0, DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5
_LEVELS = {0: logging.INFO, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_CONT = 5
_MAX_LINES = 20000  # a load logs a few hundred lines; this only bounds a runaway log


class LlamaLogRouter:
    """Receives llama.cpp's log; `take_lines()` returns the lines since the last call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partial = ""
        self._level = logging.INFO
        self._lines: deque[str] = deque(maxlen=_MAX_LINES)
        self._callback: CFuncPtr | None = None  # kept alive here while llama.cpp may call it

    def install(self) -> None:
        """Make this router llama.cpp's log callback (imports llama_cpp)."""
        import llama_cpp

        if self._callback is None:
            self._callback = llama_cpp.llama_log_callback(self._on_log)
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def feed(self, level: int, text: str) -> None:
        """One fragment as llama.cpp sent it (public so tests can drive it)."""
        with self._lock:
            if level != _CONT:
                self._level = _LEVELS.get(level, logging.INFO)
            self._partial += text
            if "\n" not in self._partial:
                return
            *complete, self._partial = self._partial.split("\n")
            level_now = self._level
            for line in complete:
                self._lines.append(line)
        for line in complete:
            if line.strip():
                log.log(level_now, "%s", line)

    def flush(self) -> None:
        """Treat a pending fragment without newline as a whole line."""
        with self._lock:
            if self._partial:
                self._lines.append(self._partial)
                self._partial = ""

    def take_lines(self) -> list[str]:
        """The complete lines received since the last call (oldest first)."""
        with self._lock:
            lines = list(self._lines)
            self._lines.clear()
        return lines

    def _on_log(self, level: int, text: bytes | None, _user_data: object) -> None:
        # Never raise into C: an exception here would only be printed and lost.
        try:
            self.feed(int(level), (text or b"").decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001, S110 - logging must never break llama.cpp's thread
            pass


ROUTER = LlamaLogRouter()


def install() -> LlamaLogRouter:
    """Install the process-wide router and return it."""
    ROUTER.install()
    return ROUTER
