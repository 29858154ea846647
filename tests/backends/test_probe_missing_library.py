"""A package whose library needs something this system lacks is refused with the name of what is
missing, not only the loader's (or a frozen app's) generic "failed to load"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.engine.backend_probe import missing_system_libraries, probe
from app.platform.errors import AppError


@pytest.fixture
def folder_needing_a_missing_library(tmp_path: Path) -> Path:
    """A real libllama.so (compiled here) linked against a library that is then deleted."""
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.fail("no C compiler: scripts/system-deps.sh installs build-essential")
    folder = tmp_path / "pkg"
    folder.mkdir()
    (tmp_path / "dep.c").write_text("int kvstudio_dep(void) { return 1; }\n")
    (tmp_path / "llama.c").write_text(
        "int kvstudio_dep(void);\nint f(void) { return kvstudio_dep(); }\n"
    )
    dep = tmp_path / "libkvstudio-gone.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(dep), str(tmp_path / "dep.c")], check=True
    )
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(folder / "libllama.so"), str(tmp_path / "llama.c"),
         f"-L{tmp_path}", "-lkvstudio-gone"],
        check=True,
    )  # fmt: skip
    dep.unlink()
    return folder


def test_the_missing_library_is_named(folder_needing_a_missing_library: Path) -> None:
    assert missing_system_libraries(folder_needing_a_missing_library) == [
        "libllama.so needs libkvstudio-gone.so, which this system lacks"
    ]


def test_the_probe_says_which_library_is_missing(folder_needing_a_missing_library: Path) -> None:
    with pytest.raises(AppError) as raised:
        probe(folder_needing_a_missing_library)
    assert str(raised.value) == (
        "The pkg backend does not load: libllama.so needs libkvstudio-gone.so, "
        "which this system lacks."
    )
