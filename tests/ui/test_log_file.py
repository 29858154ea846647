"""The installed app's log: the real GUI, started as `python -m app gui --screenshot` with no
terminal to read, leaves <data folder>/logs/kvstudio.log behind with its start line; a logs
folder it cannot write costs one warning on stderr, and the window still opens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__
from tests.read_only import read_only_folder

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _gui_screenshot(tmp_path: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        KVSTUDIO_DATA_DIR=str(data),
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-m", "app", "gui", "--screenshot", str(tmp_path / "window.png")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_the_gui_writes_its_log_file_with_a_start_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = _gui_screenshot(tmp_path, data)
    assert done.returncode == 0, done.stderr
    lines = (data / "logs" / "kvstudio.log").read_text(encoding="utf-8").splitlines()
    assert f"KV Studio {__version__} started on " in lines[0]
    assert lines[0].endswith("backend built-in")
    assert len(lines) > 1  # what the app logged after the start line is kept too
    assert "KV Studio" not in done.stderr  # stderr shows warnings only, as before


def test_a_read_only_logs_folder_still_opens_the_window(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with read_only_folder(data / "logs"):
        done = _gui_screenshot(tmp_path, data)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "window.png").stat().st_size > 0
    [warning] = [line for line in done.stderr.splitlines() if "log file" in line]
    # The reason is the kernel's: "Read-only file system" as root, "Permission denied" if not.
    assert warning.startswith(
        f"WARNING app.platform.app_log: KV Studio cannot write its log file "
        f"{data / 'logs' / 'kvstudio.log'} ("
    )
    assert warning.endswith("); it runs on without one.")
