"""The engine process's entry point: a clean start, then the loop (app/engine/engine_loop.py).

Runs in a child started by app.engine.process.EngineProcess (multiprocessing 'spawn').
This module imports neither llama_cpp nor numpy: `main` imports llama_cpp first, before
anything that pulls in numpy (docs/llama-cpp-notes.md: numpy first made loads segfault;
tests/engine/test_engine_starts_clean.py checks what a spawned child imports before it).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from app.platform.memory_ceiling import apply_ceiling, engine_ceiling

if TYPE_CHECKING:
    from app.engine.cancel import CancelFlag

log = logging.getLogger(__name__)


def main(
    commands: Connection[object, object],
    events: Connection[object, object],
    cancel: CancelFlag,
    stderr_path: str,
    log_level: int,
) -> None:
    """Entry point of the engine process: read commands until Shutdown or EOF."""
    _redirect_output(stderr_path)
    # ggml's abort handler otherwise forks gdb onto this process and writes ~85 lines of
    # backtrace (to stdout, where a CLI's --json goes), burying the assert line; it reads
    # this variable when it aborts (ggml.c, ggml_print_backtrace).
    os.environ["GGML_NO_BACKTRACE"] = "1"
    # Ctrl+C in a terminal reaches the whole process group: the client decides what it
    # means (cancel the reply), the engine must not die of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Before llama.cpp exists in this process: whatever it allocates counts against the
    # ceiling, so a model that needs more ends here, not in the machine (memory_ceiling).
    ceiling = engine_ceiling()
    if ceiling is not None:
        apply_ceiling(ceiling)
    numpy_first = "numpy" in sys.modules  # the parent's main module, re-run by spawn
    import llama_cpp  # noqa: F401  # before numpy, see the module docstring

    logging.basicConfig(level=log_level, format="engine %(levelname)s %(name)s: %(message)s")
    if numpy_first:
        log.warning(
            "numpy was imported before llama_cpp in the engine (by the main module); "
            "on some machines that makes model loads crash"
        )
    # After llama_cpp: the engine's own modules import numpy (GGUF headers, the gguf package).
    # Imported now, at the start, so what a load adds to the engine's memory is the model's.
    from app.engine.engine_loop import serve

    serve(commands, events, cancel)


def _redirect_output(path: str) -> None:
    """Point fds 2 (where llama.cpp's aborts and asserts write) and 1 at the crash-report
    file: the engine shares the parent's stdout otherwise, and anything native code prints
    there would land in the middle of `kvstudio run`'s output."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)
