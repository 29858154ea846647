"""`kvstudio gui --screenshot`: the real app, started as a user would start it, saves its window
once it has done what was asked and quits on its own; a model that cannot be found ends it with
exit 1 and the reason, instead of leaving a window nobody can see running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _gui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        KVSTUDIO_DATA_DIR=str(tmp_path / "data"),
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-m", "app", "gui", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_the_shown_window_is_saved_and_the_app_quits(tmp_path: Path) -> None:
    picture = tmp_path / "window.png"
    done = _gui(tmp_path, "--screenshot", str(picture))
    assert done.returncode == 0, done.stderr
    image = QImage(str(picture))
    assert image.width() >= 800 and image.height() >= 500


def test_a_missing_model_ends_with_its_reason(tmp_path: Path) -> None:
    picture = tmp_path / "window.png"
    done = _gui(tmp_path, "--model", str(tmp_path / "nowhere.gguf"), "--screenshot", str(picture))
    assert done.returncode == 1
    assert "nowhere.gguf" in done.stderr and "Traceback" not in done.stderr
    assert picture.exists()  # what the window showed: the message about the file
