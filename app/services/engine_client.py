"""The GUI's one handle on the engine process: methods in, Qt signals out.

The model runs in a child process (app.engine.process.EngineProcess). A plain Python
reader thread blocks on its recv() and hands each event to the GUI thread through a
queued signal; only the GUI thread touches this object's state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.engine.messages import (
    ContextTrimmed,
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
from app.engine.process import EngineProcess
from app.load.profile import LoadProfile
from app.platform.errors import EngineCrashedError

log = logging.getLogger(__name__)

# An engine that dies this many times in a row on one model is not started for it again until
# the user loads a model: a file llama.cpp aborts on would otherwise crash it on every message.
CRASHES_BEFORE_GIVING_UP = 3


def _default_process() -> Any:
    return EngineProcess()


class EngineClient(QObject):
    """Runs models in the engine process and reports what happens, on the GUI thread.

    Signals:
        loading_started(LoadProfile): a load was sent (also when a crashed engine is
            restarted to reload the last model before a generate request).
        model_loaded(Loaded): the model is ready; Loaded carries KV cache sizes,
            compute buffers and the kernel warnings parsed from llama.cpp's log.
        load_failed(str): the load failed; one sentence for the user. When the engine
            still holds the model loaded before (kept, or loaded again), the sentence says so
            and model_loaded(that model) follows at once.
        model_unloaded(): the model was unloaded (unload(), or the engine died).
        prompt_started(PromptStarted): the engine began evaluating the reply's prompt;
            `at` is the engine's time.monotonic(), however late this signal is handled.
        context_trimmed(ContextTrimmed): the reply's conversation did not fit the context,
            so its oldest messages were left out (a notice about the conversation, not
            about the kernel).
        token_received(Token): one streamed piece of the reply (request_id, text, n_past, at).
        reply_finished(Finished): the reply ended (stop_reason "stop", "length" or
            "cancelled"), with token counts, time to first token and tokens/s.
        reply_failed(str): the reply could not be generated (or the engine died during it).
        request_failed(str, str): the same with the request_id (first) of the reply that
            failed, also for a reply that was waiting its turn when the engine died.
        engine_crashed(str): the engine process died; one sentence (how it ended, the line
            llama.cpp wrote when it gave up) or words plus the tail of its stderr. Nothing
            else is lost: the next request starts a fresh engine and reloads the model,
            unless it died CRASHES_BEFORE_GIVING_UP times in a row on that model
            (`gave_up_on` then names it and `last_options` is None).
        kernel_warnings_changed(tuple): every KernelWarning of the current model, as
            objects: llama.cpp said the int8-K kernel is not what runs (K/V pair not
            compiled, converted to f16, Flash Attention off, attention on the CPU). Set
            from Loaded, grown by warnings logged later (first use), emptied when a load
            starts or the model goes away.
        busy_changed(bool): True while loading, generating or running another request.
        event_received(object): any other event (Evaluated, BenchDone, a Failed for a
            request sent with request()), unchanged.

    Replies run one at a time in the order asked for (the chat's and the local server's):
    each generate() ends in one reply_finished or request_failed with its request_id.

    Methods: load(options), generate(Generate), stop([request_id]), unload(), request(command),
    shutdown(); properties `loaded` (the last Loaded or None), `kernel_warnings`,
    `engine_pid`, `busy`, `crashes_in_a_row`, `gave_up_on`.
    """

    loading_started = Signal(object)
    model_loaded = Signal(object)
    load_failed = Signal(str)
    model_unloaded = Signal()
    prompt_started = Signal(object)
    context_trimmed = Signal(object)
    token_received = Signal(object)
    reply_finished = Signal(object)
    reply_failed = Signal(str)
    request_failed = Signal(str, str)
    engine_crashed = Signal(str)
    kernel_warnings_changed = Signal(object)  # tuple[KernelWarning, ...]
    busy_changed = Signal(bool)
    event_received = Signal(object)

    # From the reader thread (queued onto the GUI thread); the int is the process
    # generation, so events from an engine we already replaced are dropped.
    _event_arrived = Signal(object, int)
    _reader_crashed = Signal(str, int)

    def __init__(
        self,
        process_factory: Callable[[], Any] = _default_process,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._factory = process_factory
        self._proc: Any = None
        self._reader: threading.Thread | None = None
        self._reader_stop = threading.Event()
        self._generation = 0
        self._loaded: Loaded | None = None
        self._kernel_warnings: tuple[KernelWarning, ...] = ()
        self._last_options: LoadProfile | None = None
        self._loading: LoadProfile | None = None
        self._generating: str | None = None
        self._waiting: deque[Generate] = deque()  # replies asked for while one runs
        self._requests: set[str] = set()
        self._busy = False
        self._crashed_model: str | None = None  # the model the last crashes happened with
        self._crashes_in_a_row = 0
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
        if self._proc is not None and self._proc.is_alive():
            return int(self._proc.pid)
        return None

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def crashes_in_a_row(self) -> int:
        """Engine deaths since the last finished reply or model chosen by the user."""
        return self._crashes_in_a_row

    @property
    def gave_up_on(self) -> str | None:
        """The model path the engine died on CRASHES_BEFORE_GIVING_UP times in a row, so it
        is not reloaded by itself; None otherwise."""
        if self._crashes_in_a_row >= CRASHES_BEFORE_GIVING_UP:
            return self._crashed_model
        return None

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
        self._crashes_in_a_row = 0  # the user chose a model: it gets its tries again
        if self._generating is not None or self._waiting:
            self.stop()
        self._send_load(proc, options)

    def generate(self, command: Generate) -> None:
        """Stream a reply. While another reply runs, this one waits its turn (replies never
        interleave). After a crash the last model is reloaded first."""
        if self._generating is not None and self._proc is not None:
            self._waiting.append(command)
            return
        fresh = self._proc is None or not self._proc.is_alive()
        if (
            self._loaded is None
            and self._loading is None
            and (self._last_options is None or not fresh)
        ):
            self._fail(command.request_id, "No model is loaded: load a model first.")
            return
        proc = self._ensure_process()
        if proc is None:
            self.request_failed.emit(command.request_id, "The engine process could not start.")
            return
        if self._loaded is None and self._loading is None and self._last_options is not None:
            self._send_load(proc, self._last_options)
        self._generating = command.request_id
        self._send(proc, command)
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
        if running and self._proc is not None:
            self._proc.cancel()

    def unload(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self.stop()
            self._send(self._proc, Unload())
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
        proc = self._proc
        return getattr(proc, "backend", None) if proc is not None and proc.is_alive() else None

    def request(self, command: Any) -> None:
        """Send another command (Evaluate, Bench, ...) with a request_id; its result
        comes back through event_received. Needs a loaded model."""
        proc = self._ensure_process()
        if proc is None:
            return
        request_id = getattr(command, "request_id", None)
        if request_id:
            self._requests.add(request_id)
        self._send(proc, command)
        self._update_busy()

    def shutdown(self) -> None:
        """Stop the engine process and the reader thread (window closing)."""
        self.stop()
        proc, self._proc = self._proc, None
        self._reader_stop.set()
        if self._reader is not None:  # first, so it never reads the engine's exit as a crash
            self._reader.join(timeout=2)
            self._reader = None
        if proc is not None:
            try:
                proc.cancel()
                proc.stop()
            except Exception:  # the window is closing: never block that on the engine
                log.exception("engine did not stop cleanly; killing it")
                try:
                    proc.kill()
                except Exception:
                    log.exception("engine kill failed")
        self._loaded = None
        self._loading = None
        self._generating = None
        self._requests.clear()
        self._update_busy()

    # ---- process and reader thread ----------------------------------------------------

    def _ensure_process(self) -> Any:
        if self._proc is not None and self._proc.is_alive():
            return self._proc
        if self._proc is not None:  # died without the reader noticing yet
            self._forget_process("The engine stopped; starting a new one.")
        try:
            proc = self._factory()
            proc.start()
        except Exception as error:
            log.exception("engine start failed")
            self.engine_crashed.emit(f"The engine process could not start: {error}")
            return None
        self._generation += 1
        self._proc = proc
        self._reader_stop = threading.Event()
        self._reader = threading.Thread(
            target=self._read_events,
            args=(proc, self._generation, self._reader_stop),
            name=f"engine-reader-{self._generation}",
            daemon=True,
        )
        self._reader.start()
        log.info("engine started (pid %s)", proc.pid)
        return proc

    def _read_events(self, proc: Any, generation: int, stop: threading.Event) -> None:
        """Reader thread: only recv() and emit; never touches this object's state."""
        while not stop.is_set():
            try:
                event = proc.recv(timeout=0.2)
            except EngineCrashedError as error:
                if not stop.is_set():
                    self._reader_crashed.emit(str(error), generation)
                return
            except Exception as error:
                if not stop.is_set():
                    log.exception("engine reader failed")
                    self._reader_crashed.emit(f"The engine stopped responding: {error}", generation)
                return
            if event is not None:
                self._event_arrived.emit(event, generation)

    def _send(self, proc: Any, command: Any) -> None:
        try:
            proc.send(command)
        except Exception as error:  # noqa: BLE001 - the pipe broke: the reader reports the crash
            log.warning("send to engine failed: %s", error)

    def _send_load(self, proc: Any, options: LoadProfile) -> None:
        self._loading = options
        self._last_options = options
        self._loaded = None
        self._set_kernel_warnings(())
        self._send(proc, Load(options))
        self._update_busy()
        self.loading_started.emit(options)

    def _forget_process(self, message: str) -> None:
        was_loading, generating = self._loading is not None, self._generating
        waiting, self._waiting = list(self._waiting), deque()
        had_model = self._loaded is not None
        self._count_crash()
        self._reader_stop.set()
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
                proc.stop()  # a dead process: only cleans up its pipes and stderr file
            except Exception:
                log.debug("cleanup after crash failed", exc_info=True)
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
            self.request_failed.emit(command.request_id, message)
        if had_model:
            self.model_unloaded.emit()
        self._update_busy()

    def _count_crash(self) -> None:
        options = self._loading or self._last_options
        model = options.model_path if options is not None else None
        if model is None:
            return
        if model != self._crashed_model:
            self._crashed_model, self._crashes_in_a_row = model, 0
        self._crashes_in_a_row += 1
        if self._crashes_in_a_row >= CRASHES_BEFORE_GIVING_UP:
            log.error(
                "the engine died %d times in a row with %s; not reloading it",
                self._crashes_in_a_row,
                model,
            )
            self._last_options = None

    # ---- events (GUI thread) ----------------------------------------------------------

    def _on_reader_crashed(self, message: str, generation: int) -> None:
        if generation == self._generation and self._proc is not None:
            self._forget_process(message)

    def _on_reader_event(self, event: Any, generation: int) -> None:
        if generation != self._generation:
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
                self._crashes_in_a_row = 0  # the model works: only crashes in a row count
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
            self._fail(event.request_id, event.message)
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

    def _fail(self, request_id: str, message: str) -> None:
        self.reply_failed.emit(message)
        self.request_failed.emit(request_id, message)

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
