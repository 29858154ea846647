"""`python -m kernels verify`: the int8-K pair is reported compiled/used, or why not."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.engine.build_info import parse_system_info
from app.kv.kv_types import KvMode
from kernels.variants import VARIANTS, variant
from kernels.verify import VerifyReport

CUDA_INFO = (
    "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | "
    "FA_QUANTS = q8_0-f16,q8_0-q8_0,f16-f16 | CPU : SSE3 = 1 | AVX = 1 | "
)
DEFAULT_CUDA_INFO = (
    "CUDA : ARCHS = 900 | FA_QUANTS = q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16 | CPU : AVX = 1 |"
)


def test_cuda_build_with_int8k_pair_is_recognised() -> None:
    info = parse_system_info(CUDA_INFO)
    assert info.gpu_backends == ("CUDA",)
    assert info.has_fa_pair(KvMode.parse("q8_0/f16")) is True
    assert info.has_fa_pair(KvMode.parse("f16/q8_0")) is False


def test_default_fa_quants_lack_the_mixed_int8k_pair() -> None:
    info = parse_system_info(DEFAULT_CUDA_INFO)
    assert info.has_fa_pair(KvMode.parse("q8_0/f16")) is False
    assert info.has_fa_pair(KvMode.parse("q8_0/q8_0")) is True


def test_cpu_build_does_not_restrict_pairs() -> None:
    info = parse_system_info("CPU : SSE3 = 1 | AVX2 = 1 | LLAMAFILE = 1 | ")
    assert info.backends == ("CPU",)
    assert info.has_fa_pair(KvMode.parse("q8_0/f16")) is None


def test_every_gpu_variant_compiles_the_default_pair() -> None:
    for v in VARIANTS.values():
        if any(a in ("-DGGML_CUDA=ON", "-DGGML_HIP=ON") for a in v.cmake_args):
            assert "q8_0-f16" in v.cmake_args_text, v.name
    assert "gfx1100" in variant("rocm-rdna3").cmake_args_text


def test_cpu_build_is_never_called_verified(starter_model_path) -> None:
    """On a CPU build the checks run (K is q8_0, tokens decode, no warning) but no GPU kernel
    is involved, so the report must not use the word "verified" for it, and says why."""
    from kernels.verify import format_report, verify

    report = verify(str(starter_model_path), KvMode.parse("q8_0/f16"), n_ctx=1024)
    assert report.ok, report.problems
    assert report.k_cache_types and set(report.k_cache_types) == {"q8_0"}
    assert report.tokens > 0
    assert report.kv_devices == ["CPU"]
    assert not report.verified
    text = format_report(report)
    assert "int8-K path verified" not in text
    assert "no GPU Flash Attention kernel is involved" in text
    assert "K is stored as q8_0" in text


@pytest.mark.slow
def test_verify_cli_exit_status_says_nothing_was_verified_on_cpu() -> None:
    from kernels.__main__ import NOTHING_TO_VERIFY

    result = subprocess.run(
        [sys.executable, "-m", "kernels", "verify", "starter", "--ctx", "512", "--json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == NOTHING_TO_VERIFY, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["verified"] is False and report["on_gpu"] is False


def _report(**changes) -> VerifyReport:
    base = dict(
        mode="q8_0/f16",
        backends=("CUDA", "CPU"),
        fa_pairs=("q8_0-f16", "f16-f16"),
        compiled=True,
        k_cache_types=["q8_0"],
        kv_devices=["CUDA0"],
        tokens=16,
    )
    return VerifyReport(**(base | changes))


def test_verified_only_when_a_gpu_held_the_cache_and_nothing_fell_back() -> None:
    from kernels.verify import verdict

    assert _report().verified
    assert verdict(_report()).startswith("RESULT: int8-K path verified: CUDA0")
    # The f16 control is verified as what it is, never called int8-K.
    control = _report(mode="f16/f16", k_cache_types=["f16"])
    assert verdict(control).startswith("RESULT: K=f16 path (not int8-K) verified: CUDA0")
    # The same clean run with the cache in host memory: a GPU build, but no GPU kernel read it.
    assert not _report(kv_devices=["CUDA_Host"]).verified
    assert not _report(kv_devices=["CPU"]).verified
    # A fallback warning is a problem, whatever the device.
    warned = _report(problems=["llama.cpp: converting K and V to f16 instead (slow)"])
    assert not warned.verified and verdict(warned) == "RESULT: NOT verified"


def test_verify_cli_rejects_unknown_kv_type() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kernels", "verify", "starter", "--kv", "q9/f16"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Unknown KV cache type 'q9'" in result.stderr
    assert "Traceback" not in result.stderr
