"""Backend packages for the tests: a real CPU package, built from the pinned llama-cpp-python
sdist with `python -m kernels package cpu` (about 3.5 minutes on 2 cores the first time; the
CMake build folder is cached in ~/.cache/kvstudio, so later sessions only relink), and a fresh
data folder per test so the chosen backend never leaks between tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.backends.store import BackendStore
from tests.prebuilt import CPU_PACKAGE, prebuilt


@pytest.fixture(scope="session")
def cpu_package(tmp_path_factory) -> Path:
    """The CPU package's archive (.tar.gz of cpu/ with manifest.json): scripts/test_builds.py's
    from this run, copied, or built here."""
    from kernels.package import archive_name, build_package
    from kernels.variants import VARIANTS

    out = tmp_path_factory.mktemp("packages")
    built = prebuilt(f"{CPU_PACKAGE}/{archive_name('cpu')}")
    if built is not None:
        shutil.copy2(built, out)
    else:
        build_package(VARIANTS["cpu"], out, log=lambda line: None)
    return out / archive_name("cpu")


@pytest.fixture
def data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def store(data_folder: Path) -> BackendStore:
    return BackendStore(data_folder)
