"""Refuse a write the disk has no room for, before any byte of it is written (downloads,
backend packages, the starter model's fetch)."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.platform.errors import DiskFullError
from app.platform.units import size

DISK_MARGIN = 64 * 1024 * 1024  # keep this much free beyond the file itself


def check_free_space(folder: Path, needed: int) -> None:
    """DiskFullError when `folder`'s filesystem has less than `needed` bytes (plus a margin)."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < needed + min(DISK_MARGIN, needed // 10 + 1):
        raise DiskFullError(
            f"Not enough disk space: the download needs {size(needed)} more, "
            f"but {folder} has only {size(free)} free."
        )
