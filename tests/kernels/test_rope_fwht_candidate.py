"""Candidate F of kernel-log O (RoPE and llama.cpp's Hadamard rotation of Q and the new K in one
kernel), before a GPU has run it: it applies on kvstudio-fa.7 as the device script's XPATCH does and
changes the files it says; its kernel, run on the CPU by kernels/probes/rope_fwht_emulated.cpp,
matches an independent reference for every row width, RoPE mode and store; and the device script
stages every file that any of our patches or candidates changes (a file it did not stage would be
built unpatched, and the run would time fa.7 under the candidate's name)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from kernels import patch_set
from kernels.isa_proof import ensure_sdist

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "docs" / "kernel-log" / "2026-12-04-run34-rope-fwht.patch.txt"
PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
CUDA = "ggml/src/ggml-cuda"
FILES = {
    f"{CUDA}/rope.cu",
    f"{CUDA}/rope.cuh",
    f"{CUDA}/ggml-cuda.cu",
    "tests/test-backend-ops.cpp",
}


def _extract(folder: Path) -> Path:
    """The pinned llama.cpp's Flash Attention sources and the files candidate F changes."""
    wanted = (f"{PREFIX}{CUDA}/fattn", *(PREFIX + name for name in FILES))
    with tarfile.open(ensure_sdist(log=lambda line: None), "r:gz") as tar:
        members = [m for m in tar if m.name.startswith(wanted)]
        for member in members:
            member.name = member.name[len(PREFIX) :]
        tar.extractall(folder / "llama.cpp", members=members, filter="data")
    return folder / "llama.cpp"


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    return _extract(tmp_path)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernels/probes/rope_fwht_emulated.cpp built around the kernel as candidate F writes it: cut
    from the patched rope.cu, with the rope_yarn it calls."""
    folder = tmp_path_factory.mktemp("rope_fwht")
    llama_cpp = _extract(folder)
    patch_set.apply(llama_cpp, 7, CANDIDATE)
    rope = (llama_cpp / CUDA / "rope.cu").read_text()
    yarn = rope[rope.index("struct rope_corr_dims") : rope.index(_AFTER_YARN)]
    kernel = rope[rope.index("// KV Studio: fused ROPE + Hadamard") : rope.index(_AFTER_KERNEL)]
    (folder / "rope_fwht_kernel.inc").write_text(yarn + "\n" + kernel)
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "a C++ compiler (building llama-cpp-python needs one too)"
    program = folder / "rope_fwht_emulated"
    subprocess.run(
        [compiler, "-std=c++20", "-O1", "-pthread", f"-I{folder}", "-o", str(program), str(PROBE)],
        check=True,
    )
    return program


_AFTER_YARN = (
    "template <bool forward, bool has_ff, typename T, typename D>\nstatic __global__ void rope_norm"
)
_AFTER_KERNEL = "template <int N, typename D>\nstatic void rope_fwht_cuda("
PROBE = ROOT / "kernels" / "probes" / "rope_fwht_emulated.cpp"


def _sources(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_candidate_f_applies_on_fa7_and_changes_what_it_says(llama_cpp: Path) -> None:
    patch_set.apply(llama_cpp, 7)
    fa7 = _sources(llama_cpp)
    applied = patch_set.apply(llama_cpp, 0, CANDIDATE)
    assert [p.name for p in applied] == [CANDIDATE.name.removesuffix(".txt")]
    after = _sources(llama_cpp)
    assert {name for name in after if after[name] != fa7[name]} == FILES
    rope = (llama_cpp / CUDA / "rope.cu").read_text()
    assert "static __global__ void rope_fwht(" in rope
    # the backend calls it for both shapes of llama.cpp's graph: the new K into the cache, and Q
    fused = (llama_cpp / CUDA / "ggml-cuda.cu").read_text()
    call = "ggml_cuda_op_rope_fwht_fused(*cuda_ctx, cgraph->nodes[i], cgraph->nodes[i + 2], "
    assert call + "cgraph->nodes[i + 5]);" in fused
    assert call + "nullptr);" in fused
    # and test-backend-ops checks it against the CPU
    assert "new test_rope_fwht(" in (llama_cpp / "tests" / "test-backend-ops.cpp").read_text()
    assert patch_set.experiment_version(7, CANDIDATE) == "kvstudio-fa.7+run34-rope-fwht"


def _staged_by_the_device_script() -> set[str]:
    script = (ROOT / "scripts" / "fa_prompt_run.sh").read_text()
    words: set[str] = set()
    for value in re.findall(r'^EDITED="([^"]*)"$', script, flags=re.MULTILINE):
        words |= set(value.split())
    return words - {"$EDITED"}


def test_the_device_script_stages_every_file_a_patch_or_candidate_changes() -> None:
    staged = _staged_by_the_device_script()
    assert f"{CUDA}/fattn-vec.cuh" in staged
    patches = [
        *patch_set.patch_files(),
        *sorted((ROOT / "docs" / "kernel-log").glob("*.patch.txt")),
    ]
    assert CANDIDATE in patches
    for path in patches:
        changed = {f.path for f in patch_set.parse(path.read_text(), path.name).files}
        assert changed <= staged, (
            f"{path.name} changes {sorted(changed - staged)}, which the script does not stage"
        )


@pytest.mark.slow
@pytest.mark.parametrize("store", ["rows", "f32", "f16", "q8_0"])
@pytest.mark.parametrize("neox", [0, 1])
@pytest.mark.parametrize("width", [64, 128, 256])
def test_candidate_fs_kernel_matches_rope_then_hadamard_then_the_store(
    emulator: Path, store: str, neox: int, width: int
) -> None:
    """Q's rows (f32) or each token's heads at its cache cell (f32, f16, q8_0): 8 heads, 7 tokens,
    with freq factors for 128-wide rows (Llama 3's), against RoPE pair by pair in double, the
    explicit Hadamard matrix and ggml's q8_0 rounding (one step allowed at a rounding boundary)."""
    freq_factors = int(width == 128)
    args = [str(width), str(neox), str(freq_factors), store, "8", "7"]
    result = subprocess.run([emulator, *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(" 0 outside tolerance\n")


@pytest.mark.slow
def test_the_emulator_refuses_a_width_the_kernel_has_not(emulator: Path) -> None:
    result = subprocess.run(
        [emulator, "512", "0", "0", "q8_0", "8", "7"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "N must be 64, 128 or 256" in result.stderr
