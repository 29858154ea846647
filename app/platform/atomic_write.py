"""Writing a state file so that a crash or a kill leaves the old file or the new one, never half.

Every small file the app rewrites (settings, model folders, download state, backend stamps,
tokens) goes through write_atomically: a temp file beside it, flushed to disk, renamed over the old
one, and the folder flushed so the rename itself survives a power cut.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomically(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace `path` with `text` (UTF-8). `mode`: the new file's permissions (e.g. 0o600 for a
    secret), set before any byte is written, so the secret is never readable by others."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(tmp, flags, 0o600 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # the umask may have narrowed or widened what os.open set
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is None:
            _match_old_permissions(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    sync_folder(path.parent)


def _match_old_permissions(path: Path, tmp: Path) -> None:
    """A rewritten file keeps the permissions it had; a new one gets the usual 0o644 less umask."""
    try:
        os.chmod(tmp, path.stat().st_mode & 0o777)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)


def sync_folder(folder: Path) -> None:
    """Make a rename into `folder` durable: without this, a power cut can undo it (best effort)."""
    if os.name != "posix":
        return  # Windows has no directory handles to flush; its rename is already durable
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
