"""Candidate I of kernel-log Q (Q's SCALE and llama.cpp's Hadamard rotation of Q in one kernel,
for models that scale Q after RoPE, as Gemma 3), before a GPU has run it: it applies on
kvstudio-fa.7 and candidates F, G and H as the device script's XPATCH="F G H I" does and changes the
files it says; its kernel, run on the CPU by kernels/probes/scale_fwht_emulated.cpp, gives bit for
bit what the two kernels it replaces give; and llama.cpp's real decode graph of the starter model
has the node run it fuses in every layer with a q8_0 K, and a Llama's has none."""

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
H = LOG / "2026-12-04-run34-v-convert.patch.txt"
I = LOG / "2026-12-05-run34-scale-fwht.patch.txt"  # noqa: E741 (the candidate's letter)
I_FILES = {
    f"{CUDA}/rope.cu",
    f"{CUDA}/rope.cuh",
    f"{CUDA}/ggml-cuda.cu",
    "tests/test-backend-ops.cpp",
}
NEEDED = I_FILES | {
    f"{CUDA}/fattn.cuh",
    f"{CUDA}/fattn.cu",
    f"{CUDA}/scale.cu",
    f"{CUDA}/fwht.cu",
}
PROBE = ROOT / "kernels" / "probes" / "scale_fwht_emulated.cpp"
Q_CHAIN = ["SCALE", "RESHAPE", "MUL_MAT"]


@pytest.fixture
def llama_cpp(tmp_path: Path) -> Path:
    return extract(tmp_path, NEEDED)


@pytest.mark.slow
def test_candidate_i_applies_on_f_g_h_and_changes_what_it_says(llama_cpp: Path) -> None:
    assert files_changed_by(llama_cpp, I, F, G, H) == I_FILES
    fused = (llama_cpp / CUDA / "ggml-cuda.cu").read_text()
    # the backend runs the SCALE and the product as one kernel and skips the reshape and the product
    call = "ggml_cuda_op_scale_fwht_fused(*cuda_ctx, cgraph->nodes[i], cgraph->nodes[i + 2]);\n"
    assert call + "        return 2;" in fused
    assert "return env == nullptr ? 4 : std::atoi(env);" in fused  # the default: every fusion
    tests = (llama_cpp / "tests" / "test-backend-ops.cpp").read_text()
    assert "new test_scale_fwht(" in tests
    assert "FLASH_ATTN_EXT_FWHT SCALE_FWHT}" in (ROOT / "scripts" / "fa_prompt_run.sh").read_text()
    assert patch_set.experiment_version(7, F, G, H, I) == "kvstudio-fa.7+run34-scale-fwht"


@pytest.mark.slow
def test_candidate_i_needs_f_beneath_it(llama_cpp: Path) -> None:
    patch_set.apply(llama_cpp, 7)
    fa7 = sources(llama_cpp)
    with pytest.raises(patch_set.PatchError, match=r"^2026-12-05-run34-scale-fwht\.patch: "):
        patch_set.apply(llama_cpp, 0, I)
    assert sources(llama_cpp) == fa7  # all or nothing


# the rows as ggml_cuda_op_scale_fwht_fused lays them out for rope_fwht (the emulator launches the
# kernel so): one row a warp, ne01 = the rows, ne02 = 1, contiguous rows of the rotation's width
_HOST_ROWS = (
    "rope_fwht_rows rows = { (const float *) x->data, n, (int) rows_n, 1, n, n * rows_n, "
    "n * rows_n, rows_n };"
)


def _cut(llama_cpp: Path) -> str:
    """rope.cu's rope_fwht (with rope_yarn, which it calls), scale.cu's scale_f32 and fwht.cu's
    fwht_cuda, as the patched sources have them."""
    rope = (llama_cpp / CUDA / "rope.cu").read_text()
    scale = (llama_cpp / CUDA / "scale.cu").read_text()
    fwht = (llama_cpp / CUDA / "fwht.cu").read_text()
    assert _HOST_ROWS in rope

    def between(text: str, start: str, end: str) -> str:
        return text[text.index(start) : text.index(end)]

    return "\n".join(
        [
            between(
                rope,
                "struct rope_corr_dims",
                "template <bool forward, bool has_ff, typename T, typename D>\n"
                "static __global__ void rope_norm",
            ),
            between(
                rope, "// KV Studio: fused ROPE + Hadamard", "// RoPE's parameters for rope_fwht"
            ),
            between(
                scale,
                "template <typename T>\nstatic __global__ void scale_f32",
                "template <typename T>\nstatic void scale_f32_cuda",
            ),
            between(
                fwht,
                "template <int N, typename T>\n__launch_bounds__",
                "template <typename T>\nstatic bool ggml_cuda_op_fwht_impl",
            ),
        ]
    )


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> str:
    llama_cpp = extract(tmp_path_factory.mktemp("scale_fwht_src"), NEEDED)
    patch_set.apply(llama_cpp, 7, F, G, H, I)
    return _cut(llama_cpp)


def _emulator(folder: Path, code: str) -> Path:
    return emulator_with(PROBE, folder, "scale_fwht_kernels.inc", code)


@pytest.fixture(scope="module")
def emulator(patched: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _emulator(tmp_path_factory.mktemp("scale_fwht"), patched)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("width", "rows", "scale", "bias"),
    [
        ("256", "4", "0.0625", "0"),  # the starter model's Q: 4 heads of 256, 1/sqrt(256)
        ("256", "28", "0.0883883", "0"),
        ("128", "56", "0.0883883", "0"),  # 8 heads of 128, 7 tokens
        ("128", "7", "0.5", "0.25"),  # a bias too
        ("64", "56", "0.3", "-0.1"),
    ],
)
def test_candidate_is_kernel_gives_what_scale_then_fwht_give(
    emulator: Path, width: str, rows: str, scale: str, bias: str
) -> None:
    """The fused kernel gives bit for bit what scale_f32 then fwht_cuda give (rows with zeros and
    negative zeros), into new memory and over its own input, and the reference's values."""
    result = run_emulator(emulator, width, rows, scale, bias)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == (
        f"N {width}, {rows} rows: bit for bit as scale_f32 then fwht_cuda: yes, in place: yes; "
        "0 values off the reference\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        # the bias forgotten
        (
            "op_scale*xr[e] + op_bias : xr[e]) * scale",
            "op_scale*xr[e] : xr[e]) * scale",
        ),
        # the two scales taken in another order: the same value, not the same floats
        (
            "(has_scale ? op_scale*xr[e] + op_bias : xr[e]) * scale",
            "has_scale ? op_scale*(xr[e]*scale) + op_bias*scale : xr[e]*scale",
        ),
    ],
)
def test_the_emulator_fails_a_wrong_kernel(
    patched: str, tmp_path: Path, original: str, mutant: str
) -> None:
    assert patched.count(original) == 1
    program = _emulator(tmp_path, patched.replace(original, mutant))
    result = run_emulator(program, "128", "7", "0.5", "0.25")
    assert result.returncode == 1, result.stdout + result.stderr


@pytest.mark.slow
def test_the_emulator_refuses_a_width_the_kernel_has_not(emulator: Path) -> None:
    result = run_emulator(emulator, "512", "4", "0.0625", "0")
    assert result.returncode == 2
    assert result.stderr == "scale_fwht_emulated: N must be 64, 128 or 256 and ROWS positive.\n"


def _q_runs(nodes: list[dict]) -> list[str]:
    """The SCALE, RESHAPE, product runs candidate I fuses: for each, the op the SCALE reads, and
    "in place" where the product lies exactly on the SCALE's input (rows the fusion rewrites)."""
    found = []
    for scale, _, product in chains(nodes, Q_CHAIN):
        assert product["src"][0] == "attn_inp_k_rot"
        x = nodes[scale["src"][0]]
        same = (x["buffer"], x["offset"]) == (product["buffer"], product["offset"])
        assert same or not overlap(x, product)  # any other overlap: the general check refuses
        found.append(f"{x['op']} in place" if same else str(x["op"]))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kv", ["q8_0/f16", "q8_0/q8_0"])
def test_gemmas_decode_graph_has_the_run_in_every_layer(starter_model_path: Path, kv: str) -> None:
    """The starter model (Gemma 3, 18 layers) with a q8_0 K: in every layer Q's RoPE is followed
    by a SCALE, its reshape and the product with attn_inp_k_rot; with f16/f16 the same SCALEs and
    no product, so with I a Gemma layer's Q takes one kernel in every mode."""
    assert _q_runs(decode_graph(starter_model_path, kv)) == ["ROPE"] * 18
    nodes = decode_graph(starter_model_path, "f16/f16")
    assert not _q_runs(nodes)
    assert [nodes[n["src"][0]]["op"] for n in nodes if n["op"] == "SCALE"][1:] == ["ROPE"] * 18


@pytest.mark.slow
def test_llamas_decode_graph_has_no_such_run(tiny_llama: Path) -> None:
    """A Llama scales Q inside the attention op: I never fires there (F takes its Q)."""
    assert not _q_runs(decode_graph(tiny_llama, "q8_0/q8_0"))


def _structure(nodes: list[dict]) -> list[tuple[str, list[object]]]:
    """Each node's op and sources, "weight" for any weight (their names are the model's)."""
    return [
        (n["op"], [s if isinstance(s, int) or ".weight" not in s else "weight" for s in n["src"]])
        for n in nodes
    ]


@pytest.mark.slow
def test_the_random_gemma_for_the_gpu_decodes_the_starters_graph(
    starter_model_path: Path, tmp_path: Path
) -> None:
    """scripts/make_random_gemma3_gguf.py (what run 34's STEP_MODEL=gemma3 steps decode, the starter
    being too large to carry): its decode step with K=V=q8_0 runs the starter's 943 nodes in the
    starter's order, the run I fuses in all 18 layers."""
    model = tmp_path / "gemma3.gguf"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_random_gemma3_gguf.py"), str(model)],
        cwd=ROOT, check=True, capture_output=True, timeout=120, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    random_nodes = decode_graph(model, "q8_0/q8_0")
    starter_nodes = decode_graph(starter_model_path, "q8_0/q8_0")
    assert len(starter_nodes) == 943
    assert _structure(random_nodes) == _structure(starter_nodes)
    assert _q_runs(random_nodes) == ["ROPE"] * 18


def test_the_random_gemma_script_refuses_a_missing_folder_in_one_sentence(tmp_path: Path) -> None:
    out = tmp_path / "none" / "gemma3.gguf"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_random_gemma3_gguf.py"), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT)},
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == f"make_random_gemma3_gguf: no folder {out.parent} to write into.\n"
    assert not out.parent.exists()
