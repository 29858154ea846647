"""Compile what the test suite builds on, before pytest starts: the CPU backend package and the
kernel proofs' HIP and CUDA objects, cached in ~/.cache/kvstudio (kernels/isa_proof.py), and the
Python bytecode of the app, the tests and the installed packages, kept outside the checkout
(tests/prebuilt.py bytecode_folder).

    KVSTUDIO_TEST_BUILDS=FOLDER .venv/bin/python scripts/test_builds.py

FOLDER (emptied first) receives the package's archive and the proofs' reports; pytest's fixtures
take them from there when the variable is set (tests/prebuilt.py), so nothing is built or
disassembled twice in one run.

The CPU package is built by the release's own build step, `scripts/release.py build cpu` (the
command .github/workflows/release.yml runs per variant), so that step runs on every test run; it
calls the same kernels.package.build_package as before, with the same cache, so nothing is
compiled twice.

`./quickstart.sh test` runs this between the install and pytest and prints how long each build
took. On a fresh machine these are minutes of compiling (the CPU package's llama.cpp build about
3.5 minutes on 2 quiet cores, the HIP and CUDA Flash Attention instances about 5), the same work
whether pytest or this script starts it; here it is counted as what it is, a build, and pytest's
own time is the tests'. With the cache filled, each step only relinks or checks its objects
(seconds). The tests still build whatever is missing themselves, so pytest alone also works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(what: str, step: Callable[[], object]) -> None:
    started = time.monotonic()
    try:
        step()
    except Exception as error:  # noqa: BLE001 - the tests that need it build it and fail naming why
        print(f"Test build: {what} failed ({error}); the tests will try again", file=sys.stderr)
    print(f"Test build: {what} took {time.monotonic() - started:.0f} s", file=sys.stderr)


def _release_build(variant: str, out: Path) -> None:
    """`scripts/release.py build VARIANT --out OUT`, as the release workflow runs it; its build
    log is kept out of the way and only its last lines are shown when it fails."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release.py"), "build", variant, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(" / ".join(tail) or f"release.py build exited {result.returncode}")


def _isa_proof(report: Path, *args: str) -> None:
    from tests.prebuilt import run_isa_proof

    if (failure := run_isa_proof(report, *args)) is not None:
        report.unlink(missing_ok=True)  # the tests run it themselves and fail with the reason
        print(f"kernels isa-proof {' '.join(args)} failed: {failure}", file=sys.stderr)


def _bytecode(folder: Path) -> None:
    """Compile the app's, the tests' and the installed packages' modules into the tests' bytecode
    folder. Otherwise, on a fresh machine, the four test processes compile the same modules at
    the same time as they collect the tests (21 s of CPU each), and the first engines and
    `kvstudio` processes compile llama_cpp, numpy and openai again; pip's own bytecode is not
    used once PYTHONPYCACHEPREFIX is set. Then one collection of the tests writes pytest's own
    (assert-rewritten) bytecode of the test files and the standard library modules they import.
    With the folder filled this only compares times."""
    sources = [ROOT / name for name in ("app", "tests", "kernels", "benchmarks", "packaging")]
    sources.append(Path(sysconfig.get_paths()["purelib"]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder)
    # -qq: a few installed files are templates or for other Pythons; they stay uncompiled.
    for step in (
        ["compileall", "-qq", "-j", "2", *map(str, sources)],
        ["pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
    ):
        subprocess.run(
            [sys.executable, "-m", *step], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False
        )


def main() -> int:
    from tests.prebuilt import CPU_PACKAGE, CUDA_REPORT, ENV, HIP_REPORT, bytecode_folder

    if not os.environ.get(ENV):
        sys.exit(f"usage: {ENV}=FOLDER {sys.argv[0]} (FOLDER is emptied, then filled)")
    out = Path(os.environ[ENV])
    shutil.rmtree(out, ignore_errors=True)
    (out / CPU_PACKAGE).mkdir(parents=True)
    _timed(
        "the CPU backend package",
        lambda: _release_build("cpu", out / CPU_PACKAGE),
    )
    _timed("the HIP kernel proof", lambda: _isa_proof(out / HIP_REPORT))
    _timed("the CUDA kernel proof", lambda: _isa_proof(out / CUDA_REPORT, "--cuda"))
    _timed("the tests' bytecode", lambda: _bytecode(bytecode_folder()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
