"""Run one function in a throwaway child process spawned like the engine, and take its answer.

The backend probe and the split-device reader both load llama.cpp from a chosen backend just
to ask it something; in a child, a library that does not load or a worker llama.cpp aborts on
ends that child, never the app or the engine. The engine itself is spawned the same way
(spawn_environment, app.engine.process).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from app.backends.store import library_env

_ENVIRONMENT_LOCK = threading.Lock()


@contextlib.contextmanager
def spawn_environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ with `env` added while a child is spawned (spawn copies it then), as before
    afterwards. One spawn at a time, so two threads never see each other's variables."""
    with _ENVIRONMENT_LOCK:
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def ask_child(
    target: Callable[..., None],
    args: tuple[object, ...],
    folder: Path | None,
    *,
    name: str,
    timeout: float,
) -> tuple[object, int | None]:
    """Spawn `target(send_end, *args)` with the libraries of the backend in `folder` (None: the
    built-in one); returns what it sent (None when it sent nothing within `timeout` s, or died)
    and its exit code (negative: the signal that ended it). The child is killed if it lingers."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(send, *args), name=name, daemon=True)
    with spawn_environment(library_env(folder)):
        process.start()
    send.close()  # ours: a dead child then reads as EOF
    answer: object = None
    try:
        if receive.poll(timeout):
            answer = receive.recv()
    except (EOFError, OSError):
        answer = None
    finally:
        receive.close()
        process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join(5.0)
    return answer, process.exitcode
