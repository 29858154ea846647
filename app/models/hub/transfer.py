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
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from huggingface_hub.utils import build_hf_headers, get_session

from app.models.hub.disk_writer import DiskWriter, use_large_reads
from app.models.hub.hub_errors import gated_message, translate
from app.platform.errors import ChecksumMismatchError, DiskFullError, DownloadError, GatedRepoError
from app.platform.units import size

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 20.0
MAX_ATTEMPTS_WITHOUT_PROGRESS = 6
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 8.0
HASH_READ = 8 * 1024 * 1024
DISK_MARGIN = 64 * 1024 * 1024  # keep this much free beyond the file itself
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_TRANSIENT = (httpx2.TransportError, httpx2.TimeoutException)

use_large_reads()


class DownloadPaused(Exception):
    """The download stopped because pause was asked; the partial file is kept."""


class DownloadCancelled(Exception):
    """The download stopped because cancel was asked; the partial file is removed."""


class OversizedBodyError(DownloadError):
    """The server sent, or announced, more bytes than the file has; the partial file is
    removed (a server that lies about the size is not resumed from)."""


class DownloadControl:
    """Pause / cancel flags a running download checks between chunks (thread-safe).

    Asking to stop also shuts the open connection's socket, so a download waiting on a
    stalled server stops at once rather than at its read timeout.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()
        self._on_stop: list[Callable[[], None]] = []

    def pause(self) -> None:
        self._request_stop()

    def cancel(self) -> None:
        self._cancelled = True
        self._request_stop()

    def _request_stop(self) -> None:
        with self._lock:
            self._stop.set()
            hooks = list(self._on_stop)
        for hook in hooks:
            hook()

    def on_stop(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run `hook` when a stop is asked (at once if it was); returns a function removing it."""
        with self._lock:
            self._on_stop.append(hook)
            already = self._stop.is_set()
        if already:
            hook()

        def remove() -> None:
            with self._lock:
                if hook in self._on_stop:
                    self._on_stop.remove(hook)

        return remove

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check(self) -> None:
        """Raise DownloadCancelled / DownloadPaused when asked to stop."""
        if self._stop.is_set():
            raise DownloadCancelled() if self._cancelled else DownloadPaused()

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`, but wake (and raise) at once on pause or cancel."""
        self._stop.wait(seconds)
        self.check()


def _shutdown_hook(response: httpx2.Response) -> Callable[[], None]:
    """A function that shuts the response's socket (waking a blocked read), or does nothing."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None

    def shutdown() -> None:
        if sock is None:
            return
        try:
            # socket.socket's own shutdown, also for TLS: SSLSocket.shutdown drops the TLS
            # state first, and a read racing with it then returns raw TLS records, which
            # were written into the partial file as if they were the body.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    return shutdown


@dataclass(frozen=True)
class FetchTarget:
    """What to fetch and where: the URL, the expected size and sha256, the partial file."""

    url: str  # where to GET (the CDN location after the Hub's redirect)
    size: int
    sha256: str | None
    incomplete: Path
    display_name: str
    repo_id: str
    send_auth: bool = True


ProgressFn = Callable[[int], None]  # called with the bytes of this file now on disk


def check_free_space(folder: Path, needed: int) -> None:
    """DiskFullError when `folder`'s filesystem has less than `needed` bytes (plus a margin)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < needed + min(DISK_MARGIN, needed // 10 + 1):
        raise DiskFullError(
            f"Not enough disk space: the download needs {size(needed)} more, "
            f"but {folder} has only {size(free)} free."
        )


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
        state = _State(*_hash_existing(target.incomplete, control))
        if state.done > target.size:
            log.warning("%s: partial file larger than expected; starting over", target.display_name)
            target.incomplete.unlink()
            state = _State(0, hashlib.sha256())
        if on_progress:
            on_progress(state.done)
        attempts = 0
        while state.done < target.size:
            control.check()
            before = state.done
            try:
                _stream_once(target, token, control, state, on_progress)
            except _Retry as retry:
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


class _State:
    """Bytes in the partial file and their running hash. Always what is on disk, also after
    an exception: the body writer flushes what it received before giving up."""

    def __init__(self, done: int, hasher: hashlib._Hash) -> None:
        self.done = done
        self.hasher = hasher


class _Retry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _stream_once(
    target: FetchTarget,
    token: str | None,
    control: DownloadControl,
    state: _State,
    on_progress: ProgressFn | None,
) -> None:
    """One GET from state.done, appended to the partial file. Raises _Retry for transient faults."""
    timeout = httpx2.Timeout(READ_TIMEOUT_S, connect=10.0)
    headers = _headers(target, token, state.done)
    try:
        with get_session().stream(
            "GET", target.url, headers=headers, timeout=timeout, follow_redirects=True
        ) as response:
            status = response.status_code
            if status in _RETRY_STATUS:
                raise _Retry(f"server answered {status}")
            if status in (401, 403):
                raise GatedRepoError(gated_message(target.repo_id, status))
            if status == 416 and state.done > 0:
                # Our partial file does not fit the server's file: start over.
                target.incomplete.unlink(missing_ok=True)
                state.done, state.hasher = 0, hashlib.sha256()
                raise _Retry("range not satisfiable; restarting from zero")
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
            _refuse_oversized(response, target, target.size - state.done)
            remove_hook = control.on_stop(_shutdown_hook(response))
            try:
                _write_body(response, target, control, state, on_progress)
            finally:
                remove_hook()
    except _TRANSIENT as error:
        raise _Retry(f"{type(error).__name__}: {error}") from None
    if state.done < target.size:
        control.check()
        raise _Retry(f"connection ended at byte {state.done:,} of {target.size:,}")


def _oversized(target: FetchTarget, what: str) -> str:
    return (
        f"The server {what} more data than {target.display_name}'s {target.size:,} bytes; "
        "the download was stopped and its partial file deleted."
    )


def _refuse_oversized(response: httpx2.Response, target: FetchTarget, expected: int) -> None:
    """OversizedBodyError before a byte is written when the response announces a body longer
    than what is left of the file (the free space was checked for the file's size only)."""
    try:
        announced = int(response.headers.get("content-length", ""))
    except ValueError:
        return  # no length: the body is counted as it arrives (_write_body)
    if announced > expected:
        raise OversizedBodyError(_oversized(target, "announced"))


def _write_body(
    response: httpx2.Response,
    target: FetchTarget,
    control: DownloadControl,
    state: _State,
    on_progress: ProgressFn | None,
) -> None:
    """Write the body after the state.done bytes already in the partial file (anything beyond
    is cut off). Chunks go to a DiskWriter that writes them and hashes them on a thread."""
    fd = os.open(target.incomplete, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        if os.fstat(fd).st_size != state.done:
            # Only when needed: on ext4 any truncate of a file to size 0, even an empty
            # new one, makes close() write the whole file out (auto_da_alloc): ~30 ms of a
            # 200 MB download spent in close().
            os.ftruncate(fd, state.done)
        os.lseek(fd, state.done, os.SEEK_SET)
        writer = DiskWriter(fd, state.hasher, state.done, target.display_name)
        sock = _direct_socket(response, target.size - state.done)
        received = state.done
        last_report = 0.0
        try:
            # Kept in a variable: dropping the iterator would close the connection.
            chunks = response.iter_raw()
            for chunk in chunks:
                received += len(chunk)
                if received > target.size:
                    raise OversizedBodyError(_oversized(target, "sent"))
                writer.put(chunk)
                if control.stop_requested or sock is not None:
                    # With a direct socket, this first chunk emptied h11's buffer; the
                    # rest is read from the socket below.
                    break
                now = time.monotonic()
                if on_progress and now - last_report >= 0.1:
                    last_report = now
                    on_progress(received)
            if sock is not None and received < target.size and not control.stop_requested:
                log.debug("%s: body from the socket from byte %d", target.display_name, received)
                _read_direct(sock, writer, target.size - received, control, on_progress)
        finally:
            try:
                writer.close()  # keep what arrived before a pause, a cut or an error
            finally:
                state.done, state.hasher = writer.written, writer.hasher
    finally:
        os.close(fd)
    if on_progress:
        on_progress(state.done)
    control.check()


def _direct_socket(response: httpx2.Response, expected: int) -> socket.socket | None:
    """The response's socket when its body can be read from it directly, else None.

    Only for a plain HTTP/1.1 body of exactly `expected` bytes (Content-Length, no
    chunking, no encoding) on httpcore's own socket stream (TLS included, not TLS in a
    TLS proxy tunnel). h11 hands out everything it buffered as the body's first chunk, so
    after that chunk the socket holds the rest, in order. httpx then closes the
    connection instead of reusing it, since h11 never saw the end of the body. Every
    byte is still checked by the SHA-256 at the end.
    """
    headers = response.headers
    if (
        response.http_version != "HTTP/1.1"
        or "transfer-encoding" in headers
        or headers.get("content-encoding", "identity").lower() != "identity"
        or headers.get("content-length") != str(expected)
    ):
        return None
    try:
        from httpcore2._backends.sync import SyncStream
    except ImportError:
        return None
    stream = response.extensions.get("network_stream")
    if type(stream) is not SyncStream:
        return None
    sock = stream.get_extra_info("socket")
    return sock if isinstance(sock, socket.socket) else None


def _read_direct(
    sock: socket.socket,
    writer: DiskWriter,
    remaining: int,
    control: DownloadControl,
    on_progress: ProgressFn | None,
) -> None:
    """Read `remaining` body bytes from `sock` into the writer's reused buffers."""

    def recv_into(view: memoryview) -> int:
        try:
            return sock.recv_into(view)
        except OSError as error:  # a reset or a timeout (not the disk: that is the writer's)
            if control.stop_requested:
                return 0  # the pause/cancel hook shut the socket
            raise _Retry(f"{type(error).__name__}: {error}") from None

    sock.settimeout(READ_TIMEOUT_S)
    last_report = 0.0
    while remaining > 0 and not control.stop_requested:
        n = writer.write_from(recv_into, remaining)
        if n == 0:
            return  # the server closed early; the caller retries from what is on disk
        remaining -= n
        now = time.monotonic()
        if on_progress and now - last_report >= 0.1:
            last_report = now
            on_progress(writer.written)


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
