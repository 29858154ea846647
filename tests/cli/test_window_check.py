"""`kvstudio gui` where the window cannot open says why in one sentence (exit 2) instead of Qt's
abort about xcb-cursor or the loader's error: with no display (run with QT_QPA_PLATFORM unset
and no DISPLAY/WAYLAND_DISPLAY, as over ssh or in a container), and with a library Qt links that
cannot be loaded (a damaged libGL.so.1, and one the check does not list, found first on
LD_LIBRARY_PATH as the loader would find it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.platform.window_check import NO_DISPLAY, no_display
from tests.cli_runner import ROOT, assert_bad_input


def gui(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY", "LD_LIBRARY_PATH")
    }
    clean |= {"PYTHONPATH": str(ROOT), "KVSTUDIO_DATA_DIR": str(tmp_path / "data"), **env}
    return subprocess.run(
        [sys.executable, "-m", "app", "gui"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=clean,
    )


def test_no_display_is_one_sentence_pointing_at_serve_and_run(tmp_path: Path) -> None:
    done = gui(tmp_path)
    assert_bad_input(done, "No display was found")
    assert done.stderr == f"kvstudio: {NO_DISPLAY}\n"
    assert "kvstudio serve" in NO_DISPLAY and "kvstudio run" in NO_DISPLAY
    assert "xcb" not in done.stderr  # not Qt's hint


def test_a_display_or_a_platform_without_one_is_not_refused() -> None:
    assert not no_display({"DISPLAY": ":0"}, "linux")
    assert not no_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not no_display({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not no_display({"QT_QPA_PLATFORM": "wayland;xcb", "DISPLAY": ":1"}, "linux")
    assert no_display({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not no_display({}, "win32") and not no_display({}, "darwin")


def _damaged(folder: Path, soname: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / soname).write_bytes(b"not a library\n")
    return folder


def test_a_damaged_libgl_names_the_package_to_install(tmp_path: Path) -> None:
    libs = _damaged(tmp_path / "libs", "libGL.so.1")
    done = gui(tmp_path, QT_QPA_PLATFORM="offscreen", LD_LIBRARY_PATH=str(libs))
    assert_bad_input(done, "libGL.so.1 is missing or damaged")
    assert "sudo apt install libgl1" in done.stderr


def test_a_library_the_check_does_not_list_is_named_from_the_import_error(
    tmp_path: Path,
) -> None:
    libs = _damaged(tmp_path / "libs", "libzstd.so.1")  # Qt's core library links it
    done = gui(tmp_path, QT_QPA_PLATFORM="offscreen", LD_LIBRARY_PATH=str(libs))
    assert_bad_input(done, "libzstd.so.1 is missing or damaged")
    assert "sudo apt install libzstd1" in done.stderr
