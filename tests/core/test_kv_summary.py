"""The dashboard's sentence about a loaded model's KV cache, in each case a load can be in."""

from __future__ import annotations

from app.kv.kv_summary import KvSummary, kv_sentence
from app.kv.kv_types import KvMode

MIB = 1024 * 1024


def test_a_saving_is_said_with_the_tokens_it_would_hold() -> None:
    summary = KvSummary(4096, KvMode.parse("q8_0/f16"), int(25.5 * MIB), 48 * MIB, 6 * 1024)
    # 22.5 MiB / 6 KiB per token = 3,840 tokens, in llama.cpp's 256-token steps
    assert summary.more_tokens == 3840
    assert kv_sentence(summary) == (
        "KV cache at 4,096 tokens: 48.0 MiB in f16, 25.5 MiB with int8-K (q8_0/f16): "
        "22.5 MiB saved, room for 3,840 more tokens in the same memory."
    )


def test_room_is_rounded_down_to_what_llama_cpp_can_allocate() -> None:
    # 262 tokens' worth
    summary = KvSummary(4096, KvMode.parse("q8_0/f16"), 40 * MIB, 41 * MIB, 4000)
    assert summary.more_tokens == 256


def test_an_fp16_cache_says_how_to_save() -> None:
    summary = KvSummary(2048, KvMode.parse("f16/f16"), 22 * MIB, 22 * MIB, 11 * 1024)
    assert kv_sentence(summary) == (
        "KV cache at 2,048 tokens: 22.0 MiB in f16/f16, no saving: load the model with the K "
        "cache as q8_0 (int8-K) to make it smaller."
    )


def test_without_the_kv_arithmetic_only_llama_cpps_figure_is_said() -> None:
    summary = KvSummary(2048, KvMode.parse("q8_0/f16"), 12 * MIB, None, None)
    assert summary.more_tokens == 0
    assert (
        kv_sentence(summary)
        == "KV cache at 2,048 tokens: 12.0 MiB with q8_0/f16 (llama.cpp's log)."
    )
