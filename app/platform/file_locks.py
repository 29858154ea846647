"""Which other process holds a lock on a file (Linux: /proc/locks), to name it to the user."""

from __future__ import annotations

import os
from pathlib import Path

_LOCKS = Path("/proc/locks")


def write_lock_holder(*paths: Path) -> tuple[int, str] | None:
    """(pid, program name) of another process holding a write lock on any of `paths`, or
    None where none does or the system does not say (not Linux, an OFD lock without a pid)."""
    wanted = set()
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        wanted.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    try:
        lines = _LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        # "1: POSIX  ADVISORY  WRITE 6261 fe:00:2247011 1073741824 1073742335"
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->" or fields[3] != "WRITE":
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if key in wanted and pid > 0 and pid != os.getpid():
            return pid, _program(pid)
    return None


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "a program"
    except OSError:
        return "a program"
