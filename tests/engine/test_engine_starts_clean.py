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


def _printed_by(code: str) -> str:
    """What `code` prints, run in a clean interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


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
    assert _printed_by(code) == "False"


HUB_MODULES = "('huggingface_hub', 'httpx', 'httpx2', 'app.models.hub')"


@pytest.mark.parametrize(
    "modules",
    [
        "llama_cpp, app.engine.engine_loop",  # the engine, once worker.main has llama_cpp in
        "app.cli, app.commands.run, app.commands.bench",  # kvstudio run / bench on a local model
    ],
)
def test_the_engine_and_a_local_run_do_not_import_the_hub_client(modules: str) -> None:
    """The Hub client (huggingface_hub, httpx: 0.3-0.45 s of imports) is left out of every
    engine process and of `kvstudio run` on a model already here; it comes in only to pull
    (app/models/model_ref.py)."""
    code = f"import sys, {modules}\nprint(sorted(m for m in {HUB_MODULES} if m in sys.modules))"
    assert _printed_by(code) == "[]"


def test_the_engine_starts_without_what_only_a_rare_load_needs() -> None:
    """The GGUF reader (a file that passed its checks before is not checked again,
    app/models/checked_models.py), the backend store with its package signatures (cryptography)
    and the memory probes (psutil, for a load across RPC workers): about 0.15 s of CPU at every
    engine start before they moved into the functions that use them."""
    rare = "('app.models.gguf_read', 'app.backends.store', 'cryptography', 'psutil')"
    code = "import sys, llama_cpp, app.engine.engine_loop\n"
    code += f"print([m for m in {rare} if m in sys.modules])"
    assert _printed_by(code) == "[]"
