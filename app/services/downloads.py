"""The download queue: the core downloader on a QThreadPool, with Qt signals out.

Each download is a QRunnable that calls the core downloader with a DownloadControl
(pause / cancel between chunks) and a progress callback; a small signals QObject carries
its events back to the GUI thread. At most `max_parallel` (default 2) run at once; the
rest wait queued. The queue is saved to a JSON file, so after a quit the unfinished
downloads come back and continue from the bytes already on disk.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from app.core.errors import AppError
from app.core.hub.transfer import DownloadCancelled, DownloadControl, DownloadPaused

log = logging.getLogger(__name__)

DEFAULT_MAX_PARALLEL = 2
PROGRESS_INTERVAL_S = 0.1  # at most ten progress signals a second per download
SPEED_WINDOW_S = 3.0  # speed is averaged over about this long

# download_fn(entry, folder, control, progress) -> local path of the model (part 1 of a split);
# folder None: the HF cache. progress(bytes_done) is called from the worker thread with the
# entry's bytes on disk.
DownloadFn = Callable[[Any, "Path | None", DownloadControl, Callable[[int], None]], Any]
# partial_bytes_fn(entry, folder) -> bytes kept on disk; discard_fn(entry, folder) deletes them.
PartialFn = Callable[[Any, "Path | None"], Any]


class DownloadState(enum.Enum):
    QUEUED = "queued"
    DOWNLOADING = "downloading"
    PAUSED = "paused"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class DownloadItem:
    """One entry of the queue, owned and changed only on the GUI thread."""

    key: str
    entry: Any  # the core GgufEntry (repo_id, name, files, total_size, first_file)
    folder: Path | None = None  # where it goes; None: the Hugging Face cache
    state: DownloadState = DownloadState.QUEUED
    done_bytes: int = 0
    speed: float = 0.0  # bytes per second, recent average
    message: str = ""  # the failure sentence
    error_kind: str = ""  # the failure's AppError class name ("GatedRepoError", ...)
    path: str = ""  # the finished model's local path
    _samples: list[tuple[float, int]] = field(default_factory=list, repr=False)
    _control: DownloadControl | None = field(default=None, repr=False)

    @property
    def total_bytes(self) -> int:
        return int(self.entry.total_size)

    @property
    def eta_seconds(self) -> float | None:
        if self.state is not DownloadState.DOWNLOADING or self.speed <= 0:
            return None
        return max(0.0, (self.total_bytes - self.done_bytes) / self.speed)

    @property
    def is_active(self) -> bool:
        return self.state in (DownloadState.QUEUED, DownloadState.DOWNLOADING)


def item_key(entry: Any) -> str:
    return f"{entry.repo_id}/{entry.first_file}"


class _JobSignals(QObject):
    progressed = Signal(str, object)  # key, bytes done (object: may exceed 2**31)
    finished = Signal(str, str)  # key, path
    failed = Signal(str, str, str)  # key, sentence, error class name
    paused = Signal(str)
    cancelled = Signal(str)


class _DownloadJob(QRunnable):
    def __init__(self, item: DownloadItem, control: DownloadControl, fn: DownloadFn, signals: _JobSignals):
        super().__init__()
        self._key, self._entry, self._folder = item.key, item.entry, item.folder
        self._control, self._fn, self._signals = control, fn, signals
        self._last_emit = 0.0

    def _progress(self, done: int) -> None:
        now = time.monotonic()
        # Chunks arrive hundreds of times a second; the GUI needs a few updates.
        if now - self._last_emit >= PROGRESS_INTERVAL_S or done >= self._entry.total_size:
            self._last_emit = now
            self._signals.progressed.emit(self._key, int(done))

    def run(self) -> None:
        try:
            path = self._fn(self._entry, self._folder, self._control, self._progress)
        except DownloadPaused:
            self._signals.paused.emit(self._key)
        except DownloadCancelled:
            self._signals.cancelled.emit(self._key)
        except AppError as error:
            log.info("download %s failed: %s", self._key, error)
            self._signals.failed.emit(self._key, str(error), type(error).__name__)
        except Exception as error:  # the worker boundary: log the traceback, say it in words
            log.exception("download %s failed", self._key)
            self._signals.failed.emit(
                self._key, f"The download failed unexpectedly: {error}.", type(error).__name__
            )
        else:
            self._signals.finished.emit(self._key, str(path))


class DownloadManager(QObject):
    """Queue, run, pause, resume and cancel model downloads.

    Signals:
        download_added(str key)
        download_progressed(str key)            item(key) has the bytes, speed and ETA
        download_paused(str key)
        download_finished(str key, str path)
        download_failed(str key, str message)   one sentence (disk full, checksum, gated...)
        download_cancelled(str key)
        download_removed(str key)
        download_changed(str key)               any of the above (for list models)
    """

    download_added = Signal(str)
    download_progressed = Signal(str)
    download_paused = Signal(str)
    download_finished = Signal(str, str)
    download_failed = Signal(str, str)
    download_cancelled = Signal(str)
    download_removed = Signal(str)
    download_changed = Signal(str)

    def __init__(
        self,
        download_fn: DownloadFn,
        *,
        state_file: Path | None = None,
        entry_codec: tuple[Callable[[Any], dict], Callable[[dict], Any]] | None = None,
        partial_bytes_fn: PartialFn | None = None,
        discard_fn: PartialFn | None = None,
        max_parallel: int = DEFAULT_MAX_PARALLEL,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._download_fn = download_fn
        self._state_file = state_file
        self._codec = entry_codec
        self._partial_bytes_fn = partial_bytes_fn
        self._discard_fn = discard_fn
        self._max_parallel = max_parallel
        self._items: dict[str, DownloadItem] = {}
        self._remove_when_stopped: set[str] = set()
        self._closed = False  # after shutdown() nothing new starts
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_parallel)
        self._signals = _JobSignals(self)
        self._signals.progressed.connect(self._on_job_progressed)
        self._signals.finished.connect(self._on_job_finished)
        self._signals.failed.connect(self._on_job_failed)
        self._signals.paused.connect(self._on_job_paused)
        self._signals.cancelled.connect(self._on_job_cancelled)

    # ---- queries -----------------------------------------------------------------------

    def items(self) -> list[DownloadItem]:
        return list(self._items.values())

    def item(self, key: str) -> DownloadItem:
        return self._items[key]

    def running_count(self) -> int:
        return sum(1 for i in self._items.values() if i.state is DownloadState.DOWNLOADING)

    @property
    def max_parallel(self) -> int:
        return self._max_parallel

    # ---- actions -----------------------------------------------------------------------

    def enqueue(self, entry: Any, folder: Path | None = None) -> str:
        """Add `entry` to the queue (or resume it when it is already there); returns its key.
        `folder`: a library folder to download into (None: the Hugging Face cache)."""
        key = item_key(entry)
        item = self._items.get(key)
        if item is not None and item.state is DownloadState.FINISHED and not Path(item.path).exists():
            self.remove(key)  # downloaded once, deleted since: download it again
            item = None
        if item is not None:
            if item.state in (DownloadState.PAUSED, DownloadState.FAILED, DownloadState.CANCELLED):
                self.resume(key)
            return key
        item = DownloadItem(key, entry, folder=folder)
        item.done_bytes = self._partial_bytes(item)
        self._items[key] = item
        self.download_added.emit(key)
        self.download_changed.emit(key)
        self._schedule()
        self._save()
        return key

    def pause(self, key: str) -> None:
        item = self._items[key]
        if item.state is DownloadState.DOWNLOADING and item._control is not None:
            item._control.pause()  # the job stops between chunks and reports paused
        elif item.state is DownloadState.QUEUED:
            self._set_state(item, DownloadState.PAUSED)
            self.download_paused.emit(key)
            self._save()

    def resume(self, key: str) -> None:
        item = self._items[key]
        if item.state in (DownloadState.PAUSED, DownloadState.FAILED, DownloadState.CANCELLED):
            item.message = item.error_kind = ""
            item.done_bytes = self._partial_bytes(item)
            self._set_state(item, DownloadState.QUEUED)
            self._schedule()
            self._save()

    def cancel(self, key: str) -> None:
        """Stop and delete the partial file; the entry stays, marked cancelled."""
        item = self._items[key]
        if item.state is DownloadState.DOWNLOADING and item._control is not None:
            item._control.cancel()  # the job removes its partial file and reports cancelled
        elif item.state in (DownloadState.QUEUED, DownloadState.PAUSED, DownloadState.FAILED):
            self._discard(item)
            self._set_state(item, DownloadState.CANCELLED)
            self.download_cancelled.emit(key)
            self._save()

    def remove(self, key: str) -> None:
        """Forget a finished, failed or cancelled entry (cancel it first when active)."""
        item = self._items.get(key)
        if item is None:
            return
        if item.state is DownloadState.DOWNLOADING:
            self._remove_when_stopped.add(key)  # removed once the job reports cancelled
            self.cancel(key)
            return
        if item.state in (DownloadState.QUEUED, DownloadState.PAUSED):
            self.cancel(key)
        del self._items[key]
        self.download_removed.emit(key)
        self._save()

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Pause running jobs (partial files kept), wait for them, save the queue."""
        self._closed = True
        resume_later = [i.key for i in self._items.values() if i.is_active]
        for item in self._items.values():
            if item._control is not None:
                item._control.pause()
        self._pool.waitForDone(timeout_ms)
        self._save(resume_later)

    def restore(self, autostart: bool = True) -> int:
        """Reload the saved queue; downloads that were running continue (from disk) when
        `autostart`, others come back paused. Returns how many entries came back."""
        if not self._state_file or not self._codec or not self._state_file.exists():
            return 0
        try:
            saved = json.loads(self._state_file.read_text(encoding="utf-8"))
            records = list(saved.get("downloads", []))
        except (OSError, ValueError, AttributeError):
            log.warning("download queue file %s unreadable; starting empty", self._state_file, exc_info=True)
            return 0
        restored = 0
        for record in records:
            try:
                entry = self._codec[1](record["entry"])
            except (KeyError, TypeError, ValueError):
                log.warning("skipping unreadable saved download %r", record)
                continue
            key = item_key(entry)
            if key in self._items:
                continue
            state = DownloadState.QUEUED if autostart and record.get("resume") else DownloadState.PAUSED
            folder = Path(record["folder"]) if record.get("folder") else None
            item = DownloadItem(key, entry, folder=folder, state=state)
            item.done_bytes = self._partial_bytes(item)
            self._items[key] = item
            restored += 1
            self.download_added.emit(key)
            self.download_changed.emit(key)
        self._schedule()
        return restored

    # ---- internals ---------------------------------------------------------------------

    def _partial_bytes(self, item: DownloadItem) -> int:
        if self._partial_bytes_fn is None:
            return 0
        try:
            return int(self._partial_bytes_fn(item.entry, item.folder))
        except OSError:
            return 0

    def _discard(self, item: DownloadItem) -> None:
        item.done_bytes = 0
        if self._discard_fn is not None:
            try:
                self._discard_fn(item.entry, item.folder)
            except OSError:
                log.warning("could not delete the partial files of %s", item.key, exc_info=True)

    def _set_state(self, item: DownloadItem, state: DownloadState) -> None:
        item.state = state
        if state is not DownloadState.DOWNLOADING:
            item.speed = 0.0
            item._samples.clear()
            item._control = None
        self.download_changed.emit(item.key)

    def _schedule(self) -> None:
        if self._closed:
            return
        running = self.running_count()
        for item in self._items.values():
            if running >= self._max_parallel:
                break
            if item.state is DownloadState.QUEUED:
                item._control = DownloadControl()
                item.state = DownloadState.DOWNLOADING
                item._samples = [(time.monotonic(), item.done_bytes)]
                self.download_changed.emit(item.key)
                self._pool.start(
                    _DownloadJob(item, item._control, self._download_fn, self._signals)
                )
                running += 1

    def _on_job_progressed(self, key: str, done: object) -> None:
        item = self._items.get(key)
        if item is None or item.state is not DownloadState.DOWNLOADING:
            return
        now = time.monotonic()
        item.done_bytes = int(done)  # type: ignore[call-overload]
        item._samples.append((now, item.done_bytes))
        while len(item._samples) > 2 and now - item._samples[0][0] > SPEED_WINDOW_S:
            item._samples.pop(0)
        (t0, b0), (t1, b1) = item._samples[0], item._samples[-1]
        item.speed = (b1 - b0) / (t1 - t0) if t1 > t0 and b1 >= b0 else 0.0
        self.download_progressed.emit(key)
        self.download_changed.emit(key)

    def _finish_job(self, key: str, state: DownloadState) -> DownloadItem | None:
        item = self._items.get(key)
        if item is not None:
            self._set_state(item, state)
        self._schedule()
        return item

    def _on_job_finished(self, key: str, path: str) -> None:
        item = self._items.get(key)
        if item is not None:
            item.path = path
            item.done_bytes = item.total_bytes
        self._finish_job(key, DownloadState.FINISHED)
        self.download_finished.emit(key, path)
        self._save()

    def _on_job_failed(self, key: str, message: str, kind: str) -> None:
        item = self._items.get(key)
        if item is not None:
            item.message = message
            item.error_kind = kind
            item.done_bytes = self._partial_bytes(item)
        self._finish_job(key, DownloadState.FAILED)
        self.download_failed.emit(key, message)
        self._save()

    def _on_job_paused(self, key: str) -> None:
        self._finish_job(key, DownloadState.PAUSED)
        self.download_paused.emit(key)
        self._save()

    def _on_job_cancelled(self, key: str) -> None:
        item = self._finish_job(key, DownloadState.CANCELLED)
        if item is not None:
            self._discard(item)
        self.download_cancelled.emit(key)
        if key in self._remove_when_stopped:
            self._remove_when_stopped.discard(key)
            self.remove(key)
        self._save()

    def _save(self, resume_keys: list[str] | None = None) -> None:
        """Write the unfinished downloads (atomically) so a restart can continue them."""
        if not self._state_file or not self._codec:
            return
        if self._closed and resume_keys is None:
            return  # shutdown() wrote the final queue; late job events must not overwrite it
        records = []
        for item in self._items.values():
            if item.state in (DownloadState.FINISHED, DownloadState.CANCELLED):
                continue
            resume = item.is_active if resume_keys is None else item.key in resume_keys
            records.append({
                "entry": self._codec[0](item.entry), "resume": resume,
                "folder": str(item.folder) if item.folder else None,
            })
        try:
            self._state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._state_file.with_name(self._state_file.name + ".tmp")
            tmp.write_text(json.dumps({"version": 1, "downloads": records}, indent=1), encoding="utf-8")
            os.replace(tmp, self._state_file)
        except OSError:
            log.warning("could not save the download queue to %s", self._state_file, exc_info=True)
