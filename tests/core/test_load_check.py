"""The check before every load: llama.cpp's context limit, the trained context, and whether
the load fits the free memory (the same need and verdict as the Models page)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.kv.fit import NO_FIT, fit_context_length, fit_estimate, memory_need
from app.kv.kv_types import KvMode
from app.load.load_check import (
    MAX_N_CTX,
    check_context_size,
    check_load_fits,
    check_model_load,
    free_memory_for,
    gpu_build,
)
from app.load.profile import LoadProfile
from app.models.gguf_read import read_gguf_header
from app.platform import units
from app.platform.errors import BadInputError, ContextTooLargeError, NotEnoughMemoryError
from app.platform.probes import FREE_MEMORY_ENV, FreeMemory, read_free_memory

GIB = 1024**3
MIB = 1024**2


def options(model: Path, n_ctx: int, kv: str = "q8_0/f16", n_gpu_layers: int = -1) -> LoadProfile:
    k, v = kv.split("/")
    return LoadProfile(
        model_path=str(model), n_ctx=n_ctx, kv=KvMode.of(k, v), n_gpu_layers=n_gpu_layers
    )


def ram(n_bytes: int) -> FreeMemory:
    return FreeMemory(n_bytes, "system RAM", "psutil", on_gpu=False)


def test_context_size_bounds():
    check_context_size(1)
    check_context_size(MAX_N_CTX)  # 4,294,967,040: the largest uint32 llama.cpp's padding keeps
    assert MAX_N_CTX % 256 == 0 and MAX_N_CTX + 256 == 2**32
    with pytest.raises(BadInputError, match="--ctx must be a positive number of tokens, not 0"):
        check_context_size(0, "--ctx")
    with pytest.raises(ContextTooLargeError) as caught:
        check_context_size(99_999_999_999, "--ctx")
    assert not caught.value.forceable
    assert str(caught.value) == (
        "--ctx 99,999,999,999 is more tokens than llama.cpp can hold (4,294,967,040 at most)."
    )


def test_beyond_the_trained_context_is_refused_unless_forced(gqa_llama):
    header = read_gguf_header(gqa_llama)
    check_load_fits(header, options(gqa_llama, 131072), ram(1024 * GIB))
    with pytest.raises(ContextTooLargeError) as caught:
        check_load_fits(header, options(gqa_llama, 131073), ram(1024 * GIB))
    assert caught.value.forceable and not isinstance(caught.value, MemoryError)
    assert "131,073 tokens is beyond this model's trained context of 131,072" in str(caught.value)
    assert str(caught.value).endswith("pass --force to load anyway.")
    check_load_fits(header, options(gqa_llama, 131073), ram(1), force=True)
    with pytest.raises(ContextTooLargeError):  # llama.cpp's own limit holds even when forced
        check_load_fits(header, options(gqa_llama, MAX_N_CTX + 1), ram(1), force=True)


def test_refusal_names_the_kv_bytes_and_the_free_memory(gqa_llama):
    header = read_gguf_header(gqa_llama)
    size = gqa_llama.stat().st_size
    need = memory_need(header, 100_000, "q8_0/f16", file_size=size, on_gpu=False)
    free = need.total_bytes // 2
    with pytest.raises(NotEnoughMemoryError) as caught:
        check_load_fits(header, options(gqa_llama, 100_000), ram(free), file_size=size)
    error = caught.value
    assert isinstance(error, MemoryError) and isinstance(error, BadInputError) and error.forceable
    assert (error.n_ctx, error.need_bytes, error.kv_bytes, error.free_bytes) == (
        100_000,
        need.total_bytes,
        need.kv_bytes,
        free,
    )
    largest = fit_context_length(
        header, free, "q8_0/f16", max_ctx=100_000, file_size=size, on_gpu=False
    )
    assert error.largest_n_ctx == largest and 0 < largest < 100_000
    assert str(error) == (
        f"The model needs {units.size(need.kv_bytes, 1)} for the KV cache at 100,000 tokens "
        f"({units.size(need.total_bytes, 1)} with weights and buffers), but system RAM has "
        f"{units.size(free, 1)} free "
        f"({largest:,} tokens would fit); lower --ctx, or pass --force to load anyway."
    )
    check_load_fits(header, options(gqa_llama, 100_000), ram(need.total_bytes), file_size=size)
    check_load_fits(header, options(gqa_llama, 100_000), ram(1), file_size=size, force=True)


def test_need_and_free_never_print_as_the_same_figure(gqa_llama):
    header = read_gguf_header(gqa_llama)
    need = memory_need(header, 100_000, "q8_0/f16", on_gpu=False).total_bytes
    # Free memory a few KiB short of the need: the same figure with one decimal, not with two.
    free = next(
        need - delta
        for delta in range(1024, 100 * 1024, 1024)
        if units.size(need, 1) == units.size(need - delta, 1)
        and units.size(need, 2) != units.size(need - delta, 2)
    )
    with pytest.raises(NotEnoughMemoryError) as caught:
        check_load_fits(header, options(gqa_llama, 100_000), ram(free))
    shown_need, shown_free = units.size(need, 2), units.size(free, 2)
    assert f"({shown_need} with weights and buffers), but system RAM has {shown_free} free" in str(
        caught.value
    )


def test_refuses_exactly_where_the_models_page_says_does_not_fit(gqa_llama):
    header = read_gguf_header(gqa_llama)
    size = gqa_llama.stat().st_size
    mode = KvMode.parse("f16/f16")
    for budget in (40 * MIB, 60 * MIB, 90 * MIB, 200 * MIB, 2 * GIB):
        for n_ctx in (4096, 32768, 131072):
            (fit,) = fit_estimate(header, size, n_ctx, budget, (mode,), on_gpu=False)
            try:
                check_load_fits(
                    header, options(gqa_llama, n_ctx, "f16/f16"), ram(budget), file_size=size
                )
                refused = False
            except NotEnoughMemoryError:
                refused = True
            assert refused == (fit.verdict == NO_FIT), (budget, n_ctx, fit.verdict)


def test_a_quantized_v_cache_costs_less_and_fits_where_f16_does_not(gqa_llama):
    header = read_gguf_header(gqa_llama)
    f16 = memory_need(header, 131072, "f16/f16", on_gpu=False).total_bytes
    q8 = memory_need(header, 131072, "q8_0/q8_0", on_gpu=False).total_bytes
    check_load_fits(header, options(gqa_llama, 131072, "q8_0/q8_0"), ram(q8))
    with pytest.raises(NotEnoughMemoryError):
        check_load_fits(header, options(gqa_llama, 131072, "f16/f16"), ram(q8))
    assert q8 < f16


def test_the_free_memory_cap_from_the_environment(gqa_llama, monkeypatch):
    monkeypatch.setenv(FREE_MEMORY_ENV, "3MiB")
    free = read_free_memory(gpu=False)
    assert (free.bytes, free.source, free.device) == (3 * MIB, FREE_MEMORY_ENV, "system RAM")
    with pytest.raises(NotEnoughMemoryError, match="system RAM has 3.0 MiB free"):
        check_model_load(gqa_llama, options(gqa_llama, 4096, n_gpu_layers=0))
    check_model_load(gqa_llama, options(gqa_llama, 4096, n_gpu_layers=0), force=True)
    monkeypatch.setenv(FREE_MEMORY_ENV, "lots")
    with pytest.raises(BadInputError, match=f"{FREE_MEMORY_ENV}: 'lots' is not a memory size"):
        read_free_memory()


def test_a_model_on_the_cpu_is_checked_against_available_ram(monkeypatch):
    import psutil

    monkeypatch.delenv(FREE_MEMORY_ENV, raising=False)
    free = free_memory_for(n_gpu_layers=0, n_layers=4)
    assert free.device == "system RAM" and not free.on_gpu
    assert abs(free.bytes - psutil.virtual_memory().available) < 512 * MIB  # read just now


def test_gpu_build_agrees_with_llama_cpp():
    """llama.cpp's own answer, less RPC: llama_supports_gpu_offload() says yes for any build
    with RPC compiled in (the built-in one now has it), which offloads nothing by itself."""
    from app.engine import devices

    assert gpu_build() == devices.supports_gpu_offload()
