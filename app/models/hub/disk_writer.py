"""Write downloaded chunks as they arrive, and hash them on a second thread.

hashlib's update releases the GIL, so on two cores reading and SHA-256 overlap instead of
adding up. The bytes go to disk at once, so a hard kill loses only what the kernel still
held; the hash may lag behind, and close() waits for it.

Two ways in: put(bytes) for chunks someone else allocated (httpx's iterator), and
write_from(readinto) which reads straight into one of a few reused buffers. The second
skips a fresh 1 MiB bytes object and h11's two copies per chunk: measured on a 200 MB
download, about a quarter less CPU for the whole process.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import threading
from collections.abc import Callable

from app.platform.errors import DiskFullError
from app.platform.units import size

LARGE_READ = 1024 * 1024
QUEUE_CHUNKS = 8  # written chunks waiting to be hashed
BUFFERS = 4  # reused LARGE_READ buffers for write_from: written, waiting for the hash, or free
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

ReadInto = Callable[[memoryview], int]  # like socket.recv_into: fill the view, return the count


def use_large_reads() -> None:
    """Make httpx's HTTP/1.1 connections read up to 1 MiB per recv() instead of 64 KiB.

    At hundreds of MB/s, 64 KiB reads mean thousands of trips a second through Python
    (h11 parsing, one chunk each); 1 MiB reads cut them sixteenfold. recv() returns what
    has arrived, so small responses are not delayed. A class attribute of httpcore2's
    connection: if a future version drops it, nothing changes but the speed.
    """
    try:
        from httpcore2._sync.http11 import HTTP11Connection
    except ImportError:
        return
    if getattr(HTTP11Connection, "READ_NUM_BYTES", LARGE_READ) < LARGE_READ:
        HTTP11Connection.READ_NUM_BYTES = LARGE_READ


class DiskWriter:
    """Append chunks to an open file descriptor at once; hash them on a second thread.

    `written` and `hasher` describe the same bytes (those on disk) once close() returned.
    A full disk raises DiskFullError from put() / write_from(); what was written stays.
    """

    def __init__(self, fd: int, hasher: hashlib._Hash, written: int, display_name: str) -> None:
        self.fd = fd
        self.hasher = hasher
        self.written = written
        self.display_name = display_name
        # Items: a bytes chunk, or (pooled buffer, byte count) to hash and then hand back.
        self._queue: queue.Queue[bytes | tuple[memoryview, int] | None] = queue.Queue(QUEUE_CHUNKS)
        self._free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        self._buffers = 0
        self._thread = threading.Thread(target=self._hash, name="kvstudio-sha256", daemon=True)
        self._thread.start()

    def put(self, chunk: bytes) -> None:
        before = self.written
        try:
            self._write(memoryview(chunk))
        finally:
            done = self.written - before  # also after a partial write and an error
            if done:
                self._queue.put(chunk if done == len(chunk) else chunk[:done])

    def write_from(self, read_into: ReadInto, limit: int) -> int:
        """Read up to `limit` bytes with `read_into` into a reused buffer, write them and
        queue them for hashing; return the count (0: the source ended). What `read_into`
        raises passes through."""
        buffer = self._take_buffer()
        before = self.written
        try:
            n = read_into(buffer[: min(limit, len(buffer))])
            if n:
                self._write(buffer[:n])
            return n
        finally:
            done = self.written - before
            if done:
                self._queue.put((buffer, done))
            else:
                self._free.put(buffer)

    def close(self) -> None:
        """Wait until every written byte is hashed, and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _take_buffer(self) -> memoryview:
        if self._buffers < BUFFERS and self._free.empty():
            self._buffers += 1
            return memoryview(bytearray(LARGE_READ))
        return self._free.get()  # the hash thread hands one back as soon as it is hashed

    def _write(self, view: memoryview) -> None:
        """Write all of `view`, counting in `written` as it goes."""
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
                self.written += n
        except OSError as error:
            if error.errno in _DISK_FULL:
                raise DiskFullError(
                    f"The disk filled up while downloading {self.display_name}; free some space "
                    f"and resume (the {size(self.written)} already downloaded are kept)."
                ) from None
            raise

    def _hash(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, tuple):
                buffer, n = item
                self.hasher.update(buffer[:n])
                self._free.put(buffer)
            else:
                self.hasher.update(item)
