"""Candidate F of kernel-log O (RoPE and llama.cpp's Hadamard rotation of Q and the new K in one
kernel), before a GPU has run it: it applies on kvstudio-fa.7 as the device script's XPATCH does and
changes the files it says; and the device script stages every file that any of our patches or
candidates changes (a file it did not stage would be built unpatched, and the run would time fa.7
under the candidate's name)."""

from __future__ import annotations

import re
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


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    """The pinned llama.cpp's Flash Attention sources and the files candidate F changes."""
    wanted = (f"{PREFIX}{CUDA}/fattn", *(PREFIX + name for name in FILES))
    with tarfile.open(ensure_sdist(log=lambda line: None), "r:gz") as tar:
        members = [m for m in tar if m.name.startswith(wanted)]
        for member in members:
            member.name = member.name[len(PREFIX) :]
        tar.extractall(tmp_path / "llama.cpp", members=members, filter="data")
    return tmp_path / "llama.cpp"


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
