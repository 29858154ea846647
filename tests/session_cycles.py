"""Load, reply, unload, again and again, in one running app (the real window, EngineClient and
engine process), with the GUI's and the engine's memory, open files and threads read after
each cycle. Shared by tests/ui/test_long_session.py (a few cycles) and
benchmarks/long_session.py (the soak).

Each step starts from the event that ended the one before (model_loaded, reply_finished,
model_unloaded), as a user's next click would; nothing waits on a clock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil
from PySide6.QtCore import QObject, QTimer, Signal

from app.gui import AppParts

PROMPT = "Tell me about the lighthouse by the sea."


@dataclass(frozen=True)
class Usage:
    """What one process holds: resident memory (bytes), open file descriptors, threads."""

    rss: int
    fds: int
    threads: int

    @classmethod
    def of(cls, pid: int) -> Usage:
        process = psutil.Process(pid)
        return cls(process.memory_info().rss, process.num_fds(), process.num_threads())


@dataclass(frozen=True)
class Cycle:
    """After one load-reply-unload: the GUI process once the model was unloaded, the engine
    when the reply had finished (model and context still loaded: what a leak would grow)."""

    number: int
    gui: Usage
    engine: Usage
    engine_pid: int
    generated_tokens: int


class LoadCycles(QObject):
    """Drives `cycles` rounds of: choose the model in the picker, new chat, type a message and
    Send, then Unload model from the picker's menu.

    Signals:
    cycle_finished(Cycle): one round done, with its measurements.
    finished(): every round done.
    failed(str): a load, reply or the engine failed; the rounds stop.
    """

    cycle_finished = Signal(object)
    finished = Signal()
    failed = Signal(str)

    def __init__(self, parts: AppParts, model_path: str, cycles: int, max_tokens: int) -> None:
        super().__init__()
        self._page = parts.window.chat
        self._engine = parts.engine
        self._model_path = model_path
        self._cycles = cycles
        self._max_tokens = max_tokens
        self._number = 0
        self._engine_usage: Usage | None = None
        self._engine_pid = 0
        self._tokens = 0
        self._running = False
        self._engine.model_loaded.connect(self._on_engine_model_loaded)
        self._engine.reply_finished.connect(self._on_engine_reply_finished)
        self._engine.model_unloaded.connect(self._on_engine_model_unloaded)
        self._engine.load_failed.connect(self._fail)
        self._engine.reply_failed.connect(self._fail)
        self._engine.engine_crashed.connect(self._fail)
        self._page.model_resolve_failed.connect(self._fail)

    def start(self) -> None:
        self._running = True
        self._next_cycle()

    def _next_cycle(self) -> None:
        self._number += 1
        self._page.load_model(self._model_path)  # the load dialog's Load

    def _on_engine_model_loaded(self, _loaded: object) -> None:
        if not self._running:
            return
        page = self._page
        page.conversations.new_button.click()
        page.session.set_conversation_settings(
            "", {"max_tokens": self._max_tokens, "temperature": 0.8, "seed": self._number}
        )
        page.input.setPlainText(f"{PROMPT} ({self._number})")
        page.send_button.click()

    def _on_engine_reply_finished(self, finished: object) -> None:
        if not self._running:
            return
        pid = self._engine.engine_pid
        assert pid is not None  # it has just sent the reply
        self._engine_usage, self._engine_pid = Usage.of(pid), pid
        self._tokens = getattr(finished, "generated_tokens", 0)
        QTimer.singleShot(0, self._unload)  # after every other handler of the reply's end

    def _unload(self) -> None:
        # The picker's menu is filled as it opens; then the user clicks Unload model.
        menu = self._page.picker.menu()
        menu.aboutToShow.emit()
        unload = next(a for a in menu.actions() if a.text() == "Unload model")
        unload.trigger()

    def _on_engine_model_unloaded(self) -> None:
        if not self._running or self._engine_usage is None:
            return
        cycle = Cycle(
            self._number, Usage.of(os.getpid()), self._engine_usage, self._engine_pid, self._tokens
        )
        self._engine_usage = None
        self.cycle_finished.emit(cycle)
        if self._number >= self._cycles:
            self._running = False
            self.finished.emit()
        else:
            # After the chat page's own handlers for the unload have run.
            QTimer.singleShot(0, self._next_cycle)

    def _fail(self, message: str) -> None:
        if self._running:
            self._running = False
            self.failed.emit(f"cycle {self._number}: {message}")
