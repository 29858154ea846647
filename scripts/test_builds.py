"""Compile what the test suite builds on, before pytest starts: the CPU backend package and the
kernel proofs' HIP and CUDA objects, cached in ~/.cache/kvstudio (kernels/isa_proof.py).

    .venv/bin/python scripts/test_builds.py

`./quickstart.sh test` runs this between the install and pytest and prints how long each build
took. On a fresh machine these are minutes of compiling (the CPU package's llama.cpp build about
3.5 minutes on 2 quiet cores, the HIP and CUDA Flash Attention instances about 5), the same work
whether pytest or this script starts it; here it is counted as what it is, a build, and pytest's
own time is the tests'. With the cache filled, each step only relinks or checks its objects
(seconds). The tests still build whatever is missing themselves, so pytest alone also works.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(what: str, step: Callable[[], object]) -> None:
    started = time.monotonic()
    step()
    print(f"Test build: {what} took {time.monotonic() - started:.0f} s", file=sys.stderr)


def _isa_proof(*args: str) -> None:
    with tempfile.TemporaryDirectory() as out:
        result = subprocess.run(
            [sys.executable, "-m", "kernels", "isa-proof", *args, "--out", f"{out}/r.json"]
            + ["--table", f"{out}/r.md"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode not in (0, 1):  # 1: a verdict, which the tests name; 2: it could not run
        sys.exit(f"kernels isa-proof {' '.join(args)} failed: {result.stderr.strip()}")


def main() -> int:
    from kernels.package import build_package
    from kernels.variants import VARIANTS

    with tempfile.TemporaryDirectory() as out:
        _timed(
            "the CPU backend package",
            lambda: build_package(VARIANTS["cpu"], Path(out), log=lambda line: None),
        )
    _timed("the HIP kernel proof objects", _isa_proof)
    _timed("the CUDA kernel proof objects", lambda: _isa_proof("--cuda"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
