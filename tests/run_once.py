"""Work the whole test run shares (a backend package build, the starter model's file), done
once however many processes the run has (pytest-xdist workers, if a developer runs with -n): the
first to ask does it under a lock in the run's own temporary folder, the others wait on that
lock and take the result. One process alone just takes the lock.

    with run_once(tmp_path_factory, "packages") as folder:
        if not (folder / name).exists():
            build(folder)
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def is_worker() -> bool:
    """Whether this process is a pytest-xdist worker (not the process that started the run)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's temporary folder: each xdist worker's base folder is a child of it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if is_worker() else base


@contextmanager
def run_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The run's folder `name`, held under an exclusive lock while inside."""
    folder = run_folder(tmp_path_factory) / name
    folder.mkdir(exist_ok=True)
    with open(folder.with_name(f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield folder
