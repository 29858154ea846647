"""Download GGUF models from the Hub: one blocking call, and a small queue around it (no Qt).

    path = download_entry(entry)                      # blocking; returns part 1's path
    dl = Downloader(max_parallel=2, on_progress=print)
    job = dl.enqueue(entry)                           # -> job id; progress via the callback
    dl.pause(job); dl.resume(job); dl.cancel(job)

Files land in the HF cache (HF_HUB_CACHE / HF_HOME, read at call time) or in a folder the
user picked (<folder>/owner/name/<file>). Partial files stay on disk (`.incomplete`) after
a pause, a dropped connection, a full disk or a quit, and the next attempt resumes from
them. Every file is checked against the LFS sha256 of the repo tree before it is visible.
The UI wraps `download_entry` (with a DownloadControl) in a QRunnable, or uses Downloader;
callbacks run on the worker thread.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from huggingface_hub import get_hf_file_metadata, hf_hub_url

from app.core.errors import AppError, DownloadError, HubUnreachableError
from app.core.hub import cache_layout
from app.core.hub.client import GgufEntry, RemoteFile
from app.core.hub.env import hub_cache_dir, hub_endpoint, is_offline
from app.core.hub.hub_errors import translate
from app.core.hub.safe_paths import check_commit, check_relative_name, check_repo_id
from app.core.hub.tokens import load_token
from app.core.hub.transfer import (
    DownloadCancelled,
    DownloadControl,
    DownloadPaused,
    FetchTarget,
    check_free_space,
    fetch,
    same_origin,
)

log = logging.getLogger(__name__)

__all__ = [
    "DownloadCancelled", "DownloadControl", "DownloadPaused", "DownloadProgress", "Downloader",
    "JobState", "download_entry", "partial_paths",
]

EntryProgressFn = Callable[[int, int], None]  # (bytes on disk for the whole entry, total bytes)


# ---- one entry, blocking ---------------------------------------------------------------------


def download_entry(
    entry: GgufEntry,
    *,
    revision: str = "main",
    folder: Path | None = None,
    cache_dir: Path | None = None,
    token: str | None = None,
    control: DownloadControl | None = None,
    on_progress: EntryProgressFn | None = None,
) -> Path:
    """Download every part of `entry`; return the path llama.cpp opens (part 1).

    `folder` None: the HF cache (`cache_dir` or the standard one). Raises DownloadPaused
    (partials kept) or DownloadCancelled (partials removed) when `control` asks, and an
    AppError with one sentence on failure (GatedRepoError, ChecksumMismatchError,
    DiskFullError, UnsafePathError, HubUnreachableError, ModelNotFoundError, DownloadError).
    """
    check_repo_id(entry.repo_id)
    for f in entry.files:
        check_relative_name(f.path)
    token = token if token is not None else load_token()
    cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    total = entry.total_size
    finished = 0
    first: Path | None = None
    for f in entry.files:
        base = finished

        def part_progress(n: int, base: int = base) -> None:
            if on_progress:
                on_progress(base + n, total)

        path = _download_file(entry.repo_id, f, revision, folder, cache, token, control, part_progress)
        first = first or path
        finished += f.size
    assert first is not None
    if folder is not None:
        from app.core.library import remember_folder  # the library lists this folder from now on

        remember_folder(Path(folder))
    log.info("downloaded %s (%s) to %s", entry.name, entry.repo_id, first)
    return first


def partial_paths(entry: GgufEntry, *, folder: Path | None = None, cache_dir: Path | None = None) -> list[Path]:
    """The `.incomplete` files an entry's download keeps between attempts."""
    cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    paths = []
    for f in entry.files:
        if folder is not None:
            paths.append(cache_layout.folder_placement(Path(folder), entry.repo_id, f.path).incomplete)
        elif f.sha256:
            paths.append(cache_layout.cache_incomplete(cache, entry.repo_id, f.sha256))
    return paths


@dataclass(frozen=True)
class _Meta:
    location: str
    commit: str
    etag: str | None


def _metadata(repo_id: str, filename: str, revision: str, token: str | None) -> _Meta:
    endpoint = hub_endpoint()
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=token or False, endpoint=endpoint, retry_on_errors=True)
    except Exception as error:  # noqa: BLE001 - becomes one sentence
        log.debug("HEAD %s failed", url, exc_info=True)
        raise translate(error, repo_id, filename) from error
    if meta.commit_hash is None or meta.etag is None:
        raise DownloadError(
            f"{endpoint} did not answer like the Hugging Face Hub (no commit id or ETag for {filename}); "
            f"check HF_ENDPOINT."
        )
    return _Meta(meta.location, check_commit(meta.commit_hash), meta.etag)


def _download_file(
    repo_id: str,
    f: RemoteFile,
    revision: str,
    folder: Path | None,
    cache: Path,
    token: str | None,
    control: DownloadControl | None,
    on_progress: Callable[[int], None],
) -> Path:
    if folder is not None:
        placement = cache_layout.folder_placement(Path(folder), repo_id, f.path)
        if placement.final.exists() and placement.final.stat().st_size == f.size:
            on_progress(f.size)
            return placement.final
        storage = None
    else:
        storage = cache_layout.storage_folder(cache, repo_id)
        offline_path = _cached_path(storage, revision, f.path)
        if offline_path is not None and (is_offline() or _blob_matches(offline_path, f)):
            on_progress(f.size)
            return offline_path
    if is_offline():
        raise HubUnreachableError(
            f"Offline mode is on (HF_HUB_OFFLINE) and {f.path} is not downloaded yet."
        )
    meta = _metadata(repo_id, f.path, revision, token)
    if storage is not None:
        blob_name = f.sha256 or _etag_as_sha256(meta.etag, f.path)
        placement = cache_layout.cache_placement(cache, repo_id, f.path, blob_name, meta.commit)
        if placement.final.exists() and placement.final.stat().st_size == f.size:
            # The blob is here already (another revision, or a link was removed): link it.
            cache_layout.finish_existing(placement, storage, revision, meta.commit)
            on_progress(f.size)
            return placement.visible
    target = FetchTarget(
        url=meta.location,
        size=f.size,
        sha256=f.sha256,
        incomplete=placement.incomplete,
        display_name=f.path,
        repo_id=repo_id,
        send_auth=same_origin(meta.location, hub_endpoint()),
    )
    check_free_space(placement.incomplete.parent, f.size - _size_of(placement.incomplete))
    fetch(target, token=token, control=control, on_progress=on_progress)
    return cache_layout.finish(placement, cache_storage=storage, revision=revision, commit=meta.commit)


def _cached_path(storage: Path, revision: str, filename: str) -> Path | None:
    commit = revision if len(revision) == 40 else cache_layout.read_ref(storage, revision)
    if commit is None:
        return None
    try:
        pointer = cache_layout.safe_join(storage / "snapshots" / check_commit(commit), filename)
    except AppError:
        return None
    return pointer if pointer.exists() else None


def _blob_matches(path: Path, f: RemoteFile) -> bool:
    """A cached file is current when its blob is named by the tree's sha256 and has its size."""
    try:
        return path.stat().st_size == f.size and (f.sha256 is None or path.resolve().name == f.sha256)
    except OSError:
        return False


def _etag_as_sha256(etag: str | None, filename: str) -> str:
    if etag and len(etag) == 64:
        return etag
    raise DownloadError(f"The Hub gives no SHA-256 for {filename}, so it cannot be verified; not downloaded.")


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
        except Exception as error:  # noqa: BLE001 - a worker never dies silently
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
        except Exception:  # noqa: BLE001 - a broken listener must not kill a download
            log.exception("download progress callback failed")
