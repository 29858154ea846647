"""The backend package build's cache in ~/.cache/kvstudio is shared by every checkout and process
on a machine: a build waits for another one running, and a configure made by a checkout whose
cmake is gone is redone rather than failing (both broke the CPU package tests on this machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernels.package import Runner, _forget_foreign_configure
from tests.prebuilt import ROOT


def _cached_build(folder: Path, cmake: Path) -> Path:
    objects = folder / "src" / "CMakeFiles" / "llama.dir"
    objects.mkdir(parents=True)
    (objects / "llama.cpp.o").write_bytes(b"object")
    (folder / "CMakeFiles").mkdir()
    (folder / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL=/src\nCMAKE_COMMAND:INTERNAL={cmake}\n"
    )
    return objects / "llama.cpp.o"


def test_a_configure_by_a_deleted_checkouts_cmake_is_redone_and_the_objects_stay(tmp_path):
    folder = tmp_path / "build"
    compiled = _cached_build(folder, tmp_path / "gone-checkout" / ".venv" / "bin" / "cmake")
    _forget_foreign_configure(folder, Runner(None))
    assert not (folder / "CMakeCache.txt").exists()
    assert not (folder / "CMakeFiles").exists()
    assert compiled.read_bytes() == b"object"


def test_a_configure_by_a_cmake_that_is_still_there_is_kept(tmp_path):
    cmake = tmp_path / "cmake"
    cmake.write_text("")
    folder = tmp_path / "build"
    _cached_build(folder, cmake)
    _forget_foreign_configure(folder, Runner(None))
    assert (folder / "CMakeCache.txt").is_file()
    assert (folder / "CMakeFiles").is_dir()


# Holds the build lock, says so, and lets go (after writing "released") when told to.
_HOLDER = """
import sys
from pathlib import Path
from kernels.package import _held
lock, marker = Path(sys.argv[1]), Path(sys.argv[2])
with _held(lock):
    print("held", flush=True)
    sys.stdin.readline()
    marker.write_text("released")
"""
# Says it is about to take the lock, takes it, and reports whether the holder had let go.
_WAITER = """
import sys
from pathlib import Path
from kernels.package import _held
lock, marker = Path(sys.argv[1]), Path(sys.argv[2])
print("taking", flush=True)
with _held(lock):
    print("after release" if marker.exists() else "while held", flush=True)
"""


def _python(code: str, *args: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_second_build_waits_for_the_one_holding_the_cache(tmp_path):
    lock, marker = tmp_path / "kvstudio-build.lock", tmp_path / "released"
    holder = _python(_HOLDER, lock, marker)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "held"
    waiter = _python(_WAITER, lock, marker)
    assert waiter.stdout is not None
    assert waiter.stdout.readline().strip() == "taking"
    # Only now does the holder let go: a waiter that did not wait got the lock before "released".
    holder.communicate("\n", timeout=120)
    out, _ = waiter.communicate(timeout=120)
    assert out.strip() == "after release"
    assert holder.returncode == 0 and waiter.returncode == 0
