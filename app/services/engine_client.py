"""The GUI's one handle on the engine process: methods in, Qt signals out.

The model runs in a child process (app.engine.process.EngineProcess), started and read by
app.services.engine_connection: its reader thread hands each event to the GUI thread through
a queued signal; only the GUI thread touches this object's state.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.engine.messages import (
    Bench,
    ContextTrimmed,
    Evaluate,
    Failed,
    Finished,
    Generate,
    KernelWarning,
    Load,
    Loaded,
    PromptStarted,
    Token,
    Unload,
)
from app.load.profile import LoadProfile
from app.services.crash_streak import CrashStreak
from app.services.engine_connection import EngineConnection, EngineHandle, default_process
from app.services.engine_events import EngineSignals

log = logging.getLogger(__name__)


class EngineClient(EngineSignals):
    """Runs models in the engine process and reports what happens, on the GUI thread,
    through the signals of EngineSignals (app.services.engine_events).

    Replies run one at a time in the order asked for (the chat's and the local server's):
    each generate() ends in one reply_finished or request_failed with its request_id.

    Methods: load(options), generate(Generate), stop([request_id]), unload(), request(command),
    shutdown(); properties `loaded` (the last Loaded or None), `kernel_warnings`,
    `engine_pid`, `busy`, `crashes_in_a_row`, `gave_up_on`.
    """

    # From the reader thread (queued onto the GUI thread); the int is the process
    # generation, so events from an engine we already replaced are dropped.
    _event_arrived = Signal(object, int)
    _reader_crashed = Signal(str, int)

    def __init__(
        self,
        process_factory: Callable[[], EngineHandle] = default_process,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine = EngineConnection(
            process_factory, self._event_arrived.emit, self._reader_crashed.emit
        )
        self._loaded: Loaded | None = None
        self._kernel_warnings: tuple[KernelWarning, ...] = ()
        self._last_options: LoadProfile | None = None
        self._loading: LoadProfile | None = None
        self._generating: str | None = None
        self._waiting: deque[Generate] = deque()  # replies asked for while one runs
        self._requests: set[str] = set()
        self._busy = False
        self._crashes = CrashStreak()
        self._event_arrived.connect(self._on_reader_event)
        self._reader_crashed.connect(self._on_reader_crashed)

    # ---- state ----------------------------------------------------------------------

    @property
    def loaded(self) -> Loaded | None:
        return self._loaded

    @property
    def kernel_warnings(self) -> tuple[KernelWarning, ...]:
        """What llama.cpp said about the int8-K kernel for the current model."""
        return self._kernel_warnings

    @property
    def last_options(self) -> LoadProfile | None:
        """The options of the last load asked for (reloaded after a crash)."""
        return self._last_options

    @property
    def engine_pid(self) -> int | None:
        proc = self._engine.live_process()
        return proc.pid if proc is not None else None

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def crashes_in_a_row(self) -> int:
        """Engine deaths since the last finished reply or model chosen by the user."""
        return self._crashes.in_a_row

    @property
    def gave_up_on(self) -> str | None:
        """The model path the engine died on CRASHES_BEFORE_GIVING_UP times in a row, so it
        is not reloaded by itself; None otherwise."""
        return self._crashes.gave_up_on

    @property
    def generating(self) -> str | None:
        """The request_id of the reply being generated, or None."""
        return self._generating

    # ---- methods in -----------------------------------------------------------------

    def load(self, options: LoadProfile) -> None:
        """Load a model (replacing the current one). A running reply is stopped first."""
        proc = self._ensure_process()
        if proc is None:
            return
        self._crashes.reset()  # the user chose a model: it gets its tries again
        if self._generating is not None or self._waiting:
            self.stop()
        self._send_load(proc, options)

    def generate(self, command: Generate) -> None:
        """Stream a reply. While another reply runs, this one waits its turn (replies never
        interleave). After a crash the last model is reloaded first."""
        if self._generating is not None and self._engine.process is not None:
            self._waiting.append(command)
            return
        fresh = self._engine.live_process() is None
        if (
            self._loaded is None
            and self._loading is None
            and (self._last_options is None or not fresh)
        ):
            self._fail(command.request_id, "No model is loaded: load a model first.")
            return
        proc = self._ensure_process()
        if proc is None:
            self._request_failed(command.request_id, "The engine process could not start.")
            return
        if self._loaded is None and self._loading is None and self._last_options is not None:
            self._send_load(proc, self._last_options)
        self._generating = command.request_id
        self._engine.send(proc, command)
        self._update_busy()

    def stop(self, request_id: str | None = None) -> None:
        """Stop the reply `request_id` (running: llama.cpp aborts its current decode; waiting:
        dropped), or without one the running reply and every waiting one. reply_finished
        follows for each with stop_reason 'cancelled'."""
        dropped = [c for c in self._waiting if request_id in (None, c.request_id)]
        self._waiting = deque(c for c in self._waiting if c not in dropped)
        for command in dropped:
            self.reply_finished.emit(
                Finished(command.request_id, "", 0, 0, 0.0, 0.0, "cancelled", 0, time.monotonic())
            )
        running = self._generating is not None and request_id in (None, self._generating)
        if running and self._engine.process is not None:
            self._engine.process.cancel()

    def unload(self) -> None:
        proc = self._engine.live_process()
        if proc is not None:
            self.stop()
            self._engine.send(proc, Unload())
        self._loaded = None
        self._loading = None
        self._last_options = None
        self._set_kernel_warnings(())
        self._update_busy()
        self.model_unloaded.emit()

    def restart_engine(self) -> None:
        """A fresh engine process (it starts on the backend chosen now); the model that was
        loaded, or loading, is loaded again in it."""
        options = self._last_options if (self._loaded or self._loading) else None
        self.unload()
        self.shutdown()
        if options is not None:
            self.load(options)

    @property
    def engine_backend(self) -> str | None:
        """The backend the running engine process was started with (None: no engine)."""
        proc = self._engine.live_process()
        # EngineProcess names its backend; a stand-in engine (tests) has none.
        backend: str | None = getattr(proc, "backend", None)
        return backend

    def request(self, command: Evaluate | Bench) -> None:
        """Send another command (Evaluate, Bench) with a request_id; its result
        comes back through event_received. Needs a loaded model."""
        proc = self._ensure_process()
        if proc is None:
            return
        if command.request_id:
            self._requests.add(command.request_id)
        self._engine.send(proc, command)
        self._update_busy()

    def shutdown(self) -> None:
        """Stop the engine process and the reader thread (window closing)."""
        self.stop()
        self._engine.close()
        self._loaded = None
        self._loading = None
        self._generating = None
        self._requests.clear()
        self._update_busy()

    # ---- process -----------------------------------------------------------------------

    def _ensure_process(self) -> EngineHandle | None:
        proc = self._engine.process
        if proc is not None and proc.is_alive():
            return proc
        if proc is not None:  # died without the reader noticing yet
            self._forget_process("The engine stopped; starting a new one.")
        try:
            return self._engine.start()
        except Exception as error:
            log.exception("engine start failed")
            self.engine_crashed.emit(f"The engine process could not start: {error}")
            return None

    def _send_load(self, proc: EngineHandle, options: LoadProfile) -> None:
        self._loading = options
        self._last_options = options
        self._loaded = None
        self._set_kernel_warnings(())
        self._engine.send(proc, Load(options))
        self._update_busy()
        self.loading_started.emit(options)

    def _forget_process(self, message: str) -> None:
        was_loading, generating = self._loading is not None, self._generating
        waiting, self._waiting = list(self._waiting), deque()
        had_model = self._loaded is not None
        self._count_crash()
        self._engine.discard()
        self._loaded = None
        self._loading = None
        self._generating = None
        self._requests.clear()
        self._set_kernel_warnings(())
        log.error("engine crashed: %s", message)
        self.engine_crashed.emit(message)
        if was_loading:
            self.load_failed.emit(message)
        if generating is not None:
            self._fail(generating, message)
        for command in waiting:
            self._request_failed(command.request_id, message)
        if had_model:
            self.model_unloaded.emit()
        self._update_busy()

    def _count_crash(self) -> None:
        options = self._loading or self._last_options
        if options is not None and self._crashes.count(options.model_path):
            self._last_options = None

    # ---- events (GUI thread) ----------------------------------------------------------

    def _on_reader_crashed(self, message: str, generation: int) -> None:
        if generation == self._engine.generation and self._engine.process is not None:
            self._forget_process(message)

    def _on_reader_event(self, event: object, generation: int) -> None:
        if generation != self._engine.generation:
            return
        if isinstance(event, Token):
            if event.request_id == self._generating:
                self.token_received.emit(event)
        elif isinstance(event, PromptStarted):
            if event.request_id == self._generating:
                self.prompt_started.emit(event)
        elif isinstance(event, ContextTrimmed):
            if event.request_id == self._generating:
                self.context_trimmed.emit(event)
        elif isinstance(event, Finished):
            if event.request_id == self._generating:
                self._generating = None
                self._crashes.reset()  # the model works: only crashes in a row count
                self.reply_finished.emit(event)
                self._start_queued()
        elif isinstance(event, Loaded):
            log.info(
                "model loaded: %s (n_ctx %d, %s, %.1f s)",
                event.model_path,
                event.n_ctx,
                event.options.kv.words,
                event.load_seconds,
            )
            self._loading = None
            self._loaded = event
            self._set_kernel_warnings(event.warnings)
            self._update_busy()
            self.model_loaded.emit(event)
        elif isinstance(event, KernelWarning):
            if self._loading is None:  # else it is about the model being replaced
                self._set_kernel_warnings((*self._kernel_warnings, event))
        elif isinstance(event, Failed):
            self._on_failed(event)
        else:
            request_id = getattr(event, "request_id", None)
            self._requests.discard(request_id)
            self.event_received.emit(event)
        self._update_busy()

    def _on_failed(self, event: Failed) -> None:
        if event.detail:
            log.warning("engine failure detail: %s", event.detail)
        if event.request_id is not None and event.request_id == self._generating:
            self._generating = None
            self._fail(event.request_id, event.message, event.code)
            self._start_queued()
        elif event.request_id is None and self._loading is not None:
            self._loading = None
            self._last_options = None  # never auto-reload a model that fails to load
            log.warning("model load failed: %s", event.message)
            if event.kept is None:
                self._update_busy()
                self.load_failed.emit(event.message)
                return
            # The engine still holds a model (the one before): it is loaded, as far as
            # every listener goes, once the failure is said.
            kept = event.kept
            self._loaded, self._last_options = kept, kept.options
            self._set_kernel_warnings(kept.warnings)
            self._update_busy()
            name = Path(kept.model_path).name
            again = "was loaded again" if event.reloaded else "is still loaded"
            self.load_failed.emit(f"{event.message} The model before it, {name}, {again}.")
            self.model_loaded.emit(kept)
        else:
            self._requests.discard(event.request_id)
            self.event_received.emit(event)

    def _start_queued(self) -> None:
        if self._waiting:
            self.generate(self._waiting.popleft())

    def _fail(self, request_id: str, message: str, code: str = "") -> None:
        self.reply_failed.emit(message)
        self._request_failed(request_id, message, code)

    def _request_failed(self, request_id: str, message: str, code: str = "") -> None:
        self.request_failed.emit(request_id, message)
        self.request_failure.emit(Failed(message, request_id=request_id, code=code))

    def _set_kernel_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        warnings = tuple(dict.fromkeys(warnings))  # a line logged twice is one warning
        if warnings != self._kernel_warnings:
            self._kernel_warnings = warnings
            self.kernel_warnings_changed.emit(warnings)

    def _update_busy(self) -> None:
        busy = bool(self._loading is not None or self._generating is not None or self._requests)
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)
