"""A spawned engine imports llama_cpp before anything imports numpy, whatever started the app.

multiprocessing's spawn runs the parent's main module again in the child (as __mp_main__, with
runpy.run_path for a script; a package's __main__, as in `python -m app`, is skipped), then
imports the engine's module, and only then does worker.main import llama_cpp. On one GPU machine
a numpy imported first made every model load crash, so what those steps import must not include
numpy. Each case below runs exactly those steps in a clean interpreter."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD_STEPS = """
import runpy, sys
main = sys.argv[1]
if main:
    runpy.run_path(main, run_name="__mp_main__")  # what spawn does with a script main module
import app.engine.worker  # the engine's target
print("numpy" in sys.modules, "llama_cpp" in sys.modules)
"""
ENTRY_POINTS = {
    "the kvstudio console script": Path(sysconfig.get_path("scripts")) / "kvstudio",
    "the frozen app's entry point": ROOT / "packaging" / "entry.py",
    "python -m app (spawn skips a package's __main__)": None,
}


@pytest.mark.parametrize("started_by", ENTRY_POINTS)
def test_the_engine_child_imports_no_numpy_before_llama_cpp(started_by: str) -> None:
    main = ENTRY_POINTS[started_by]
    if main is not None and not main.is_file():
        pytest.skip(f"{main} is not installed here")
    result = subprocess.run(
        [sys.executable, "-c", CHILD_STEPS, str(main or "")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"], (started_by, result.stdout)


def test_the_app_and_the_cli_never_import_llama_cpp_themselves() -> None:
    """llama.cpp runs in the engine child (a crash costs the engine, never the window): the
    window's modules, the engine client, the load checks and the commands that only start an
    engine import no llama_cpp in the process that imports them."""
    code = (
        "import sys, app.gui, app.cli, app.services.engine_client, app.engine.rpc_load_check,"
        " app.engine.backend_probe, app.engine.backend_verify, app.engine.compare\n"
        "for name in ('run', 'serve', 'worker', 'fit', 'bench', 'pull', 'ls', 'rm', 'backend'):\n"
        "    __import__('app.commands.' + name)\n"
        "print('llama_cpp' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_engine_does_not_import_the_hub_client() -> None:
    """The engine's modules (what worker.main imports once llama_cpp is in) leave out the Hub
    client: huggingface_hub and httpx are 0.45 s of imports, paid in every engine process the
    app starts, for nothing the engine does (app/backends/built_in.py)."""
    code = (
        "import sys, llama_cpp, app.engine.engine_loop\n"
        "print(sorted(m for m in ('huggingface_hub', 'httpx', 'httpx2', 'app.models.hub')"
        " if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
