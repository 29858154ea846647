"""Which KV Studio window owns a data folder: an OS file lock on <data>/kvstudio.lock.

The GUI takes it at start and holds it until it quits; the OS drops it when the process dies
(kill -9 included), so a stale lock never blocks a start. A second window on the same folder
still runs (SQLite's WAL lets both save conversations), but knows it is the second: it leaves the
first one's streaming reply alone and tells the user which process is the other one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import IO

LOCK_NAME = "kvstudio.lock"


class InstanceLock:
    """Try to own `data_folder`. `owned`: this process has it; `other_pid`: the process that
    has it instead (None when owned, or when it cannot be told)."""

    def __init__(self, data_folder: Path) -> None:
        self.path = data_folder / LOCK_NAME
        self.owned = False
        self.other_pid: int | None = None
        self._file: IO[str] | None = None
        try:
            self._file = self.path.open("a+", encoding="utf-8")
        except OSError:
            return  # a folder it cannot write: nothing to share it with either
        if _try_lock(self._file):
            self.owned = True
            # The lock file itself is the record (not replaced: a rename would drop the lock).
            self._file.seek(0)
            self._file.truncate()
            self._file.write(str(os.getpid()))
            self._file.flush()
            return
        text = ""
        with contextlib.suppress(OSError):  # Windows refuses to read a locked byte range
            self._file.seek(0)
            text = self._file.read().strip()
        self.other_pid = int(text) if text.isdigit() else None
        self._file.close()
        self._file = None

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.seek(0)
                self._file.truncate()
            self._file.close()  # closing drops the lock
            self._file = None
            self.owned = False


def _try_lock(file: IO[str]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            file.seek(0)
            msvcrt.locking(file.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True
