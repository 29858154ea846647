"""The llama.cpp switches a comparison records: only the known ones, as set, cleaned when read
back from a saved file, and named in the run's title."""

from __future__ import annotations

from app.engine.compare_result import run_title
from app.engine.llama_switches import switches_set, switches_text


def test_only_known_switches_are_recorded_as_set() -> None:
    environ = {"LLAMA_ATTN_ROT_DISABLE": "0", "HOME": "/root", "KVSTUDIO_FA_VEC_LONG_KV_FROM": "1"}
    switches = switches_set(environ)
    # "0" is recorded too: it was set, and the value says to what.
    assert switches == (("LLAMA_ATTN_ROT_DISABLE", "0"), ("KVSTUDIO_FA_VEC_LONG_KV_FROM", "1"))
    assert switches_text(switches) == (
        "LLAMA_ATTN_ROT_DISABLE=0 (llama.cpp's rotation of a quantized K/V cache); "
        "KVSTUDIO_FA_VEC_LONG_KV_FROM=1 (where the long-KV decode kernel starts (patch 0007))"
    )
    assert switches_set({}) == () and switches_text(()) == ""


def test_a_saved_file_is_cleaned() -> None:
    hostile = {"LLAMA_ATTN_ROT_DISABLE": "1\x1b[31m" + "x" * 500, "EVIL": "1"}
    (name, value), *rest = switches_set(hostile)
    assert name == "LLAMA_ATTN_ROT_DISABLE" and not rest
    assert "\x1b" not in value and len(value) <= 20
    assert switches_set(["LLAMA_ATTN_ROT_DISABLE"]) == ()
    assert switches_set(None) == ()


def test_the_title_names_the_switches() -> None:
    data = {"model": "m.gguf", "n_ctx": 4096, "depth": 0, "device": "system RAM"}
    assert run_title(data) == "m.gguf - n_ctx 4,096, depth 0 - system RAM"
    with_switch = {**data, "llama_switches": {"LLAMA_ATTN_ROT_DISABLE": "1", "EVIL": "x"}}
    assert run_title(with_switch).endswith(" - system RAM - with LLAMA_ATTN_ROT_DISABLE=1")
