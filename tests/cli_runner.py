"""`kvstudio` as a user runs it: a subprocess of `python -m app` from the project root, and the
shape every bad-input answer must have (one line on stderr, exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kvstudio(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `kvstudio ARGS`; `env` adds to this process's environment."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=full_env,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kvstudio: ") and words in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
