"""log_parse on real llama.cpp log lines (formats of llama.cpp in llama-cpp-python 0.3.36)."""

from __future__ import annotations

from app.engine.log_parse import (
    classify_warning,
    mib_to_bytes,
    parse_compute_buffer_line,
    parse_iswa_line,
    parse_kv_cache_line,
    parse_log,
)

# Seen with the starter model (docs/llama-cpp-notes.md).
KV_LINE = (
    "llama_kv_cache: size =   91.88 MiB (  8192 cells,  15 layers,  1/1 seqs), "
    "K (q8_0):   31.88 MiB, V (f16):   60.00 MiB"
)

# A Gemma 3 load (iswa: the global cache first, then the sliding-window one), verbatim.
GEMMA3_LOG = """\
llama_context: flash_attn            = enabled
llama_context:        CPU  output buffer size =     1.00 MiB
llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells
llama_kv_cache:        CPU KV buffer size =     4.59 MiB
llama_kv_cache: size =    4.59 MiB (  2048 cells,   3 layers,  1/1 seqs), K (q8_0):    1.59 MiB, V (f16):    3.00 MiB
llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
llama_kv_cache:        CPU KV buffer size =    11.48 MiB
llama_kv_cache: size =   11.48 MiB (  1024 cells,  15 layers,  1/1 seqs), K (q8_0):    3.98 MiB, V (f16):    7.50 MiB
sched_reserve:        CPU compute buffer size =   515.75 MiB
sched_reserve: graph: nodes = 835, splits = 1, input objects = 4, input tensors = 11
llama_context: graph nodes  = 763
""".splitlines()  # noqa: E501  (llama.cpp's own lines, kept whole)


def test_kv_cache_line_keeps_printed_mib_and_bytes():
    info = parse_kv_cache_line(KV_LINE)
    assert info is not None
    assert (info.cells, info.layers, info.seqs) == (8192, 15, 1)
    assert (info.k_type, info.v_type) == ("q8_0", "f16")
    assert (info.total_mib, info.k_mib, info.v_mib) == (91.88, 31.88, 60.00)
    assert info.v_bytes == 60 * 1024 * 1024
    assert info.k_bytes == round(31.88 * 1048576)
    assert info.total_bytes == round(91.88 * 1048576)
    assert info.line == KV_LINE
    assert info.swa is False


def test_other_lines_are_not_kv_caches():
    assert parse_kv_cache_line("llama_kv_cache:        CPU KV buffer size =    11.48 MiB") is None
    assert parse_kv_cache_line("llama_context: n_ctx = 2048") is None


def test_gemma3_two_caches_marks_the_sliding_window_one():
    parsed = parse_log(GEMMA3_LOG)
    assert [(c.layers, c.cells, c.swa) for c in parsed.kv_caches] == [
        (3, 2048, False),
        (15, 1024, True),
    ]
    assert parsed.kv_caches[1].devices == ("CPU",)
    assert parsed.compute_buffers[0].device == "CPU"
    assert parsed.compute_buffers[0].mib == 515.75
    assert parsed.warnings == []


def test_model_without_sliding_window_has_one_global_cache():
    parsed = parse_log(["llama_kv_cache:      CUDA0 KV buffer size =  8192.00 MiB", KV_LINE])
    assert len(parsed.kv_caches) == 1
    assert parsed.kv_caches[0].swa is False
    assert parsed.kv_caches[0].devices == ("CUDA0",)


def test_compute_buffer_lines_per_device():
    info = parse_compute_buffer_line("llama_context:      CUDA0 compute buffer size =   416.00 MiB")
    assert info is not None and info.device == "CUDA0" and info.bytes == 416 * 1048576
    host = parse_compute_buffer_line("llama_context:  CUDA_Host compute buffer size =    24.01 MiB")
    assert host is not None and host.device == "CUDA_Host"
    assert (
        parse_compute_buffer_line("llama_context:        CPU  output buffer size =     1.00 MiB")
        is None
    )
    assert parse_compute_buffer_line("ggml_gallocr: compute buffer size = 1 MiB") is None


def test_iswa_lines():
    assert (
        parse_iswa_line("llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells") is True
    )
    assert (
        parse_iswa_line("llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells")
        is False
    )
    assert parse_iswa_line(KV_LINE) is None


def test_warnings_that_mean_the_int8_k_kernel_is_not_running():
    converted = classify_warning(
        "ggml_cuda_flash_attn_ext_vec: no FlashAttention vector kernel compiled for K/V types "
        'f16-q8_0, converting K and V to f16 instead (slow). Add "f16-q8_0" to '
        "GGML_CUDA_FA_QUANTS to compile it."
    )
    assert converted is not None and converted.kind == "pair_not_compiled"
    older = classify_warning("ggml_cuda_flash_attn_ext: converting K and V to f16 instead (slow)")
    assert older is not None and older.kind == "converted_to_f16"
    on_cpu = classify_warning(
        "resolve_fused_ops: layer 0 is assigned to device CUDA0 but Flash Attention is "
        "assigned to device CPU (usually due to missing support)"
    )
    assert on_cpu is not None and on_cpu.kind == "attention_on_cpu"
    for line in (
        "resolve_fused_ops: Flash Attention not supported, set to disabled",
        "llama_init_from_model: flash_attn is not compatible with Grok - forcing off",
        "llama_context: flash_attn            = disabled",
    ):
        warning = classify_warning(line)
        assert warning is not None and warning.kind == "fa_disabled", line
    for line in ("llama_context: flash_attn            = enabled", KV_LINE, ""):
        assert classify_warning(line) is None


def test_other_fused_ops_on_another_device_are_not_attention_warnings():
    # llama_context::resolve_fused_ops logs the same sentences for every fused op it probes.
    for line in (
        (
            "resolve_fused_ops: layer 3 is assigned to device CUDA0 but fused Gated Delta Net "
            "(autoregressive) is assigned to device CPU (usually due to missing support)"
        ),
        "resolve_fused_ops: fused Gated Delta Net (autoregressive) not supported, set to disabled",
        "resolve_fused_ops: Lightning Indexer not supported, set to disabled",
    ):
        assert classify_warning(line) is None, line


def test_layers_on_cpu_warn_only_when_a_gpu_was_asked_for():
    lines = [f"load_tensors: layer {i:3d} assigned to device CPU, is_swa = 1" for i in range(3)]
    assert parse_log(lines).warnings == []
    warnings = parse_log(lines, expect_gpu=True).warnings
    assert [w.kind for w in warnings] == ["attention_on_cpu"]
    assert "3 layer" in warnings[0].text


def test_repeated_warning_is_reported_once():
    line = "resolve_fused_ops: Flash Attention not supported, set to disabled"
    assert len(parse_log([line, line]).warnings) == 1


def test_mib_to_bytes_rounds():
    assert mib_to_bytes(0.5) == 524288
    assert mib_to_bytes(31.88) == 33428603
