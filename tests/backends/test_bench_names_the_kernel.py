"""A comparison says which Flash Attention GPU kernels its speeds were measured with: the engine
reads it from the backend that loaded the model (a package's manifest, the built-in build's
note), `kvstudio bench` prints it and saves it in the recording, and the dashboard's Compare
title shows it when that recording is opened. Speeds of llama.cpp's own kernels and of ours must
never be mistaken for each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.backends.manifest import MANIFEST_NAME, kernel_of_folder, parse_manifest
from app.engine.backend_probe import probe
from app.services.engine_client import EngineClient
from app.ui.dashboard.page import DashboardPage
from tests.backends.package_edits import copy_package, repack, sign
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _package_saying(kernel: str, archive: Path, tmp_path: Path) -> Path:
    """The real CPU package, its manifest naming `kernel` as a CUDA/HIP package's would."""
    folder = copy_package(archive, tmp_path)
    manifest = parse_manifest((folder / MANIFEST_NAME).read_text())
    (folder / MANIFEST_NAME).write_text(replace(manifest, kernel=kernel).to_json())
    sign(folder)  # a package built and signed that way
    return repack(folder, tmp_path / "cpu.tar.gz")


def _bench(
    model: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`kvstudio bench` of f16/f16 alone, small and quick; it must succeed."""
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", str(model), "--ctx", "512", "--depth", "0",
         "--modes", "f16/f16", "--chunks", "0", "--prompt-tokens", "32", "--gen-tokens", "4",
         "--repetitions", "1", "--threads", str(ENGINE_THREADS), *options],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def test_bench_prints_saves_and_shows_the_backends_kernel(
    qtbot, store, data_folder, cpu_package, starter_model_path, tmp_path
):
    store.add(_package_saying("kvstudio-fa.3", cpu_package, tmp_path), probe)
    store.use("cpu", probe)
    assert kernel_of_folder(store.folder / "cpu") == "kvstudio-fa.3"
    recording = tmp_path / "run.json"
    result = _bench(starter_model_path, "--record", str(recording))
    assert "Flash Attention GPU kernels: kvstudio-fa.3" in result.stdout.splitlines()[0]
    assert json.loads(recording.read_text())["metadata"]["fa_kernel"] == "kvstudio-fa.3"

    client = EngineClient()
    page = DashboardPage(client)
    qtbot.addWidget(page)
    page.open_recording(recording)
    assert page.compare.chart.title.endswith(" - FA kernels: kvstudio-fa.3")
    assert page.compare.rows[0]["mode"] == "f16/f16"
    page.shutdown()
    client.shutdown()


def test_the_built_in_cpu_build_has_no_gpu_kernels_to_name(
    data_folder, starter_model_path, tmp_path
):
    """The plain pip build here (CPU) carries no CUDA/HIP kernels: the bench names none."""
    result = _bench(starter_model_path, "--json")
    assert json.loads(result.stdout)["fa_kernel"] == ""


def test_a_run_with_a_llama_switch_set_says_so(qtbot, data_folder, starter_model_path, tmp_path):
    """A bench measured with llama.cpp's rotation turned off (run 32's GPU question) is not the
    default configuration: the engine reads the switch from its environment, the bench prints
    it, saves it in the JSON and the recording, and the dashboard's title shows it."""
    recording = tmp_path / "run.json"
    env = {"LLAMA_ATTN_ROT_DISABLE": "1"}
    printed = _bench(starter_model_path, "--record", str(recording), env=env)
    assert printed.stdout.splitlines()[0].endswith(
        "; measured with LLAMA_ATTN_ROT_DISABLE=1 (llama.cpp's rotation of a quantized K/V cache)"
    )
    saved = json.loads(_bench(starter_model_path, "--json", env=env).stdout)
    assert saved["llama_switches"] == {"LLAMA_ATTN_ROT_DISABLE": "1"}
    assert json.loads(recording.read_text())["metadata"]["llama_switches"] == env
    client = EngineClient()
    page = DashboardPage(client)
    qtbot.addWidget(page)
    page.open_recording(recording)
    assert page.compare.chart.title.endswith(" - with LLAMA_ATTN_ROT_DISABLE=1")
    page.shutdown()
    client.shutdown()
    # Without it, the default configuration: nothing said.
    plain = json.loads(_bench(starter_model_path, "--json").stdout)
    assert plain["llama_switches"] == {}
