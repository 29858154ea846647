"""A folder nothing can be written into, for tests of what the app does then.

As root, permission bits stop nothing, so root gets a real read-only filesystem (an empty
tmpfs mounted `ro`; the test is skipped where mounting is not allowed); anyone else gets the
folder with its write bits removed. Either way the app meets a real OSError from the kernel.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """An empty folder at `path` (created) that cannot be written while the block runs."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        path.chmod(0o500)
        try:
            yield path
        finally:
            path.chmod(0o700)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs as root: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
