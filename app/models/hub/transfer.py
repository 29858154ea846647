"""Fetch one file over HTTP into a `.incomplete` file, resumable, hashing as it writes.

Why not hf_hub_download: in huggingface_hub 2.4 it downloads to a process-unique temp
file and deletes it on any failure, so a pause, a dropped connection or a restart starts
from zero, and it cannot be interrupted between chunks. This module keeps huggingface_hub's
URL, headers (token, user agent), metadata (HEAD with X-Linked-Etag/Size, X-Repo-Commit)
and HTTP session, and does the GET itself with a Range from the bytes already on disk.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from huggingface_hub.utils import build_hf_headers, get_session

from app.models.hub.api_get import certificate_problem
from app.models.hub.disk_writer import use_large_reads
from app.models.hub.download_control import DownloadCancelled, DownloadControl, ProgressFn
from app.models.hub.hub_errors import gated_message, translate
from app.models.hub.partial_file import (
    READ_TIMEOUT_S,
    FetchTarget,
    OversizedBodyError,
    PartialFile,
    TransientFault,
    refuse_oversized,
    shutdown_hook,
    write_body,
)
from app.platform.errors import ChecksumMismatchError, DownloadError, GatedRepoError

log = logging.getLogger(__name__)

MAX_ATTEMPTS_WITHOUT_PROGRESS = 6
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 8.0
HASH_READ = 8 * 1024 * 1024
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_TRANSIENT = (httpx2.TransportError, httpx2.TimeoutException)

use_large_reads()


def _hash_existing(path: Path, control: DownloadControl | None) -> tuple[int, hashlib._Hash]:
    """(bytes on disk, sha256 of them): resuming re-reads the local prefix, not the network."""
    hasher = hashlib.sha256()
    done = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(HASH_READ):
                hasher.update(chunk)
                done += len(chunk)
                if control is not None:
                    control.check()
    except FileNotFoundError:
        pass
    return done, hasher


def _headers(target: FetchTarget, token: str | None, start: int) -> dict[str, str]:
    headers = build_hf_headers(token=token if token is not None else False, library_name="kvstudio")
    if not target.send_auth:
        headers.pop("authorization", None)
    headers["Accept-Encoding"] = "identity"
    if start > 0:
        headers["Range"] = f"bytes={start}-"
    return headers


def _content_range_start(response: httpx2.Response) -> int | None:
    value = response.headers.get("Content-Range", "")  # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def fetch(
    target: FetchTarget,
    *,
    token: str | None = None,
    control: DownloadControl | None = None,
    on_progress: ProgressFn | None = None,
) -> None:
    """Download target.url into target.incomplete until it holds target.size verified bytes.

    Resumes from the bytes already there. Retries with backoff on 5xx and connection
    errors. On success the .incomplete file is complete and verified (the caller renames
    it). Raises DownloadPaused / DownloadCancelled (partial kept / removed), DiskFullError
    (partial kept), ChecksumMismatchError (partial removed), GatedRepoError, DownloadError.
    """
    control = control or DownloadControl()
    target.incomplete.parent.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(target.incomplete)
    with _active_lock:
        if key in _active:
            raise DownloadError(f"{target.display_name} is already being downloaded.")
        _active.add(key)
    try:
        _fetch(target, token, control, on_progress)
    finally:
        with _active_lock:
            _active.discard(key)


# Partial files being written in this process: two writers would interleave their bytes.
_active: set[str] = set()
_active_lock = threading.Lock()


def _fetch(
    target: FetchTarget, token: str | None, control: DownloadControl, on_progress: ProgressFn | None
) -> None:
    try:
        state = PartialFile(*_hash_existing(target.incomplete, control))
        if state.done > target.size:
            log.warning("%s: partial file larger than expected; starting over", target.display_name)
            target.incomplete.unlink()
            state = PartialFile(0, hashlib.sha256())
        if on_progress:
            on_progress(state.done)
        attempts = 0
        while state.done < target.size:
            control.check()
            before = state.done
            try:
                _stream_once(target, token, control, state, on_progress)
            except TransientFault as retry:
                attempts = 0 if state.done > before else attempts + 1
                if attempts >= MAX_ATTEMPTS_WITHOUT_PROGRESS:
                    raise DownloadError(
                        f"Downloading {target.display_name} failed after {attempts} tries "
                        f"({retry.reason}); the partial file is kept, so retrying resumes it."
                    ) from None
                wait = min(BACKOFF_MAX_S, BACKOFF_START_S * 2 ** max(attempts - 1, 0))
                log.info(
                    "%s: %s; retrying in %.2f s from byte %d",
                    target.display_name,
                    retry.reason,
                    wait,
                    state.done,
                )
                control.sleep(wait)
        _verify(target, state.hasher)
    except (DownloadCancelled, OversizedBodyError):
        target.incomplete.unlink(missing_ok=True)
        raise


def _stream_once(
    target: FetchTarget,
    token: str | None,
    control: DownloadControl,
    state: PartialFile,
    on_progress: ProgressFn | None,
) -> None:
    """One GET from state.done, appended to the partial file (TransientFault: retry it)."""
    timeout = httpx2.Timeout(READ_TIMEOUT_S, connect=10.0)
    headers = _headers(target, token, state.done)
    try:
        with get_session().stream(
            "GET", target.url, headers=headers, timeout=timeout, follow_redirects=True
        ) as response:
            status = response.status_code
            if status in _RETRY_STATUS:
                raise TransientFault(f"server answered {status}")
            if status in (401, 403):
                raise GatedRepoError(gated_message(target.repo_id, status))
            if status == 416 and state.done > 0:
                # Our partial file does not fit the server's file: start over.
                target.incomplete.unlink(missing_ok=True)
                state.done, state.hasher = 0, hashlib.sha256()
                raise TransientFault("range not satisfiable; restarting from zero")
            if status >= 400:
                response.read()
                error = httpx2.HTTPStatusError(
                    f"HTTP {status}", request=response.request, response=response
                )
                raise translate(error, target.repo_id, target.display_name)
            if state.done > 0 and (status != 206 or _content_range_start(response) != state.done):
                # The server ignored our Range and sends the whole file: rewrite from zero.
                log.info(
                    "%s: server ignored Range; downloading from the start", target.display_name
                )
                state.done, state.hasher = 0, hashlib.sha256()
            refuse_oversized(response, target, target.size - state.done)
            remove_hook = control.on_stop(shutdown_hook(response))
            try:
                write_body(response, target, control, state, on_progress)
            finally:
                remove_hook()
    except _TRANSIENT as error:
        if certificate_problem(error) is not None:  # no retry mends it: say "certificate"
            raise translate(error, target.repo_id, target.display_name) from error
        raise TransientFault(f"{type(error).__name__}: {error}") from None
    if state.done < target.size:
        control.check()
        raise TransientFault(f"connection ended at byte {state.done:,} of {target.size:,}")


def _verify(target: FetchTarget, hasher: hashlib._Hash) -> None:
    size = target.incomplete.stat().st_size
    if size != target.size:
        raise DownloadError(
            f"{target.display_name} has {size:,} bytes on disk, expected {target.size:,}; "
            "retry the download."
        )
    if target.sha256 is None:
        return
    actual = hasher.hexdigest()
    if actual != target.sha256:
        target.incomplete.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"{target.display_name} failed its checksum (SHA-256 {actual[:12]}… instead of "
            f"{target.sha256[:12]}…); the corrupt file was deleted."
        )


def same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)
