"""`kvstudio doctor` reports versions, backends, FA pairs and devices."""

from __future__ import annotations

import json
import subprocess

from tests.cli_runner import kvstudio as run_kvstudio


def kvstudio(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_kvstudio(*args, timeout=timeout)


def test_doctor_json():
    result = kvstudio("doctor", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["llama_cpp_python"] == "0.3.36"
    assert report["llama_cpp"] and report["python"].startswith("3.")
    assert "CPU" in report["backends"]
    assert any(d["kind"] == "CPU" for d in report["devices"])
    if not report["gpu_backends"]:  # CI: a CPU build handles every pair
        assert report["flash_attention_pairs"] == "all"
        assert report["int8_k_pair_q8_0_f16"] is True


def test_doctor_text():
    result = kvstudio("doctor", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "llama-cpp-python  0.3.36" in result.stdout
    assert "FA K/V pairs" in result.stdout and "devices:" in result.stdout
