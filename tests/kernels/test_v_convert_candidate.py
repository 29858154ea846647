"""Candidate H of kernel-log P (a q8_0 V value made a float without I2F.S8, two ways, picked at run
time), before a GPU has run it: it applies on fa.7 with F and G as XPATCH="F G H" does and changes
the files it says; its conversions, run on the CPU by kernels/probes/v_convert_emulated.cpp with
PTX's byte permute written out, give exactly the floats fa.7's conversion gives."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernels import patch_set
from tests.kernels.candidates import (
    CUDA,
    LOG,
    ROOT,
    emulator_with,
    extract,
    files_changed_by,
    run_emulator,
)

F = LOG / "2026-12-04-run34-rope-fwht.patch.txt"
G = LOG / "2026-12-04-run34-fa-out-rotation.patch.txt"
H = LOG / "2026-12-04-run34-v-convert.patch.txt"
H_FILES = {f"{CUDA}/fattn-common.cuh", f"{CUDA}/fattn-vec.cuh"}
NEEDED = {f"{CUDA}/{name}" for name in ("rope.cu", "rope.cuh", "ggml-cuda.cu", "fwht.cu")} | {
    "tests/test-backend-ops.cpp"
}
PROBE = ROOT / "kernels" / "probes" / "v_convert_emulated.cpp"


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    return extract(tmp_path, NEEDED)


@pytest.mark.slow
def test_candidate_h_applies_on_f_and_g_and_changes_what_it_says(llama_cpp: Path) -> None:
    assert files_changed_by(llama_cpp, H, F, G) == H_FILES
    vec = (llama_cpp / CUDA / "fattn-vec.cuh").read_text()
    # the switch, read once, and the long-KV and 2-block kernels of q8_0 K and V both taking it
    assert 'getenv("KVSTUDIO_FA_V_CONVERT")' in vec
    assert vec.count("ggml_cuda_flash_attn_ext_vec_case_v_convert<D, 1, heads_per_block") == 2
    assert patch_set.experiment_version(7, F, G, H) == "kvstudio-fa.7+run34-v-convert"


_PRMT = re.compile(r'asm\("prmt\.b32 %0, %1, (?:0|%2), %[23];"\s*:\s*"=r"\((\w+)\)\s*:\s*(.*?)\);')


def _as_calls(code: str) -> str:
    """Each PTX prmt written as a call of the emulator's ptx_prmt (a missing second source: 0)."""

    def call(match: re.Match[str]) -> str:
        operands = re.findall(r'"r"\((.*?)\)(?:,|$)', match[2])
        if len(operands) == 2:
            operands.insert(1, "0")
        return f"{match[1]} = ptx_prmt({', '.join(operands)});"

    rewritten, count = _PRMT.subn(call, code)
    assert count == 2 and "asm(" not in rewritten
    return rewritten


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> str:
    """kvstudio_q8_0_value and dequantize_V_q8_0 as H writes them."""
    llama_cpp = extract(tmp_path_factory.mktemp("v_convert_src"), NEEDED)
    patch_set.apply(llama_cpp, 7, F, G, H)
    common = (llama_cpp / CUDA / "fattn-common.cuh").read_text()
    start = common.index("// KV Studio experiment (candidate H)")
    end = common.index("template <ggml_type type_K, int D, int nthreads>\nconstexpr __device__")
    return common[start:end]


def _run(folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    return run_emulator(emulator_with(PROBE, folder, "v_convert_kernels.inc", _as_calls(source)))


@pytest.mark.slow
def test_candidate_hs_conversions_give_fa7s_floats(source: str, tmp_path: Path) -> None:
    result = _run(tmp_path, source)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == (
        "393216 values converted by variants 1 and 2: 0 runs differ from variant 0\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        ('"r"(0x7440 + l)', '"r"(0x7444 + l)'),  # variant 2: a byte of the constant, not of V
        ("- 8388736.0f", "- 8388735.0f"),  # variant 2: one off
        ('"r"(0x8880 + l*0x1111)', '"r"(0x0880 + l*0x1111)'),  # variant 1: the sign not repeated
    ],
)
def test_the_emulator_fails_a_wrong_conversion(
    source: str, tmp_path: Path, original: str, mutant: str
) -> None:
    assert source.count(original) == 1
    result = _run(tmp_path, source.replace(original, mutant))
    assert result.returncode == 1, result.stdout + result.stderr
