"""The engine process as seen from the GUI, CLI and benchmarks.

    proc = EngineProcess(); proc.start()
    proc.send(Load(LoadProfile(model_path=...)))   # starts a (fresh) engine if needed
    event = proc.recv(timeout=30)                  # None on timeout; EngineCrashedError if it died
    proc.cancel()                                  # stop generating (inside the current decode)
    proc.stop()

The child is started with multiprocessing 'spawn' (a clean interpreter: no Qt, no
inherited threads) and talks over two one-way pipes. Its fds 1 and 2 go to a temp file, so
when llama.cpp aborts the crash report carries the line it wrote (app.engine.crash_report) and
nothing the engine prints reaches the CLI's stdout. It runs the backend
chosen in the data folder (app.backends.store): llama-cpp-python reads LLAMA_CPP_LIB_PATH when
it is imported, so that variable is in the environment the child is spawned with.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Literal, Self, overload

from app.backends.store import BUILT_IN, BackendStore, library_env
from app.engine.cancel import CancelFlag
from app.engine.child_answer import spawn_environment
from app.engine.cpu_threads import threads_for
from app.engine.crash_report import crash_sentence
from app.engine.messages import Finished, Load, Loaded, Shutdown
from app.engine.worker import main
from app.load.rpc_workers import first_unreachable
from app.platform.errors import EngineCrashedError, EngineFailedError
from app.platform.heap import steady_heap_env
from app.platform.memory_ceiling import ceiling_sentence, engine_ceiling
from app.platform.paths import data_dir

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20
# An engine that died of an allocation failing: C++'s, Python's, ggml's host malloc.
_OUT_OF_MEMORY = ("std::bad_alloc", "MemoryError", "insufficient memory")
_STOP_GRACE_S = 5.0


class EngineProcess:
    """One engine child process at a time; a dead one is replaced on the next send()."""

    def __init__(
        self, target: Callable[..., None] | None = None, backends: BackendStore | None = None
    ) -> None:
        """`target`: the child's entry point, app.engine.worker.main unless a test wraps it
        (it gets main's arguments and must be importable by the spawned child). `backends`:
        where the chosen backend is read at each start (default: the data folder's)."""
        self._target = target
        self._backends = backends
        self.backend = BUILT_IN  # the backend the running (or last) child was started with
        self.backend_notice: str | None = None  # why the chosen backend could not be used
        self._ctx = multiprocessing.get_context("spawn")
        self._cancel = CancelFlag(self._ctx)
        self._process: SpawnProcess | None = None
        self._commands: Connection[object, object] | None = None  # our sending end
        self._events: Connection[object, object] | None = None  # our receiving end
        self._stderr_path: Path | None = None
        self._workers: tuple[str, ...] = ()  # RPC workers the running child was asked to use
        self.ceiling: int | None = None  # the memory ceiling the running child set on itself

    # ---- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Start the child if none is running (a dead one is cleaned up first)."""
        if self.is_alive():
            return
        self._cleanup()
        self.ceiling = engine_ceiling()  # a bad KVSTUDIO_ENGINE_MEMORY_LIMIT: a sentence here
        threads_for(None)  # and a bad KVSTUDIO_THREADS
        command_out, command_in = self._ctx.Pipe(duplex=False)
        event_out, event_in = self._ctx.Pipe(duplex=False)
        fd, stderr_path = tempfile.mkstemp(prefix="kvstudio-engine-", suffix=".stderr")
        os.close(fd)
        self._stderr_path = Path(stderr_path)
        self._cancel.clear()

        self._process = self._ctx.Process(
            target=self._target or main,
            args=(command_out, event_in, self._cancel, stderr_path, logging.getLogger().level),
            name="kvstudio-engine",
            daemon=True,
        )
        backend, self.backend_notice = self._store().for_engine()
        if self.backend_notice:
            log.warning("%s", self.backend_notice)
        self.backend = backend.name
        with spawn_environment({**library_env(backend.folder), **steady_heap_env()}):
            self._process.start()
        # Close our copies of the child's ends, so a dead child reads as EOF here.
        command_out.close()
        event_in.close()
        self._commands, self._events = command_in, event_out
        log.info("engine process started (pid %s, backend %s)", self._process.pid, self.backend)

    def _store(self) -> BackendStore:
        if self._backends is None:
            self._backends = BackendStore(data_dir())
        return self._backends

    def stop(self, timeout: float = _STOP_GRACE_S) -> None:
        """Ask the engine to shut down; terminate (then kill) it if it does not."""
        process = self._process
        if process is None:
            return
        if process.is_alive():
            try:
                self._cancel.set()  # a generation in progress ends first
                if self._commands is not None:
                    self._commands.send(Shutdown())
            except (OSError, ValueError):
                pass
            process.join(timeout)
            if process.is_alive():
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join(2.0)
        self._cleanup()

    def kill(self) -> None:
        """Kill the engine at once (SIGKILL); the next send() starts a fresh one."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join(5.0)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    # ---- messages -------------------------------------------------------------------

    def send(self, command: object) -> None:
        """Send a command from app.engine.messages, starting a fresh engine if none runs.
        Raises EngineCrashedError when the engine died and recv() has not said so yet."""
        if isinstance(command, Load):
            self._use_workers(command.options.rpc_workers)
        if not self.is_alive():
            if self._events is not None:
                # A reader blocked in recv() is about to report this death with its reason;
                # a fresh engine started here would take over the pipes and hide it.
                raise EngineCrashedError("The engine stopped before it got the command.")
            self.start()
        if getattr(command, "request_id", None) is not None:
            # Work that can be cancelled (Generate, Evaluate, Bench) starts uncancelled;
            # cleared here, not in the child, so a cancel() right after send() holds.
            self._cancel.clear()
        try:
            if self._commands is None:  # start() just opened it; closed only by a crash
                raise BrokenPipeError
            self._commands.send(command)
        except (BrokenPipeError, ConnectionResetError, OSError) as error:
            raise self._crashed_error() from error

    def _use_workers(self, workers: tuple[str, ...]) -> None:
        # llama.cpp keeps a worker's devices registered for the life of the process (and uses
        # every registered device by default): other workers, or none, need a fresh engine.
        if self._workers and workers != self._workers and self.is_alive():
            log.info("workers changed: starting a fresh engine")
            self.stop()
        self._workers = workers

    def recv(self, timeout: float | None = None) -> object | None:
        """The next event, or None after `timeout` seconds (None: wait forever).
        Raises EngineCrashedError, once per crash, when the engine died."""
        if self._events is None:
            raise EngineCrashedError("The engine is not running.")
        try:
            if self._events.poll(timeout):
                event: object = self._events.recv()
                return event
        except (EOFError, OSError):
            pass  # the child is gone; its last events were already read
        else:
            if self.is_alive():
                return None
            if self._events.poll(0):  # it wrote events and then exited
                try:
                    last: object = self._events.recv()
                    return last
                except (EOFError, OSError):
                    pass
        raise self._crashed_error()

    def cancel(self) -> None:
        """Stop the current generation: llama.cpp stops within its current token or prompt
        batch, and no further token is generated."""
        self._cancel.set()

    # ---- crash reporting ------------------------------------------------------------

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        """The last lines the engine wrote to stderr (llama.cpp aborts, asserts)."""
        if self._stderr_path is None or not self._stderr_path.exists():
            return ""
        with self._stderr_path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])

    def _crashed_error(self) -> EngineCrashedError:
        process = self._process
        if process is not None:
            process.join(1.0)
        code = process.exitcode if process is not None else None
        tail = self.stderr_tail()
        message = crash_sentence(code, tail)
        if self.ceiling is not None and any(sign in tail for sign in _OUT_OF_MEMORY):
            log.info("%s", message)
            message = ceiling_sentence(self.ceiling)
        if self._workers:
            down = first_unreachable(self._workers, timeout=1.0)
            if down is not None:
                log.info("%s", message)
                message = (
                    f"The worker at {down[0]} stopped answering ({down[1]}), and the engine "
                    "stopped with it; the next request starts a fresh engine."
                )
        self._close_pipes()
        # Info, not warning: the caller shows the message (the CLI prints it once, the GUI
        # logs and shows it); a warning here printed it twice on the CLI's stderr.
        log.info("%s", message)
        return EngineCrashedError(message)

    def _close_pipes(self) -> None:
        for conn in (self._commands, self._events):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self._commands = self._events = None

    def _cleanup(self) -> None:
        self._close_pipes()
        if self._process is not None:
            try:
                self._process.close()
            except ValueError:
                pass  # still running (should not happen here)
            self._process = None
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
            self._stderr_path = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


@overload
def until(proc: EngineProcess, kind: Literal["Loaded"], timeout: float) -> Loaded: ...
@overload
def until(proc: EngineProcess, kind: Literal["Finished"], timeout: float) -> Finished: ...
@overload
def until(proc: EngineProcess, kind: str, timeout: float) -> object: ...
def until(proc: EngineProcess, kind: str, timeout: float) -> object:
    """Wait for the engine's event named `kind` (a class name in app.engine.messages), passing
    over others; a Failed event becomes EngineFailedError with the engine's sentence."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = proc.recv(timeout=deadline - time.monotonic())
        name = type(event).__name__
        if name == kind:
            return event
        if name == "Failed":
            raise EngineFailedError(getattr(event, "message", "The engine failed."))
    raise EngineFailedError(f"The engine did not answer within {timeout:.0f} seconds.")
