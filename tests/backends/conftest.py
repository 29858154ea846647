"""Fixtures the RPC worker tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends.store import BackendStore
from app.engine.backend_probe import probe


@pytest.fixture(scope="module")
def cpu_chosen(cpu_package, tmp_path_factory) -> Path:
    """A data folder whose chosen backend is the CPU package (it has rpc-server)."""
    folder = tmp_path_factory.mktemp("rpc-data")
    store = BackendStore(folder)
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    return folder
