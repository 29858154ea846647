"""Candidate G of kernel-log P (the attention output stored rotated by the attention op, where
llama.cpp multiplies it by the Hadamard matrix with a quantized V), before a GPU has run it: it
applies on kvstudio-fa.7 and candidate F as the device script's XPATCH="F G" does and changes the
files it says; its kernels, run on the CPU by kernels/probes/fa_out_rotation_emulated.cpp, give bit
for bit what the kernel they replace gives; and llama.cpp's real decode graph has the node run it
fuses, in every layer, with K=V=q8_0 only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernels import patch_set
from tests.kernels.candidates import (
    CUDA,
    LOG,
    ROOT,
    chains,
    decode_graph,
    emulator_with,
    extract,
    files_changed_by,
    overlap,
    run_emulator,
    sources,
)

F = LOG / "2026-12-04-run34-rope-fwht.patch.txt"
G = LOG / "2026-12-04-run34-fa-out-rotation.patch.txt"
G_FILES = {
    f"{CUDA}/fattn-common.cuh",
    f"{CUDA}/fattn.cu",
    f"{CUDA}/fattn.cuh",
    f"{CUDA}/ggml-cuda.cu",
    "tests/test-backend-ops.cpp",
}
NEEDED = G_FILES | {f"{CUDA}/rope.cu", f"{CUDA}/rope.cuh", f"{CUDA}/fwht.cu"}
PROBE = ROOT / "kernels" / "probes" / "fa_out_rotation_emulated.cpp"
FA_CHAIN = ["FLASH_ATTN_EXT", "RESHAPE", "RESHAPE", "MUL_MAT"]


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    return extract(tmp_path, NEEDED)


@pytest.mark.slow
def test_candidate_g_applies_on_f_and_changes_what_it_says(llama_cpp: Path) -> None:
    assert files_changed_by(llama_cpp, G, F) == G_FILES
    fused = (llama_cpp / CUDA / "ggml-cuda.cu").read_text()
    # the backend hands the product's memory to the attention op and skips the 3 nodes after it
    call = (
        "ggml_cuda_flash_attn_ext_rotated(*cuda_ctx, node, (float *) cgraph->nodes[i + 3]->data);\n"
    )
    assert call + "        return 3;" in fused
    assert "return env == nullptr ? 3 : std::atoi(env);" in fused  # the default: every fusion
    common = (llama_cpp / CUDA / "fattn-common.cuh").read_text()
    assert "flash_attn_combine_results<DV, true>" in common
    assert "kvstudio_rotate_output_64<DV>" in common
    tests = (llama_cpp / "tests" / "test-backend-ops.cpp").read_text()
    assert "new test_flash_attn_ext_fwht(" in tests
    assert "FLASH_ATTN_EXT_FWHT" in (ROOT / "scripts" / "fa_prompt_run.sh").read_text()


@pytest.mark.slow
def test_candidate_g_needs_f_beneath_it(llama_cpp: Path) -> None:
    patch_set.apply(llama_cpp, 7)
    fa7 = sources(llama_cpp)
    with pytest.raises(patch_set.PatchError, match=r"^2026-12-04-run34-fa-out-rotation\.patch: "):
        patch_set.apply(llama_cpp, 0, G)
    assert sources(llama_cpp) == fa7  # all or nothing


def test_a_stacked_build_is_named_by_its_last_experiment() -> None:
    assert patch_set.experiment_version(7, F, G) == "kvstudio-fa.7+run34-fa-out-rotation"
    assert patch_set.experiment_version(7, F) == "kvstudio-fa.7+run34-rope-fwht"
    version = subprocess.run(
        [sys.executable, "-m", "kernels.patch_set", "version", "7", str(F), str(G)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert version.stdout == "kvstudio-fa.7+run34-fa-out-rotation\n"


def _cut(llama_cpp: Path) -> str:
    """fwht.cu's fwht_cuda and the patched fattn-common.cuh from G's rotation to launch_fattn (its
    rotation, the rotation-only kernel and the combine step), the combine step's dynamic shared
    memory renamed to the emulator's."""
    fwht = (llama_cpp / CUDA / "fwht.cu").read_text()
    common = (llama_cpp / CUDA / "fattn-common.cuh").read_text()
    kernel = fwht[
        fwht.index("template <int N, typename T>\n__launch_bounds__") : fwht.index(
            "template <typename T>\nstatic bool ggml_cuda_op_fwht_impl"
        )
    ]
    ours = common[
        common.index("// KV Studio: with a quantized V cache") : common.index(
            "template <int DV, int ncols1, int ncols2>\nvoid launch_fattn("
        )
    ]
    shared = "extern __shared__ float2 meta[];"
    assert ours.count(shared) == 1
    return kernel + "\n" + ours.replace(shared, "float2 * meta = KVSTUDIO_DYNAMIC_SHARED_FLOAT2;")


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> str:
    llama_cpp = extract(tmp_path_factory.mktemp("fa_out_rotation_src"), NEEDED)
    patch_set.apply(llama_cpp, 7, F, G)
    return _cut(llama_cpp)


def _emulator(folder: Path, code: str) -> Path:
    return emulator_with(PROBE, folder, "fa_out_rotation_kernels.inc", code)


@pytest.fixture(scope="module")
def emulator(patched: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _emulator(tmp_path_factory.mktemp("fa_out_rotation"), patched)


@pytest.mark.slow
@pytest.mark.parametrize("parallel_blocks", [1, 3, 17])
@pytest.mark.parametrize("head", [64, 128, 256, 512])
def test_candidate_gs_kernels_give_what_fwht_gives(
    emulator: Path, head: int, parallel_blocks: int
) -> None:
    """The combine step storing rotated gives bit for bit fwht_cuda's result on the unrotated
    combine step's, the rotation-only kernel fwht_cuda's on the same rows, and both match the
    explicit 64-wide Hadamard matrix in double: 6 rows, heads of 64 to 512."""
    result = run_emulator(emulator, head, 6, parallel_blocks)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ": 0 differ; rotation kernel vs fwht_cuda: 0 differ;" in result.stdout
    assert result.stdout.endswith(" 0 outside 1e-5\n")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        ("exchange[tid ^ 32]", "exchange[tid ^ 16]"),  # the cross-warp step's partner
        ("val + other : other - val;\n    }\n    if", "val + other : val - other;\n    }\n    if"),
        ("val *= 0.125f;", "val *= 0.125001f;"),  # the scale: not the same floats as fwht's
    ],
)
def test_the_emulator_fails_a_wrong_rotation(
    patched: str, tmp_path: Path, original: str, mutant: str
) -> None:
    assert patched.count(original) == 1
    program = _emulator(tmp_path, patched.replace(original, mutant))
    result = run_emulator(program, 128, 6, 3)
    assert result.returncode == 1, result.stdout + result.stderr


@pytest.mark.slow
def test_the_emulator_refuses_a_head_size_it_has_not(emulator: Path) -> None:
    result = run_emulator(emulator, 96, 6, 3)
    assert result.returncode == 2
    assert result.stderr == "fa_out_rotation_emulated: D must be 64, 128, 256 or 512.\n"


def _fa_runs(nodes: list[dict]) -> list[bool]:
    """The attention ops followed by llama.cpp's rotation of their output, as
    ggml_cuda_flash_attn_ext_can_rotate_output takes them (each node used by the next alone, a
    64-wide rotation: attn_inp_v_rot, the product's memory apart from the output's): for each,
    whether the product lies on Q's memory."""
    found = []
    for fa, _, _, product in chains(nodes, FA_CHAIN):
        users = [n for n in nodes if fa["i"] in n["src"]]
        assert [n["op"] for n in users] == ["RESHAPE"]
        assert product["src"][0] == "attn_inp_v_rot"
        assert fa["bytes"] == product["bytes"]
        assert not overlap(fa, product)
        found.append(overlap(nodes[fa["src"][0]], product))
    return found


@pytest.mark.slow
def test_llamas_decode_graph_has_the_run_candidate_g_fuses_with_a_q8_0_v(tiny_llama: Path) -> None:
    """The real llama.cpp's decode step for a Llama: with K=V=q8_0 each layer's attention op is
    followed by its two reshapes and the product with attn_inp_v_rot, consecutive; in the first
    layer the product lies where Q was (Q's last reader is the attention op), which the backend's
    general check on fused memory would refuse, so G has its own; with an f16 V (q8_0/f16,
    f16/f16) no such product."""
    assert _fa_runs(decode_graph(tiny_llama, "q8_0/q8_0")) == [True, False]
    for kv in ("q8_0/f16", "f16/f16"):
        nodes = decode_graph(tiny_llama, kv)
        assert sum(n["op"] == "FLASH_ATTN_EXT" for n in nodes) == 2
        assert not _fa_runs(nodes)
    patch = G.read_text()
    can_fuse = patch[patch.index("fa_rotation_ops = {") : patch.index("rope_set_rows_ops = {")]
    assert "ggml_cuda_check_fusion_memory_ranges" not in can_fuse


@pytest.mark.slow
def test_gemmas_decode_graph_has_it_in_every_layer(starter_model_path: Path) -> None:
    """The starter model (Gemma 3, 18 layers, heads of 256) with K=V=q8_0: the same run in every
    layer, so G leaves it one extra kernel a layer (Q's rotation), not two."""
    assert len(_fa_runs(decode_graph(starter_model_path, "q8_0/q8_0"))) == 18
