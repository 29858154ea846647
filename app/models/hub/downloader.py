"""Download a GGUF model from the Hub: one blocking call (no Qt).

    path = download_entry(entry, control=control, on_progress=cb)   # part 1's path

Files land in the HF cache (HF_HUB_CACHE / HF_HOME, read at call time) or in a folder the
user picked (<folder>/owner/name/<file>). Partial files stay on disk (`.incomplete`) after
a pause, a dropped connection, a full disk or a quit, and the next attempt resumes from
them. Every file is checked against the LFS sha256 of the repo tree before it is visible.
It returns what it wrote and records nothing: the caller (app.models.download_queue, `kvstudio
pull`) keeps the folder and tells the library. Callbacks run on the calling thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import get_hf_file_metadata, hf_hub_url

from app.models.hub import cache_layout, transfer
from app.models.hub.api_get import certificate_problem
from app.models.hub.client import GgufEntry, RemoteFile
from app.models.hub.download_control import DownloadCancelled, DownloadControl, DownloadPaused
from app.models.hub.hub_errors import status_of, translate
from app.models.hub.partial_file import FetchTarget
from app.models.hub.safe_paths import check_commit, check_relative_name, safe_join
from app.models.hub.tokens import load_token
from app.models.hub.transfer import fetch, same_origin
from app.models.hub_env import hub_cache_dir, hub_endpoint, is_offline
from app.platform.disk_space import check_free_space
from app.platform.errors import AppError, DownloadError, HubUnreachableError

log = logging.getLogger(__name__)

__all__ = [
    "DownloadCancelled",
    "DownloadControl",
    "DownloadPaused",
    "bytes_on_disk",
    "download_entry",
    "partial_paths",
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
    dest = _destination(entry, folder, cache_dir)  # checks the repo id, once
    for f in entry.files:
        check_relative_name(f.path)
    token = token if token is not None else load_token()
    total = entry.total_size
    # Once, for all parts of a split model (not only the next one); a disk that fills up
    # later is caught by the write itself (DiskFullError, partial kept).
    check_free_space(
        dest.data_folder, total - bytes_on_disk(entry, folder=folder, cache_dir=cache_dir)
    )
    finished = 0
    first: Path | None = None
    for f in entry.files:
        base = finished

        def part_progress(n: int, base: int = base) -> None:
            if on_progress:
                on_progress(base + n, total)

        path = _download_file(dest, entry.repo_id, f, revision, token, control, part_progress)
        first = first or path
        finished += f.size
    assert first is not None
    log.info("downloaded %s (%s) to %s", entry.name, entry.repo_id, first)
    return first


def partial_paths(
    entry: GgufEntry, *, folder: Path | None = None, cache_dir: Path | None = None
) -> list[Path]:
    """The `.incomplete` files an entry's download keeps between attempts."""
    dest = _destination(entry, folder, cache_dir)
    return [p for f in entry.files if (p := dest.incomplete(f.path, f.sha256)) is not None]


def bytes_on_disk(
    entry: GgufEntry, *, folder: Path | None = None, cache_dir: Path | None = None
) -> int:
    """Bytes of the entry already on disk, complete files and partial ones (where a resume
    starts from)."""
    dest = _destination(entry, folder, cache_dir)
    present = 0
    for f in entry.files:
        partial = dest.incomplete(f.path, f.sha256)
        if partial is None:
            continue
        if partial.with_name(partial.name.removesuffix(".incomplete")).exists():
            present += f.size
        elif partial.exists():
            present += min(partial.stat().st_size, f.size)
    return present


def _destination(
    entry: GgufEntry, folder: Path | None, cache_dir: Path | None
) -> cache_layout.Destination:
    cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    return cache_layout.Destination.of(entry.repo_id, folder, cache)


@dataclass(frozen=True)
class _Meta:
    location: str
    commit: str
    etag: str | None


def _metadata(
    repo_id: str, filename: str, revision: str, token: str | None, control: DownloadControl
) -> _Meta:
    """HEAD the file (commit, ETag, CDN location). Retries 5xx and network errors with
    backoff here rather than inside huggingface_hub, so pause and cancel act while waiting."""
    endpoint = hub_endpoint()
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    for attempt in range(transfer.MAX_ATTEMPTS_WITHOUT_PROGRESS):
        control.check()
        try:
            meta = get_hf_file_metadata(
                url, token=token or False, endpoint=endpoint, retry_on_errors=False
            )
            break
        except Exception as error:
            log.debug("HEAD %s failed", url, exc_info=True)
            status = status_of(error)
            transient = isinstance(error, (httpx2.TransportError, httpx2.TimeoutException)) or (
                status is not None and (status >= 500 or status in (408, 429))
            )
            transient = transient and certificate_problem(error) is None  # no retry mends it
            if not transient or attempt + 1 == transfer.MAX_ATTEMPTS_WITHOUT_PROGRESS:
                raise translate(error, repo_id, filename) from error
            control.sleep(min(transfer.BACKOFF_MAX_S, transfer.BACKOFF_START_S * 2**attempt))
    if meta.commit_hash is None or meta.etag is None:
        raise DownloadError(
            f"{endpoint} did not answer like the Hugging Face Hub "
            f"(no commit id or ETag for {filename}); check HF_ENDPOINT."
        )
    return _Meta(meta.location, check_commit(meta.commit_hash), meta.etag)


def _download_file(
    dest: cache_layout.Destination,
    repo_id: str,
    f: RemoteFile,
    revision: str,
    token: str | None,
    control: DownloadControl | None,
    on_progress: Callable[[int], None],
) -> Path:
    if not dest.in_cache:
        placement = dest.placement(f.path)
        if placement.final.exists() and placement.final.stat().st_size == f.size:
            on_progress(f.size)
            return placement.final
    else:
        offline_path = _cached_path(dest.root, revision, f.path)
        if offline_path is not None and (is_offline() or _blob_matches(offline_path, f)):
            on_progress(f.size)
            return offline_path
    if is_offline():
        raise HubUnreachableError(
            f"Offline mode is on (HF_HUB_OFFLINE) and {f.path} is not downloaded yet."
        )
    meta = _metadata(repo_id, f.path, revision, token, control or DownloadControl())
    if dest.in_cache:
        blob_name = f.sha256 or _etag_as_sha256(meta.etag, f.path)
        placement = dest.placement(f.path, blob_name, meta.commit)
        if placement.final.exists() and placement.final.stat().st_size == f.size:
            # The blob is here already (another revision, or a link was removed): link it.
            cache_layout.finish_existing(placement, dest.root, revision, meta.commit)
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
    fetch(target, token=token, control=control, on_progress=on_progress)
    storage = dest.root if dest.in_cache else None
    return cache_layout.finish(
        placement, cache_storage=storage, revision=revision, commit=meta.commit
    )


def _cached_path(storage: Path, revision: str, filename: str) -> Path | None:
    commit = revision if len(revision) == 40 else cache_layout.read_ref(storage, revision)
    if commit is None:
        return None
    try:
        pointer = safe_join(storage, f"snapshots/{check_commit(commit)}/{filename}")
    except AppError:
        return None
    return pointer if pointer.exists() else None


def _blob_matches(path: Path, f: RemoteFile) -> bool:
    """A cached file is current when its blob is named by the tree's sha256 and has its size."""
    try:
        return path.stat().st_size == f.size and (
            f.sha256 is None or path.resolve().name == f.sha256
        )
    except OSError:
        return False


def _etag_as_sha256(etag: str | None, filename: str) -> str:
    if etag and len(etag) == 64:
        return etag
    raise DownloadError(
        f"The Hub gives no SHA-256 for {filename}, so it cannot be verified; not downloaded."
    )
