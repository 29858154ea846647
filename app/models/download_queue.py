"""The app's one download queue: model downloads, at most `max_parallel` at once (no Qt).

Each download runs app.models.hub.download_entry on its own thread with a DownloadControl,
so pause keeps the partial files and resume continues from them. When one finishes, the
queue records its folder in ModelFolders and describes the model as the library lists it
(`Download.model`), so nothing has to walk the folders again. The queue is saved to a JSON
file: after a quit, or a kill, unfinished downloads come back and continue from the bytes
on disk. app/services/downloads.py shows it in the GUI; tests drive it directly.

    queue = DownloadQueue(folders, state_file=data / "downloads.json", on_change=print)
    key = queue.enqueue(entry, folder=None)        # None: the Hugging Face cache
    queue.pause(key); queue.resume(key); queue.cancel(key); queue.remove(key)
    queue.wait(key, timeout=60).state              # DownloadState.FINISHED
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypedDict, Unpack

from app.models.download_state import Download, DownloadState, download_key
from app.models.hub import GgufEntry, bytes_on_disk, download_entry, partial_paths
from app.models.hub.download_control import DownloadCancelled, DownloadControl, DownloadPaused
from app.models.library import SOURCE_FOLDER, SOURCE_HF_CACHE, LibraryModel, model_at
from app.models.model_folders import ModelFolders
from app.models.queue_file import QUEUE_STATE_FILE
from app.models.saved_queue import SavedDownload, read_saved_queue, save_queue
from app.platform.errors import AppError, DownloadError

log = logging.getLogger(__name__)

DEFAULT_MAX_PARALLEL = 2
SPEED_WINDOW_S = 3.0  # speed is the average over about this long
QUEUE_FILE = QUEUE_STATE_FILE.name


class _Changes(TypedDict, total=False):
    """What a change to a download may set (Download's fields that change as it runs)."""

    state: DownloadState
    done_bytes: int
    speed: float
    error: AppError | None
    model: LibraryModel | None


class _Job:
    def __init__(self, download: Download) -> None:
        self.download = download
        self.control: DownloadControl | None = None
        self.thread: threading.Thread | None = None
        self.samples: deque[tuple[float, int]] = deque()

    def speed(self, done: int) -> float:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > SPEED_WINDOW_S:
            self.samples.popleft()
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 and b1 >= b0 else 0.0


class DownloadQueue:
    """Queue, run, pause, resume, cancel and remove model downloads (thread-safe).

    `on_change(Download)` is called after every change: on the caller's thread for what
    the caller did, on a download's thread for its progress (about ten a second) and end.
    """

    def __init__(
        self,
        folders: ModelFolders,
        *,
        state_file: Path | None = None,
        max_parallel: int = DEFAULT_MAX_PARALLEL,
        on_change: Callable[[Download], None] | None = None,
    ) -> None:
        self.folders = folders
        self.state_file = state_file
        self.max_parallel = max(1, max_parallel)
        self._on_change = on_change
        self._jobs: dict[str, _Job] = {}
        self._cond = threading.Condition()
        self._closed_resuming: set[str] | None = None  # set by close(): what resumes next time

    # ---- queries -----------------------------------------------------------------------

    def items(self) -> list[Download]:
        with self._cond:
            return [job.download for job in self._jobs.values()]

    def get(self, key: str) -> Download:
        with self._cond:
            return self._jobs[key].download

    def __contains__(self, key: str) -> bool:
        with self._cond:
            return key in self._jobs

    def wait(self, key: str, timeout: float | None = None) -> Download:
        """Block until the download is no longer queued or downloading (or `timeout` passes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while (download := self._jobs[key].download).is_active:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            return download

    # ---- actions -----------------------------------------------------------------------

    def enqueue(self, entry: GgufEntry, folder: Path | None = None) -> str:
        """Add `entry` (or resume it when it is already here); returns its key."""
        key = download_key(entry)
        with self._cond:
            job = self._jobs.get(key)
            model = job.download.model if job else None
            if model is not None and not model.path.exists():
                del self._jobs[key]  # downloaded once, deleted since: download it again
                job = None
            if job is None:
                self._jobs[key] = _Job(
                    Download(key, entry, folder, done_bytes=_on_disk(entry, folder))
                )
                changed = self._snapshots([key, *self._schedule()])
            elif job.download.state.can_resume:
                changed = self._snapshots(self._resume(job))
            else:
                return key
            self._save()
        self._notify(changed)
        return key

    def pause(self, key: str) -> None:
        """Stop a download, keeping its partial files (a running one stops between chunks)."""
        with self._cond:
            job = self._jobs[key]
            if job.control is not None:
                job.control.pause()
                return
            if job.download.state is not DownloadState.QUEUED:
                return
            self._set(job, state=DownloadState.PAUSED)
            self._save()
            changed = self._snapshots([key])
        self._notify(changed)

    def resume(self, key: str) -> None:
        """Queue a paused, failed or cancelled download again, from the bytes on disk."""
        with self._cond:
            job = self._jobs[key]
            if not job.download.state.can_resume:
                return
            changed = self._snapshots(self._resume(job))
            self._save()
        self._notify(changed)

    def cancel(self, key: str) -> None:
        """Stop a download and delete its partial files; it stays listed, cancelled."""
        with self._cond:
            job = self._jobs[key]
            if job.control is not None:
                job.control.cancel()  # the transfer deletes its partial file
                return
            if job.download.state in (DownloadState.FINISHED, DownloadState.CANCELLED):
                return
            self._discard(job.download)
            self._set(job, state=DownloadState.CANCELLED, done_bytes=0)
            self._save()
            changed = self._snapshots([key])
        self._notify(changed)

    def remove(self, key: str) -> None:
        """Forget a download (cancelling it first when it has not finished)."""
        with self._cond:
            job = self._jobs.pop(key, None)
            if job is None:
                return
            if job.control is not None:
                job.control.cancel()  # its thread ends on its own; nobody hears of it again
            elif job.download.state in (
                DownloadState.QUEUED,
                DownloadState.PAUSED,
                DownloadState.FAILED,
            ):
                self._discard(job.download)
            self._save()
            changed = self._snapshots(self._schedule())
        self._notify(changed)

    def close(self, timeout: float = 10.0) -> None:
        """Pause the running downloads (partial files kept), wait for them, save the queue
        so the next start continues what was active."""
        with self._cond:
            self._closed_resuming = {k for k, job in self._jobs.items() if job.download.is_active}
            threads = [job.thread for job in self._jobs.values() if job.thread is not None]
            for job in self._jobs.values():
                if job.control is not None:
                    job.control.pause()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            self._save()

    def restore(self, autostart: bool = True) -> list[str]:
        """Reload the saved queue: downloads that were active continue (when `autostart`),
        the others come back paused. Returns the keys that came back."""
        saved = read_saved_queue(self.state_file) if self.state_file is not None else None
        if saved is None:
            return []
        restored: list[str] = []
        with self._cond:
            for saved_download in saved:
                entry, folder = saved_download.entry, saved_download.folder
                key = download_key(entry)
                if key in self._jobs:
                    continue
                state = (
                    DownloadState.QUEUED
                    if autostart and saved_download.resume
                    else DownloadState.PAUSED
                )
                self._jobs[key] = _Job(Download(key, entry, folder, state, _on_disk(entry, folder)))
                restored.append(key)
            changed = self._snapshots(self._schedule())
        self._notify(changed)
        return restored

    # ---- internals (all but _run and _notify run with self._cond held) ---------------------

    def _resume(self, job: _Job) -> list[str]:
        download = job.download
        self._set(
            job,
            state=DownloadState.QUEUED,
            error=None,
            done_bytes=_on_disk(download.entry, download.folder),
        )
        return [download.key, *self._schedule()]

    def _schedule(self) -> list[str]:
        """Start queued downloads while fewer than max_parallel run; returns their keys."""
        if self._closed_resuming is not None:
            return []
        running = sum(1 for job in self._jobs.values() if job.control is not None)
        started = []
        for key, job in self._jobs.items():
            if running >= self.max_parallel:
                break
            if job.download.state is DownloadState.QUEUED:
                job.control = DownloadControl()
                job.samples.clear()
                self._set(job, state=DownloadState.DOWNLOADING)
                job.thread = threading.Thread(
                    target=self._run,
                    args=(job,),
                    daemon=True,
                    name=f"download {job.download.entry.name}",
                )
                job.thread.start()
                started.append(key)
                running += 1
        return started

    def _run(self, job: _Job) -> None:
        download, control = job.download, job.control
        assert control is not None

        def progressed(done: int, _total: int) -> None:
            with self._cond:
                self._set(job, done_bytes=done, speed=job.speed(done))
                changed = self._snapshots([download.key])
            self._notify(changed)

        end: _Changes = {}
        try:
            path = download_entry(
                download.entry, folder=download.folder, control=control, on_progress=progressed
            )
            if download.folder is not None:
                self._remember(download.folder)
            source = SOURCE_FOLDER if download.folder is not None else SOURCE_HF_CACHE
            end = {
                "state": DownloadState.FINISHED,
                "done_bytes": download.total_bytes,
                "model": model_at(path, download.entry.repo_id, source),
            }
        except DownloadPaused:
            end = {"state": DownloadState.PAUSED}
        except DownloadCancelled:
            end = {"state": DownloadState.CANCELLED, "done_bytes": 0}
        except AppError as error:
            log.info("download %s failed: %s", download.key, error)
            end = {"state": DownloadState.FAILED, "error": error}
        except Exception as error:  # the thread's boundary: log the traceback, say it in words
            log.exception("download %s failed", download.key)
            end = {
                "state": DownloadState.FAILED,
                "error": DownloadError(f"The download failed unexpectedly: {error}."),
            }
        with self._cond:
            job.control = None
            if self._jobs.get(download.key) is job:  # else removed while it ran
                if end["state"] is DownloadState.FAILED:
                    end["done_bytes"] = _on_disk(download.entry, download.folder)
                self._set(job, **end)
                self._save()
            changed = self._snapshots([download.key, *self._schedule()])
        self._notify(changed)

    def _set(self, job: _Job, **changes: Unpack[_Changes]) -> None:
        if changes.get("state", DownloadState.DOWNLOADING) is not DownloadState.DOWNLOADING:
            changes.setdefault("speed", 0.0)
        job.download = replace(job.download, **changes)
        self._cond.notify_all()

    def _discard(self, download: Download) -> None:
        for path in partial_paths(download.entry, folder=download.folder):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                log.warning("could not delete %s", path, exc_info=True)

    def _remember(self, folder: Path) -> None:
        try:
            self.folders.add_download_folder(folder)
        except OSError:
            log.warning("could not add %s to the model folders", folder, exc_info=True)

    def _snapshots(self, keys: list[str]) -> list[Download]:
        """The downloads as they are now, taken under the lock so each listener call
        describes one change (emitted after the lock is released)."""
        return [self._jobs[k].download for k in dict.fromkeys(keys) if k in self._jobs]

    def _notify(self, downloads: list[Download]) -> None:
        if self._on_change is None:
            return
        for download in downloads:
            try:
                self._on_change(download)
            except Exception:
                log.exception("download listener failed")

    def _save(self) -> None:
        """Write the unfinished downloads (atomically) so a restart continues them."""
        if self.state_file is None:
            return
        resuming = self._closed_resuming
        unfinished = [
            SavedDownload(
                job.download.entry,
                job.download.folder,
                key in resuming if resuming is not None else job.download.is_active,
            )
            for key, job in self._jobs.items()
            if job.download.state not in (DownloadState.FINISHED, DownloadState.CANCELLED)
        ]
        save_queue(self.state_file, unfinished)


def _on_disk(entry: GgufEntry, folder: Path | None) -> int:
    try:
        return bytes_on_disk(entry, folder=folder)
    except OSError:
        return 0
