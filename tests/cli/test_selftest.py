"""`kvstudio selftest`: one line and exit 0 on a working install, on the built-in backend and on a
backend package, with the KV cache size llama.cpp allocated matching the app's own estimate."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from app.backends.store import BackendStore
from app.engine.backend_probe import probe
from app.kv.kv_cache import kv_cache_bytes
from app.models.gguf_read import read_gguf_header
from app.models.random_model import write_model
from tests.cli_runner import kvstudio

pytestmark = pytest.mark.slow

LINE = re.compile(
    r"^selftest passed: (?P<backend>\S+) backend, KV cache K=q8_0/V=f16 with Flash Attention on "
    r"CPU \((?P<kv>[\d.]+) MiB\), 8 tokens at [\d.]+ t/s, engine process memory [\d.]+ \w+ "
    r"\(psutil\)$"
)


def _expected_kv_mib() -> float:
    with tempfile.TemporaryDirectory() as folder:  # the same tiny model selftest writes
        header = read_gguf_header(write_model(Path(folder) / "m.gguf", 2, "small", None))
    return kv_cache_bytes(header, 512, "q8_0/f16").total_bytes / 2**20


def test_selftest_passes_on_the_built_in_backend(data_folder):
    result = kvstudio("selftest", env={"KVSTUDIO_DATA_DIR": str(data_folder)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    match = LINE.match(lines[0])
    assert match, lines[0]
    assert match["backend"] == "built-in"
    assert abs(float(match["kv"]) - _expected_kv_mib()) <= 0.005


def test_selftest_runs_on_the_chosen_package(data_folder, cpu_package):
    store = BackendStore(data_folder)
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    result = kvstudio("selftest", env={"KVSTUDIO_DATA_DIR": str(data_folder)})
    assert result.returncode == 0, result.stderr
    match = LINE.match(result.stdout.strip())
    assert match and match["backend"] == "cpu", result.stdout
