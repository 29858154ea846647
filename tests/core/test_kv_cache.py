"""The KV arithmetic against llama.cpp's own allocation, line for line.

Each case creates a real llama.cpp context (CPU, n_gpu_layers=0) through the C API of
llama-cpp-python, reads its `llama_kv_cache: size = ...` lines from the log, and requires
the line `CacheSize.log_line()` writes to be the same string: total, K and V MiB as the
C float llama.cpp prints, cells, layers and seqs. The model is loaded once per file;
only contexts are created per case, so the ~190 cases take seconds.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from app.engine.llama_log import install as install_llama_log
from app.engine.log_parse import parse_log
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import KV_TYPES, KvMode
from app.models.gguf_read import read_gguf_header
from app.platform.errors import BadInputError
from tests.gguf_factory import write_tiny_gguf

llama_cpp = pytest.importorskip("llama_cpp")

from tests.core.llama_lab import LlamaContextLab  # noqa: E402  (imports llama_cpp: after the skip)

TYPES = ("f16", "q8_0", "q4_0")
ALL_PAIRS = [KvMode(KV_TYPES[k], KV_TYPES[v]) for k, v in itertools.product(TYPES, TYPES)]

TINY_MODELS = {
    "llama_gqa_h64": {"arch": "llama", "n_layer": 2, "n_head": 4, "n_head_kv": 2, "head_dim": 64},
    "llama_mqa_h128": {"arch": "llama", "n_layer": 3, "n_head": 4, "n_head_kv": 1, "head_dim": 128},
    "llama_mha_h256": {"arch": "llama", "n_layer": 2, "n_head": 2, "n_head_kv": 2, "head_dim": 256},
    "gemma3_swa_h256": {
        "arch": "gemma3",
        "n_layer": 8,
        "n_head": 4,
        "n_head_kv": 1,
        "head_dim": 256,
        "sliding_window": 128,
    },
    "gemma3_swa_h128": {
        "arch": "gemma3",
        "n_layer": 7,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 128,
        "sliding_window": 1024,
    },
    "gemma3_swa_pattern": {
        "arch": "gemma3",
        "n_layer": 5,
        "n_head": 2,
        "n_head_kv": 1,
        "head_dim": 64,
        "sliding_window": 300,
        "sliding_window_pattern": [True, False, True, True, False],
    },
}


@pytest.fixture(scope="module")
def lab():
    lab = LlamaContextLab()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tiny_models")
    return {
        name: write_tiny_gguf(folder / f"{name}.gguf", **spec) for name, spec in TINY_MODELS.items()
    }


def assert_same_as_llama(
    lab: LlamaContextLab, path: Path, n_ctx: int, mode: KvMode, **options
) -> None:
    estimate = kv_cache_bytes(read_gguf_header(path), n_ctx, mode, **options)
    logged = lab.kv_lines(path, n_ctx, mode, **options)
    assert [c.line for c in logged] == [c.log_line() for c in estimate.caches]
    for ours, theirs in zip(estimate.caches, logged, strict=True):
        assert (ours.cells, ours.layers, ours.swa) == (theirs.cells, theirs.layers, theirs.swa)
    assert estimate.exact


@pytest.mark.parametrize("mode", ALL_PAIRS, ids=lambda m: m.label)
@pytest.mark.parametrize("n_ctx", [1000, 3001])
@pytest.mark.parametrize("model", list(TINY_MODELS))
def test_tiny_models_match_llama_cpp(lab, tiny_models, model, n_ctx, mode):
    assert_same_as_llama(lab, tiny_models[model], n_ctx, mode)


@pytest.mark.parametrize(
    "options",
    [
        {"n_ubatch": 128},
        {"n_ubatch": 64, "n_batch": 128},
        {"swa_full": True},
        {"n_seq": 2},
        {"n_seq": 3, "kv_unified": True},
        {"n_seq": 2, "n_ubatch": 256},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
@pytest.mark.parametrize("model", ["gemma3_swa_h256", "llama_gqa_h64"])
def test_load_options_match_llama_cpp(lab, tiny_models, model, options):
    assert_same_as_llama(lab, tiny_models[model], 3001, KvMode.parse("q8_0/f16"), **options)


@pytest.mark.parametrize("n_ctx", [300, 200])
def test_context_below_one_ubatch(lab, tiny_models, n_ctx):
    # n_batch and n_ubatch are clamped to n_ctx before the SWA cache is sized.
    assert_same_as_llama(lab, tiny_models["gemma3_swa_h256"], n_ctx, KvMode.parse("q8_0/q8_0"))


@pytest.mark.parametrize("mode", ["f16/f16", "q8_0/f16", "q4_0/f16"])
def test_without_flash_attention(lab, tiny_models, mode):
    # V is stored transposed then; (per-layer V widths, padded to the widest, need an
    # architecture with per-layer KV heads, which the tiny factory does not write).
    assert_same_as_llama(
        lab, tiny_models["llama_gqa_h64"], 1000, KvMode.parse(mode), flash_attn=False
    )
    assert_same_as_llama(
        lab, tiny_models["gemma3_swa_h128"], 1000, KvMode.parse(mode), flash_attn=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ALL_PAIRS, ids=lambda m: m.label)
def test_starter_model_matches_llama_cpp(lab, starter_model_path, mode):
    assert_same_as_llama(lab, starter_model_path, 1000, mode)


@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [{"swa_full": True}, {"swa_full": False}], ids=["swa_full", "swa_small"]
)
def test_starter_model_8192_matches_llama_cpp(lab, starter_model_path, options):
    assert_same_as_llama(lab, starter_model_path, 8192, KvMode.parse("q8_0/f16"), **options)


def test_starter_model_numbers_from_facts(starter_model_path):
    # docs/llama-cpp-notes.md: at n_ctx 8192 (full-size SWA cache) f16/f16 144 MiB,
    # q8_0/f16 110.25, q8_0/q8_0 76.5.
    header = read_gguf_header(starter_model_path)
    mib = {
        mode: kv_cache_bytes(header, 8192, mode, swa_full=True).total_bytes / 2**20
        for mode in ("f16/f16", "q8_0/f16", "q8_0/q8_0")
    }
    assert mib == {"f16/f16": 144.0, "q8_0/f16": 110.25, "q8_0/q8_0": 76.5}


def test_q8_0_k_is_34_64ths_of_f16(tiny_models):
    header = read_gguf_header(tiny_models["gemma3_swa_h256"])
    f16 = kv_cache_bytes(header, 4096, "f16/f16")
    q8 = kv_cache_bytes(header, 4096, "q8_0/f16")
    assert q8.k_bytes * 64 == f16.k_bytes * 34
    assert q8.v_bytes == f16.v_bytes
    assert q8.fp16_equivalent().total_bytes == f16.total_bytes


def test_bytes_in_use_grow_with_tokens_and_stop_at_allocation(tiny_models):
    header = read_gguf_header(tiny_models["gemma3_swa_h256"])
    estimate = kv_cache_bytes(header, 4096, "q8_0/f16")
    empty, some, full = (estimate.bytes_in_use(n) for n in (0, 100, 10_000))
    assert empty.bytes == 0 and empty.fp16_bytes == 0
    assert 0 < some.bytes < some.fp16_bytes
    assert full.bytes <= full.allocated_bytes == estimate.total_bytes
    # The sliding-window layers stop growing past the window; the global layer keeps going.
    assert estimate.bytes_in_use(3000).bytes - estimate.bytes_in_use(2000).bytes == (
        1000 * estimate.cache(swa=False).k_bytes_per_cell
        + 1000 * estimate.cache(swa=False).v_bytes_per_cell
    )


def test_bad_inputs_are_bad_input_errors(tiny_models):
    header = read_gguf_header(tiny_models["llama_gqa_h64"])
    with pytest.raises(BadInputError, match="positive"):
        kv_cache_bytes(header, -5, "f16/f16")
    with pytest.raises(BadInputError, match="Unknown KV cache type"):
        kv_cache_bytes(header, 1000, "q9_0/f16")
    with pytest.raises(BadInputError, match="Flash Attention"):
        kv_cache_bytes(header, 1000, "f16/q8_0", flash_attn=False)


def test_zero_context_means_trained_context(tiny_models):
    header = read_gguf_header(tiny_models["llama_gqa_h64"])
    assert kv_cache_bytes(header, 0, "f16/f16").n_ctx == header.context_length


@pytest.mark.slow
def test_llama_cpp_python_default_is_full_size_swa_cache(starter_model_path):
    # llama-cpp-python leaves swa_full at llama.cpp's default (true) unless it is passed:
    # the engine must pass the value it wants, and the estimate must be asked the same.
    router = install_llama_log()
    router.flush()
    router.take_lines()
    llm = llama_cpp.Llama(
        str(starter_model_path),
        n_ctx=2048,
        n_gpu_layers=0,
        flash_attn=True,
        type_k=KV_TYPES["q8_0"].ggml_id,
        verbose=True,
    )
    llm.close()
    router.flush()
    logged = parse_log(router.take_lines()).kv_caches
    estimate = kv_cache_bytes(read_gguf_header(starter_model_path), 2048, "q8_0/f16", swa_full=True)
    assert [c.line for c in logged] == [c.log_line() for c in estimate.caches]


# ---- layouts of architectures the tiny factory cannot load (metadata-only GGUFs) ---------


def _metadata_only(path: Path, arch: str, n_layer: int, **keys: object) -> Path:
    import gguf

    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(n_layer)
    writer.add_context_length(8192)
    writer.add_embedding_length(512)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    writer.add_key_length(64)
    writer.add_value_length(64)
    for key, value in keys.items():
        writer.add_uint32(f"{arch}.{key}", int(value))  # type: ignore[call-overload]
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    "arch, keys, swa_layers, window, exact",
    [
        # models/gemma2.cpp: every 2nd layer global, window 4096 unless the GGUF says otherwise.
        ("gemma2", {}, [0, 2, 4], 4096, True),
        ("gemma2", {"attention.sliding_window": 1024}, [0, 2, 4], 1024, True),
        # models/cohere2moe.cpp: dense_first pattern 4 -> layers 0 and 4 global.
        ("cohere2moe", {}, [1, 2, 3, 5], 0, True),
        # gemma3 without a window key: no SWA at all.
        ("gemma3", {}, [], 0, True),
        # An architecture whose SWA layout is not mirrored: counted in full, flagged inexact.
        ("mystery", {"attention.sliding_window": 512}, [], 0, False),
        # A recurrent-hybrid architecture: flagged inexact.
        ("jamba", {}, [], 0, False),
    ],
)
def test_swa_layouts_of_other_architectures(tmp_path, arch, keys, swa_layers, window, exact):
    from app.kv.kv_layout import kv_layout

    header = read_gguf_header(_metadata_only(tmp_path / "m.gguf", arch, 6, **keys))
    layout = kv_layout(header)
    assert [layer.index for layer in layout.layers if layer.swa] == swa_layers
    assert layout.exact == exact
    if window:
        assert layout.n_swa == window and layout.has_swa
    assert not layout.exact or not layout.note


def test_nextn_layers_are_not_in_the_main_cache(tmp_path):
    from app.kv.kv_layout import kv_layout

    header = read_gguf_header(
        _metadata_only(tmp_path / "m.gguf", "glm4moe", 5, nextn_predict_layers=1)
    )
    assert [layer.index for layer in kv_layout(header).layers] == [0, 1, 2, 3]
