"""Candidate F of kernel-log O (llama.cpp's Hadamard rotations of Q, the new K and V fused with RoPE
and with the copy into the cache), before a GPU has run it: it applies on kvstudio-fa.7 as the
device script's XPATCH does and changes the files it says; its kernel, run on the CPU by
kernels/probes/rope_fwht_emulated.cpp, matches an independent reference for every row width, RoPE
mode and store; llama.cpp's real decode graph has the node runs it fuses; and the device script
stages every file that any of our patches or candidates changes (a file it did not stage would be
built unpatched, and the run would time fa.7 under the candidate's name)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernels import patch_set
from tests.kernels.candidates import (
    CUDA,
    GRAPH,
    LOG,
    ROOT,
    chains,
    decode_graph,
    emulator_with,
    extract,
    files_changed_by,
    products,
    run_emulator,
)

CANDIDATE = LOG / "2026-12-04-run34-rope-fwht.patch.txt"
FILES = {
    f"{CUDA}/rope.cu",
    f"{CUDA}/rope.cuh",
    f"{CUDA}/ggml-cuda.cu",
    "tests/test-backend-ops.cpp",
}

PROBE = ROOT / "kernels" / "probes" / "rope_fwht_emulated.cpp"
# where the emulator's cut of rope.cu ends: before rope_norm (rope_yarn and its struct kept), and
# before the host code (the kernel and its store kept)
_AFTER_YARN = (
    "template <bool forward, bool has_ff, typename T, typename D>\nstatic __global__ void rope_norm"
)
_AFTER_KERNEL = "// RoPE's parameters for rope_fwht"


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    return extract(tmp_path, FILES)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernels/probes/rope_fwht_emulated.cpp built around the kernel as candidate F writes it: cut
    from the patched rope.cu, with the rope_yarn it calls."""
    folder = tmp_path_factory.mktemp("rope_fwht")
    llama_cpp = extract(folder, FILES)
    patch_set.apply(llama_cpp, 7, CANDIDATE)
    rope = (llama_cpp / CUDA / "rope.cu").read_text()
    yarn = rope[rope.index("struct rope_corr_dims") : rope.index(_AFTER_YARN)]
    kernel = rope[rope.index("// KV Studio: fused ROPE + Hadamard") : rope.index(_AFTER_KERNEL)]
    return emulator_with(PROBE, folder, "rope_fwht_kernel.inc", yarn + "\n" + kernel)


@pytest.mark.slow
def test_candidate_f_applies_on_fa7_and_changes_what_it_says(llama_cpp: Path) -> None:
    assert files_changed_by(llama_cpp, CANDIDATE) == FILES
    rope = (llama_cpp / CUDA / "rope.cu").read_text()
    assert "static __global__ void rope_fwht(" in rope
    # the backend calls it for both shapes of llama.cpp's graph: the new K into the cache, and Q
    fused = (llama_cpp / CUDA / "ggml-cuda.cu").read_text()
    call = "ggml_cuda_op_rope_fwht_fused(*cuda_ctx, cgraph->nodes[i], cgraph->nodes[i + 2], "
    assert call + "cgraph->nodes[i + 5]);" in fused
    assert call + "nullptr);" in fused
    # and V's rotation, whose copy into the cache comes later in the graph
    assert "ggml_cuda_op_fwht_set_rows_fused(*cuda_ctx, node, cgraph->nodes[set_rows]);" in fused
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
        *sorted(LOG.glob("*.patch.txt")),
    ]
    assert CANDIDATE in patches
    for path in patches:
        changed = {f.path for f in patch_set.parse(path.read_text(), path.name).files}
        assert changed <= staged, (
            f"{path.name} changes {sorted(changed - staged)}, which the script does not stage"
        )


@pytest.mark.slow
@pytest.mark.parametrize("store", ["rows", "rows-in-place", "f32", "f16", "q8_0"])
@pytest.mark.parametrize("neox", [0, 1])
@pytest.mark.parametrize("width", [64, 128, 256])
def test_candidate_fs_kernel_matches_rope_then_hadamard_then_the_store(
    emulator: Path, store: str, neox: int, width: int
) -> None:
    """Q's rows (f32, also written over RoPE's input as a decode step's memory lies) or each token's
    heads at its cache cell (f32, f16, q8_0): 8 heads, 7 tokens, with freq factors for 128-wide
    rows (Llama 3's), against RoPE pair by pair in double, the explicit Hadamard matrix and ggml's
    q8_0 rounding (one step allowed at a rounding boundary)."""
    freq_factors = int(width == 128)
    result = run_emulator(emulator, width, 1, neox, freq_factors, store, 8, 7)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(" 0 outside tolerance\n")


@pytest.mark.slow
@pytest.mark.parametrize("store", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("width", [64, 128, 256])
def test_candidate_fs_kernel_stores_vs_rotation_alone(
    emulator: Path, store: str, width: int
) -> None:
    """V: no RoPE, each token's row rotated in groups of the rotation's width (llama.cpp rotates V
    in groups of 64), 16 groups a token, 7 tokens, stored at shuffled cache cells."""
    result = run_emulator(emulator, width, 0, 0, 0, store, 16, 7)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(" 0 outside tolerance\n")


@pytest.mark.slow
def test_the_emulator_refuses_a_width_the_kernel_has_not(emulator: Path) -> None:
    result = run_emulator(emulator, 512, 1, 0, 0, "q8_0", 8, 7)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "N must be 64, 128 or 256" in result.stderr


K_CHAIN = ["ROPE", "RESHAPE", "MUL_MAT", "RESHAPE", "VIEW", "SET_ROWS"]


@pytest.mark.slow
@pytest.mark.parametrize("kv", ["q8_0/f16", "q8_0/q8_0"])
def test_llamas_decode_graph_has_the_node_runs_candidate_f_fuses(tiny_llama: Path, kv: str) -> None:
    """The real llama.cpp's decode step for a Llama with a q8_0 K: in every layer the new K runs
    RoPE, the product with attn_inp_k_rot and the copy into the cache as 6 consecutive nodes, and
    Q runs RoPE and its product as 3, with the rotated rows where RoPE's input was (the in-place
    case the patch allows for Q alone); with a q8_0 V, V's rotation is stored by a VIEW and
    SET_ROWS further on, only nodes that leave that cache alone between. f16: nothing to fuse."""
    nodes = decode_graph(tiny_llama, kv)
    k_runs = chains(nodes, K_CHAIN)
    assert [run[5]["name"] for run in k_runs] == ["cache_k_l0 (view)", "cache_k_l1 (view)"]
    assert all(run[2]["src"][0] == "attn_inp_k_rot" for run in k_runs)
    k_starts = {run[0]["i"] for run in k_runs}
    q_runs = [r for r in chains(nodes, K_CHAIN[:3]) if r[0]["i"] not in k_starts]
    assert [run[0]["name"] for run in q_runs] == ["Qcur-0", "Qcur-1"]
    for rope, _, rotation in q_runs:
        assert rotation["src"][0] == "attn_inp_k_rot"
        rope_input = nodes[rope["src"][0]]
        assert (rotation["buffer"], rotation["offset"], rotation["bytes"]) == (
            rope_input["buffer"], rope_input["offset"], rope_input["bytes"],
        )  # fmt: skip
    # with a q8_0 V, each layer's products with attn_inp_v_rot: V's (stored ahead), the output's
    v_rot = [_stored_ahead(nodes, n) for n in products(nodes, "attn_inp_v_rot")]
    assert v_rot == (
        [] if kv == "q8_0/f16" else ["cache_v_l0 (view)", None, "cache_v_l1 (view)", None]
    )
    f16 = decode_graph(tiny_llama, "f16/f16")
    assert not any("attn_inp_k_rot" in n["src"] or "attn_inp_v_rot" in n["src"] for n in f16)
    assert len(chains(f16, ["ROPE", "VIEW", "SET_ROWS"])) == 2  # llama.cpp's own fusion's shape


def _stored_ahead(nodes: list[dict[str, Any]], product: dict[str, Any]) -> str | None:
    """Where a rotation is stored into a cache further on, found as ggml_cuda_find_fwht_set_rows
    finds it: the product's RESHAPE next, then within 64 nodes a VIEW of that reshape with the
    SET_ROWS right after it, no node between touching that cache. None: not stored that way."""
    reshape = nodes[product["i"] + 1]
    if reshape["op"] != "RESHAPE" or reshape["src"] != [product["i"]]:
        return None
    for view in nodes[product["i"] + 2 : product["i"] + 64]:
        if view["op"] == "VIEW" and view["src"] == [reshape["i"]]:
            set_rows = nodes[view["i"] + 1]
            if set_rows["op"] != "SET_ROWS" or set_rows["src"][0] != view["i"]:
                return None
            between = nodes[reshape["i"] + 1 : view["i"]]
            if any(set_rows["src"][2] in n["src"] for n in between):
                return None
            return str(set_rows["name"])
    return None


@pytest.mark.slow
@pytest.mark.parametrize("kv", ["q8_0/f16", "q8_0/q8_0"])
def test_gemmas_decode_graph_stores_k_and_v_rotations_ahead(
    starter_model_path: Path, kv: str
) -> None:
    """The starter model (Gemma 3, 18 layers, heads of 256, norms on Q and K): llama.cpp's own
    fusion takes each layer's RMS_NORM, MUL, ROPE, so F's RoPE runs do not apply, but the rotations
    of the new K and of V are each stored into their cache by a VIEW and SET_ROWS further on, which
    F's look-ahead fuses; Q's rotation and the output's are not stored (they stay fwht_cuda)."""
    nodes = decode_graph(starter_model_path, kv)
    assert not chains(nodes, K_CHAIN)
    k_rot = [_stored_ahead(nodes, n) for n in products(nodes, "attn_inp_k_rot")]
    v_rot = [_stored_ahead(nodes, n) for n in products(nodes, "attn_inp_v_rot")]
    layers = range(18)
    assert k_rot == [x for layer in layers for x in (None, f"cache_k_l{layer} (view)")]
    if kv == "q8_0/f16":
        assert v_rot == []
    else:
        assert v_rot == [x for layer in layers for x in (f"cache_v_l{layer} (view)", None)]


def test_the_graph_script_refuses_bad_input_in_one_sentence(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(GRAPH), *args], cwd=ROOT, capture_output=True, text=True,
            timeout=120, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip

    missing = run(str(tmp_path / "none.gguf"))
    assert missing.returncode == 2
    assert missing.stderr == f"No model file at {tmp_path / 'none.gguf'}.\n"
    bad_mode = run(str(tmp_path / "none.gguf"), "--kv", "q9/f16")
    assert bad_mode.returncode == 2 and bad_mode.stderr.count("\n") == 1 and "q9" in bad_mode.stderr
