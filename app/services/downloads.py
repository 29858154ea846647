"""The download queue for the GUI: app.models.download_queue with Qt signals out.

The core queue runs each download on its own thread and reports every change; this
adapter carries those reports to the GUI thread as signals. What a view shows it reads
from the queue itself (`item(key)`), so a late report never shows an old state.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from app.models.download_queue import DEFAULT_MAX_PARALLEL, DownloadQueue
from app.models.download_state import Download, DownloadState
from app.models.hub import GgufEntry
from app.models.model_folders import ModelFolders

__all__ = ["Download", "DownloadManager", "DownloadState"]


class DownloadManager(QObject):
    """Queue, run, pause, resume, cancel and remove model downloads.

    Signals (on the GUI thread):
        download_added(str key) / download_removed(str key)
        download_changed(str key)                    any change: state, bytes, speed
        download_paused(str key) / download_cancelled(str key)
        download_finished(str key, LibraryModel)     the model, as My models lists it
        download_failed(str key, AppError)           str(error) is the sentence to show
    """

    download_added = Signal(str)
    download_removed = Signal(str)
    download_changed = Signal(str)
    download_paused = Signal(str)
    download_cancelled = Signal(str)
    download_finished = Signal(str, object)
    download_failed = Signal(str, object)
    _reported = Signal(object)  # a Download, from whichever thread the core queue reports on

    def __init__(
        self,
        folders: ModelFolders,
        *,
        state_file: Path | None = None,
        max_parallel: int = DEFAULT_MAX_PARALLEL,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        # Queued even from the GUI thread: the queue reports with its lock released, and
        # a slot that acts on the queue again must not run inside the queue's own call.
        self._reported.connect(self._on_reported, Qt.ConnectionType.QueuedConnection)
        self.queue = DownloadQueue(
            folders, state_file=state_file, max_parallel=max_parallel, on_change=self._reported.emit
        )

    @property
    def max_parallel(self) -> int:
        return self.queue.max_parallel

    def items(self) -> list[Download]:
        return self.queue.items()

    def item(self, key: str) -> Download:
        return self.queue.get(key)

    def enqueue(self, entry: GgufEntry, folder: Path | None = None) -> str:
        """Add `entry` (or resume it when it is already here); returns its key.
        `folder`: where it goes (None: the Hugging Face cache)."""
        known = {d.key for d in self.queue.items()}
        key = self.queue.enqueue(entry, folder)
        if key not in known:
            self.download_added.emit(key)
        return key

    def pause(self, key: str) -> None:
        self.queue.pause(key)

    def resume(self, key: str) -> None:
        self.queue.resume(key)

    def cancel(self, key: str) -> None:
        self.queue.cancel(key)

    def remove(self, key: str) -> None:
        if key in self.queue:
            self.queue.remove(key)
            self.download_removed.emit(key)

    def restore(self, autostart: bool = True) -> int:
        """Reload the saved queue (see DownloadQueue.restore); how many came back."""
        keys = self.queue.restore(autostart)
        for key in keys:
            self.download_added.emit(key)
        return len(keys)

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Pause running downloads (partial files kept), wait for them, save the queue."""
        self.queue.close(timeout_ms / 1000)

    def _on_reported(self, download: Download) -> None:
        if download.key not in self.queue:
            return  # removed since
        self.download_changed.emit(download.key)
        if download.state is DownloadState.FINISHED:
            self.download_finished.emit(download.key, download.model)
        elif download.state is DownloadState.FAILED:
            self.download_failed.emit(download.key, download.error)
        elif download.state is DownloadState.PAUSED:
            self.download_paused.emit(download.key)
        elif download.state is DownloadState.CANCELLED:
            self.download_cancelled.emit(download.key)
