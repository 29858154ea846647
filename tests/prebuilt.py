"""What `scripts/test_builds.py` built for this run, when `./quickstart.sh test` ran it just
before pytest: the folder it names in KVSTUDIO_TEST_BUILDS (emptied at each run). A fixture
takes its file from there instead of building or disassembling the same thing a second time;
without the variable (pytest run on its own) the fixture builds it itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = "KVSTUDIO_TEST_BUILDS"
CPU_PACKAGE = "packages"  # the CPU package's archive, in this folder
HIP_REPORT = "isa-proof.json"  # `python -m kernels isa-proof --out`
CUDA_REPORT = "isa-proof-cuda.json"  # `python -m kernels isa-proof --cuda --out`


def bytecode_folder() -> Path:
    """Where the tests and every process they start keep Python's bytecode (PYTHONPYCACHEPREFIX,
    set by tests/conftest.py): outside the checkout, so nothing is written into it."""
    default = Path(tempfile.gettempdir()) / "kvstudio-tests-bytecode"
    return Path(os.environ.get("PYTHONPYCACHEPREFIX") or default)


def prebuilt(name: str) -> Path | None:
    """This run's `name` from scripts/test_builds.py, or None when there is none."""
    folder = os.environ.get(ENV)
    if not folder:
        return None
    path = Path(folder) / name
    return path if path.exists() else None


def run_isa_proof(report: Path, *args: str) -> str | None:
    """`python -m kernels isa-proof ARGS`, writing `report` (JSON) and its page beside it. None
    when it ran (exit 0, or 1: violations, which the report names), else why it could not."""
    result = subprocess.run(
        [sys.executable, "-m", "kernels", "isa-proof", *args, "--out", str(report)]
        + ["--table", str(report.with_suffix(".md"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode in (0, 1):
        # Which instances this run compiled (the rest came from the object cache): the CLI's
        # "compiled now: a, b" line, kept beside the report for compiled_in_this_run().
        found = re.search(r"compiled now: ([^;)]*)", result.stdout)
        names = found.group(1).split(", ") if found and found.group(1) != "none" else []
        _compiled_list(report).write_text("\n".join(names), encoding="utf-8")
        return None
    lines = result.stderr.strip().splitlines() or [f"isa-proof exited with {result.returncode}"]
    return lines[-1]


def _compiled_list(report: Path) -> Path:
    return report.with_suffix(".compiled")


def compiled_in_this_run(report: Path) -> set[str]:
    """The instances `report`'s proof compiled itself rather than took from the object cache:
    their counts already come from a fresh compile of these sources. Empty when unknown, so a
    test that wants a fresh compile then makes one."""
    listed = _compiled_list(report)
    if not listed.is_file():
        return set()
    return {name for name in listed.read_text(encoding="utf-8").split("\n") if name}
