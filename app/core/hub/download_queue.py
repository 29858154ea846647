"""The download queue: several model downloads, at most `max_parallel` at once (threads, no Qt).

Each job runs app.core.hub.downloader.download_entry with its own DownloadControl, so
pause keeps the partial files and resume continues from them.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.core.errors import AppError
from app.core.hub.client import GgufEntry
from app.core.hub.downloader import download_entry, partial_paths
from app.core.hub.transfer import DownloadCancelled, DownloadControl, DownloadPaused

log = logging.getLogger(__name__)


# ---- the queue ----------------------------------------------------------------------------


class JobState(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class DownloadProgress:
    """A snapshot of one job, passed to `on_progress` and returned by Downloader.get()."""

    job_id: int
    repo_id: str
    name: str  # the entry's display name
    state: JobState
    downloaded: int  # bytes on disk, all parts
    total: int
    speed: float  # bytes per second (smoothed; 0 when not running)
    eta: float | None  # seconds left, None when unknown
    message: str | None = None  # the error sentence when FAILED
    path: Path | None = None  # part 1's path when DONE

    @property
    def fraction(self) -> float:
        return self.downloaded / self.total if self.total else 0.0


ProgressCallback = Callable[[DownloadProgress], None]


class _Job:
    def __init__(self, job_id: int, entry: GgufEntry, revision: str, folder: Path | None) -> None:
        self.entry, self.revision, self.folder = entry, revision, folder
        self.control = DownloadControl()
        self.progress = DownloadProgress(
            job_id, entry.repo_id, entry.name, JobState.QUEUED, 0, entry.total_size, 0.0, None
        )
        self.meter = _RateMeter()


class _RateMeter:
    """Bytes per second over the last few seconds (an exponential moving average)."""

    def __init__(self) -> None:
        self.last_t: float | None = None
        self.last_n = 0
        self.rate = 0.0

    def update(self, n: int) -> float:
        now = time.monotonic()
        if self.last_t is None:
            self.last_t, self.last_n = now, n
            return self.rate
        dt = now - self.last_t
        if dt >= 0.25:
            instant = max(0, n - self.last_n) / dt
            self.rate = instant if self.rate == 0 else 0.7 * self.rate + 0.3 * instant
            self.last_t, self.last_n = now, n
        return self.rate

    def reset(self) -> None:
        self.last_t, self.last_n, self.rate = None, 0, 0.0


class Downloader:
    """A queue of model downloads, at most `max_parallel` at once, on plain threads.

    `on_progress(DownloadProgress)` is called from worker threads (about 10 times a second
    per running job, and on every state change). Jobs are identified by int ids.
    """

    def __init__(
        self,
        *,
        max_parallel: int = 2,
        on_progress: ProgressCallback | None = None,
        cache_dir: Path | None = None,
        token: str | None = None,
    ) -> None:
        self.max_parallel = max(1, max_parallel)
        self._on_progress = on_progress
        self._cache_dir = cache_dir
        self._token = token
        self._jobs: dict[int, _Job] = {}
        self._queue: list[int] = []
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._next_id = 1
        self._closed = False

    # -- public -----------------------------------------------------------------------------

    def enqueue(self, entry: GgufEntry, *, revision: str = "main", folder: Path | None = None) -> int:
        """Queue `entry`; returns its job id (the existing id if it is already queued/running)."""
        with self._cond:
            for job_id, job in self._jobs.items():
                same = (job.entry, job.revision, job.folder) == (entry, revision, folder)
                if same and not job.progress.state.is_final and job.progress.state is not JobState.PAUSED:
                    return job_id
            job_id = self._next_id
            self._next_id += 1
            self._jobs[job_id] = _Job(job_id, entry, revision, folder)
            self._queue.append(job_id)
            self._ensure_workers()
            self._cond.notify_all()
        self._emit(job_id)
        return job_id

    def pause(self, job_id: int) -> None:
        """Stop a running or queued job, keeping its partial files."""
        with self._cond:
            job = self._jobs[job_id]
            if job.progress.state is JobState.QUEUED:
                self._queue.remove(job_id)
                self._set(job, state=JobState.PAUSED, speed=0.0, eta=None)
            elif job.progress.state is JobState.RUNNING:
                job.control.pause()
        self._emit(job_id)

    def resume(self, job_id: int) -> None:
        """Queue a paused or failed job again; it continues from the bytes on disk."""
        with self._cond:
            job = self._jobs[job_id]
            if job.progress.state not in (JobState.PAUSED, JobState.FAILED):
                return
            job.control = DownloadControl()
            job.meter.reset()
            self._set(job, state=JobState.QUEUED, message=None)
            self._queue.append(job_id)
            self._ensure_workers()
            self._cond.notify_all()
        self._emit(job_id)

    def cancel(self, job_id: int) -> None:
        """Stop a job and delete its partial files."""
        with self._cond:
            job = self._jobs[job_id]
            state = job.progress.state
            if state is JobState.RUNNING:
                job.control.cancel()
                return
            if state.is_final and state is not JobState.FAILED:
                return
            if job_id in self._queue:
                self._queue.remove(job_id)
            self._set(job, state=JobState.CANCELLED, speed=0.0, eta=None)
            self._cond.notify_all()
        for path in partial_paths(job.entry, folder=job.folder, cache_dir=self._cache_dir):
            path.unlink(missing_ok=True)
        self._emit(job_id)

    def get(self, job_id: int) -> DownloadProgress:
        with self._cond:
            return self._jobs[job_id].progress

    def jobs(self) -> list[DownloadProgress]:
        with self._cond:
            return [job.progress for job in self._jobs.values()]

    def wait(self, job_id: int, timeout: float | None = None) -> DownloadProgress:
        """Block until the job is done, failed, cancelled or paused (or `timeout` passes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                progress = self._jobs[job_id].progress
                if progress.state.is_final or progress.state is JobState.PAUSED:
                    return progress
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return progress
                self._cond.wait(left)

    def close(self, timeout: float = 10.0) -> None:
        """Pause every running job (partials kept for the next start) and stop the workers."""
        with self._cond:
            self._closed = True
            for job in self._jobs.values():
                if job.progress.state is JobState.RUNNING:
                    job.control.pause()
            self._cond.notify_all()
        for worker in self._workers:
            worker.join(timeout)

    # -- workers ----------------------------------------------------------------------------

    def _ensure_workers(self) -> None:
        self._workers = [w for w in self._workers if w.is_alive()]
        while len(self._workers) < self.max_parallel:
            worker = threading.Thread(target=self._work, name="kvstudio-download", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job_id = self._queue.pop(0)
                job = self._jobs[job_id]
                self._set(job, state=JobState.RUNNING)
            self._emit(job_id)
            self._run(job_id, job)

    def _run(self, job_id: int, job: _Job) -> None:
        def progress(done: int, total: int) -> None:
            speed = job.meter.update(done)
            eta = (total - done) / speed if speed > 0 else None
            with self._cond:
                self._set(job, downloaded=done, total=total, speed=speed, eta=eta)
            self._emit(job_id)

        outcome: dict = {"speed": 0.0, "eta": None}
        try:
            path = download_entry(
                job.entry, revision=job.revision, folder=job.folder, cache_dir=self._cache_dir,
                token=self._token, control=job.control, on_progress=progress,
            )
            outcome.update(state=JobState.DONE, path=path, downloaded=job.entry.total_size)
        except DownloadPaused:
            outcome.update(state=JobState.PAUSED)
        except DownloadCancelled:
            outcome.update(state=JobState.CANCELLED, downloaded=0)
        except AppError as error:
            log.warning("download of %s failed: %s", job.entry.name, error)
            outcome.update(state=JobState.FAILED, message=str(error))
        except Exception as error:
            log.exception("download of %s crashed", job.entry.name)
            outcome.update(state=JobState.FAILED, message=f"The download failed unexpectedly: {error}")
        with self._cond:
            self._set(job, **outcome)
            self._cond.notify_all()
        self._emit(job_id)

    def _set(self, job: _Job, **changes: object) -> None:
        job.progress = replace(job.progress, **changes)  # type: ignore[arg-type]

    def _emit(self, job_id: int) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress(self.get(job_id))
        except Exception:
            log.exception("download progress callback failed")
