"""Write downloaded chunks as they arrive, and hash them on a second thread.

hashlib's update releases the GIL, so on two cores reading and SHA-256 overlap instead of
adding up. The bytes go to disk at once, so a hard kill loses only what the kernel still
held; the hash may lag behind, and close() waits for it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import threading

from app.core.errors import DiskFullError

LARGE_READ = 1024 * 1024
QUEUE_CHUNKS = 8  # written chunks (up to LARGE_READ bytes each) waiting to be hashed
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


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
    A full disk raises DiskFullError from put(); what was written stays.
    """

    def __init__(self, fd: int, hasher: hashlib._Hash, written: int, display_name: str) -> None:
        self.fd = fd
        self.hasher = hasher
        self.written = written
        self.display_name = display_name
        self._queue: queue.Queue[bytes | None] = queue.Queue(QUEUE_CHUNKS)
        self._thread = threading.Thread(target=self._hash, name="kvstudio-sha256", daemon=True)
        self._thread.start()

    def put(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
                self.written += n
        except OSError as error:
            if error.errno in _DISK_FULL:
                raise DiskFullError(
                    f"The disk filled up while downloading {self.display_name}; free some space "
                    f"and resume (the {self.written / 1e6:,.1f} MB already downloaded are kept)."
                ) from None
            raise
        finally:
            done = len(chunk) - len(view)
            if done:
                self._queue.put(chunk if done == len(chunk) else chunk[:done])

    def close(self) -> None:
        """Wait until every written byte is hashed, and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _hash(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self.hasher.update(chunk)
