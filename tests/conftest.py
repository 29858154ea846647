"""Fixtures shared by every test area; the Hub's (hub, hub_env, tiny_gguf, small_fs) are
registered here once, from tests/hub_fixtures.py, the backend packages' (cpu_package,
data_folder, store) from tests/backend_fixtures.py, and the starter model fetch's (pypi,
tiny_starter, no_starter_package) from tests/starter_fixtures.py, the network guards
(network_attempts, child_network_attempts) from tests/network_guard.py, `reliability` (facts
for docs/reliability.md) from tests/reliability_record.py, `docs_folder` (where screenshots go)
from tests/docs_output.py, and the check that the run leaves the checkout unchanged,
tests/clean_tree.py."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# A token a test saves stays in the file the test names, never in the keyring of the machine
# running the tests (tests/core/test_token_keyring.py lifts this for itself).
os.environ.setdefault("KVSTUDIO_NO_KEYRING", "1")
# llama.cpp's CPU threads (OpenMP) spin while they wait for each other. Beside other busy
# processes a spinning thread burns the turn its partner needs: `kvstudio run starter -n 64`
# with two busy loops took 36.7 s spinning and 10.4 s sleeping (quiet: 4.8 s and 5.0 s). The
# tests and every engine or `kvstudio` process they start wait passively; benchmarks/ do not.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# And one thread per engine: four test processes share 2 cores (tests/engine_threads.py).
os.environ.setdefault("KVSTUDIO_THREADS", "1")
# Each engine and `kvstudio` process a test starts imports about a hundred of the app's modules.
# Where PYTHONDONTWRITEBYTECODE is set (it is on the CI machine) no bytecode is ever kept, and
# every such process compiles them from source again: 0.2-0.4 s of CPU each, hundreds of times a
# run. The tests keep bytecode in a folder outside the checkout instead (Python checks each
# file's size and time against its source, so a stale entry is never used).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault(
    "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "kvstudio-tests-bytecode")
)
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
# Every engine checks its model file before llama.cpp loads it (0.2-0.5 s of CPU for the
# starter's 262,144 tokens) unless the record in the cache folder says the unchanged file passed
# before (app/models/checked_models.py). One cache folder for the whole run, made here before
# pytest-xdist starts its test processes (they and the engines inherit it), so the starter is
# checked once a run; never the user's own cache, and removed when the run ends.
if "KVSTUDIO_CACHE_DIR" not in os.environ:
    os.environ["KVSTUDIO_CACHE_DIR"] = tempfile.mkdtemp(prefix="kvstudio-tests-cache-")
    atexit.register(shutil.rmtree, os.environ["KVSTUDIO_CACHE_DIR"], ignore_errors=True)

pytest_plugins = [
    "tests.clean_tree",
    "tests.docs_output",
    "tests.hub_fixtures",
    "tests.backend_fixtures",
    "tests.starter_fixtures",
    "tests.network_guard",
    "tests.reliability_record",
]


@pytest.fixture(scope="session")
def starter_model_path() -> Path:
    """The starter model's GGUF (Gemma 3 270M Q4_K_M), joined once per machine as the app joins
    it: test workers starting together on a new machine must never see a half-joined file."""
    from app.models.starter import starter_path

    return starter_path()


# What makes a test slow, by the fixtures it uses: the real starter model (loaded by llama.cpp),
# a CPU backend package (compiled once per run, minutes on a fresh machine) or the kernels'
# machine-code proof (compiled once per run). `pytest -m "not slow"` leaves these out for the
# edit-test loop (docs/testing.md); CI runs everything.
SLOW_FIXTURES = frozenset({"starter_model_path", "cpu_package", "unsigned_cpu_package", "report"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # Files with slow tests first, the quick files after them. `--dist loadfile` hands each
    # test process whole files in this order (./quickstart.sh passes --no-loadscope-reorder;
    # xdist's own order is by test count), so the run ends on files of seconds, not with three
    # processes idle while one runs a file of two long tests (the engine-killed test, 2.5 min
    # beside busy loops, was among the last to start).
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
