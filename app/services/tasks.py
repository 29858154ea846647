"""Run a blocking call (network, file headers) off the GUI thread and get its result back.

    runner = TaskRunner(parent)
    runner.submit(client.search, "gemma", on_done=self._on_search_done, on_error=self._on_failed)

The callbacks run on the GUI thread (queued signal delivery): on_done(result) and
on_error(message, error), message being the one sentence to show. Each submit returns a
ticket; `runner.latest(kind)` lets a view drop the answers of superseded requests, so a
slow search never overwrites a newer one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from app.platform.errors import AppError

log = logging.getLogger(__name__)

Result = TypeVar("Result")
OnError = Callable[[str, BaseException], None]


def user_message(error: BaseException) -> str:
    """One sentence for the user: the AppError's own, or a plain fallback."""
    if isinstance(error, AppError):
        return str(error)
    if isinstance(error, OSError):
        return f"A file or network operation failed: {error.strerror or error}."
    return f"Something went wrong: {error}."


class _TaskSignals(QObject):
    """Signals: succeeded(int ticket, object result),
    failed(int ticket, str message, object error)."""

    succeeded = Signal(int, object)
    failed = Signal(int, str, object)


class _Task(QRunnable):
    def __init__(
        self,
        ticket: int,
        fn: Callable[..., object],
        args: tuple[object, ...],
        signals: _TaskSignals,
    ):
        super().__init__()
        self._ticket = ticket
        self._fn = fn
        self._args = args
        self._signals = signals

    def run(self) -> None:
        try:
            result = self._fn(*self._args)
        except Exception as error:  # the worker boundary: log it, tell the user in words
            if not isinstance(error, AppError):
                log.exception("background task %r failed", self._fn)
            self._signals.failed.emit(self._ticket, user_message(error), error)
        else:
            self._signals.succeeded.emit(self._ticket, result)


class TaskRunner(QObject):
    """A small pool for short blocking calls (search, repo listing, remote headers).

    Signals: busy_changed(bool) - True while any task runs.
    """

    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None, max_threads: int = 4) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_threads)
        self._signals = _TaskSignals(self)
        self._signals.succeeded.connect(self._on_task_succeeded)
        self._signals.failed.connect(self._on_task_failed)
        self._next = 0
        self._pending: dict[int, tuple[str, Callable[[object], None], OnError | None]] = {}
        self._latest: dict[str, int] = {}

    def submit(
        self,
        kind: str,
        fn: Callable[..., Result],
        *args: object,
        on_done: Callable[[Result], None],
        on_error: OnError | None = None,
    ) -> int:
        """Run fn(*args) on the pool; only the newest task of each `kind` reports back."""
        self._next += 1
        ticket = self._next
        self._pending[ticket] = (kind, on_done, on_error)  # type: ignore[assignment]  # Result erased
        self._latest[kind] = ticket
        if len(self._pending) == 1:
            self.busy_changed.emit(True)
        self._pool.start(_Task(ticket, fn, args, self._signals))
        return ticket

    def is_busy(self) -> bool:
        return bool(self._pending)

    def wait(self, msecs: int = 30000) -> bool:
        """Block until the pool is idle (for shutdown and tests)."""
        return self._pool.waitForDone(msecs)

    def _take(self, ticket: int) -> tuple[Callable[[object], None], OnError | None] | None:
        kind, on_done, on_error = self._pending.pop(ticket)
        if not self._pending:
            self.busy_changed.emit(False)
        if self._latest.get(kind) != ticket:
            return None  # superseded by a newer request of the same kind
        return on_done, on_error

    def _on_task_succeeded(self, ticket: int, result: object) -> None:
        callbacks = self._take(ticket)
        if callbacks:
            callbacks[0](result)

    def _on_task_failed(self, ticket: int, message: str, error: BaseException) -> None:
        callbacks = self._take(ticket)
        if callbacks and callbacks[1]:
            callbacks[1](message, error)
