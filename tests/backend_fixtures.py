"""Backend packages for the tests: a real CPU package, built from the pinned llama-cpp-python
sdist with `python -m kernels package cpu` (about 3.5 minutes on 2 cores the first time; the
CMake build folder is cached in ~/.cache/kvstudio, so later sessions only relink), and a fresh
data folder per test so the chosen backend never leaks between tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends.store import BackendStore
from tests.prebuilt import CPU_PACKAGE, prebuilt


@pytest.fixture(scope="session")
def unsigned_cpu_package(tmp_path_factory) -> Path:
    """The CPU package's archive as the build writes it (.tar.gz of cpu/ with manifest.json, not
    signed): scripts/test_builds.py's from this run, copied, or built here."""
    from kernels.package import archive_name, build_package
    from kernels.variants import VARIANTS
    from tests.backends.package_edits import copy_package, repack

    out = tmp_path_factory.mktemp("packages")
    built = prebuilt(f"{CPU_PACKAGE}/{archive_name('cpu')}")
    if built is None:
        build_package(VARIANTS["cpu"], out, log=lambda line: None)
        return out / archive_name("cpu")
    # Written again by this checkout's write_archive: a build from before package signing put
    # the manifest last, where the app no longer looks for it.
    return repack(copy_package(built, out), out / archive_name("cpu"))


@pytest.fixture(scope="session")
def cpu_package(unsigned_cpu_package, tmp_path_factory) -> Path:
    """The CPU package signed as a release is (scripts/release.py sign), with this test
    process's key, which the app then trusts through KVSTUDIO_DEV_TRUSTED_KEYS (set here for
    the rest of the session, so `kvstudio` children trust it too)."""
    from tests.backends.package_edits import signed_copy, trust_test_key

    out = tmp_path_factory.mktemp("signed-packages")
    trust_test_key(out)
    return signed_copy(unsigned_cpu_package, out)


@pytest.fixture
def data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def store(data_folder: Path) -> BackendStore:
    return BackendStore(data_folder)
