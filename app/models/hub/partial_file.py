"""The partial file a download writes: what it must become (FetchTarget), what it holds so
far (PartialFile), and writing one HTTP response's body into it, refusing a body longer than
the file and reading straight from the socket where that is safe (app.models.hub.transfer
makes the requests and retries them)."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2

from app.models.hub.disk_writer import DiskWriter
from app.models.hub.download_control import DownloadControl, ProgressFn
from app.platform.errors import DownloadError

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 20.0


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


class OversizedBodyError(DownloadError):
    """The server sent, or announced, more bytes than the file has; the partial file is
    removed (a server that lies about the size is not resumed from)."""


class TransientFault(Exception):
    """A fault worth retrying from the bytes on disk (a cut connection, a 5xx answer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PartialFile:
    """Bytes in the partial file and their running hash. Always what is on disk, also after
    an exception: the body writer flushes what it received before giving up."""

    def __init__(self, done: int, hasher: hashlib._Hash) -> None:
        self.done = done
        self.hasher = hasher


def shutdown_hook(response: httpx2.Response) -> Callable[[], None]:
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


def _oversized(target: FetchTarget, what: str) -> str:
    return (
        f"The server {what} more data than {target.display_name}'s {target.size:,} bytes; "
        "the download was stopped and its partial file deleted."
    )


def refuse_oversized(response: httpx2.Response, target: FetchTarget, expected: int) -> None:
    """OversizedBodyError before a byte is written when the response announces a body longer
    than what is left of the file (the free space was checked for the file's size only)."""
    try:
        announced = int(response.headers.get("content-length", ""))
    except ValueError:
        return  # no length: the body is counted as it arrives (write_body)
    if announced > expected:
        raise OversizedBodyError(_oversized(target, "announced"))


def write_body(
    response: httpx2.Response,
    target: FetchTarget,
    control: DownloadControl,
    state: PartialFile,
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
            raise TransientFault(f"{type(error).__name__}: {error}") from None

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
