"""The real app started where the locale is C (a container, a service, a bare shell: LC_ALL=C)
opens without Qt's four-line locale warning on stderr, on a UTF-8 character type (C.UTF-8, what
Qt would switch to anyway), and a start on a chosen locale keeps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.platform.window_check import utf8_locale

pytestmark = pytest.mark.slow  # the window opens once, in a subprocess

ROOT = Path(__file__).resolve().parents[2]


def test_a_start_on_the_c_locale_prints_no_locale_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG"))}
    env |= {
        "LC_ALL": "C",
        "QT_QPA_PLATFORM": "offscreen",
        "KVSTUDIO_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    shot = tmp_path / "window.png"
    done = subprocess.run(
        [sys.executable, "-m", "app", "gui", "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert shot.exists()
    assert "locale" not in done.stderr, done.stderr


def test_only_a_c_or_posix_locale_is_changed() -> None:
    assert utf8_locale({"LC_ALL": "C"}) == {"LC_ALL": "C.UTF-8"}
    assert utf8_locale({"LC_ALL": "POSIX", "LANG": "de_DE.UTF-8"}) == {"LC_ALL": "C.UTF-8"}
    assert utf8_locale({}) == {"LC_CTYPE": "C.UTF-8"}
    assert utf8_locale({"LANG": "de_DE.UTF-8"}) == {}
    assert utf8_locale({"LANG": "C", "LC_CTYPE": "fr_FR.UTF-8"}) == {}
    assert utf8_locale({"LC_ALL": "en_GB.UTF-8"}) == {}
