"""What `scripts/test_builds.py` built for this run, when `./quickstart.sh test` ran it just
before pytest: the folder it names in KVSTUDIO_TEST_BUILDS (emptied at each run). A fixture
takes its file from there instead of building or disassembling the same thing a second time;
without the variable (pytest run on its own) the fixture builds it itself."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "KVSTUDIO_TEST_BUILDS"
CPU_PACKAGE = "packages"  # the CPU package's archive, in this folder
HIP_REPORT = "isa-proof.json"  # `python -m kernels isa-proof --out`
CUDA_REPORT = "isa-proof-cuda.json"  # `python -m kernels isa-proof --cuda --out`


def prebuilt(name: str) -> Path | None:
    """This run's `name` from scripts/test_builds.py, or None when there is none."""
    folder = os.environ.get(ENV)
    path = Path(folder) / name if folder else None
    return path if path is not None and path.exists() else None
