"""The one list of K/V modes (app/kv/kv_types.py): both spellings a user or llama.cpp writes
name the same mode, each named mode says what it is for, and the types' sizes are ggml's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.backends.manifest import handles_pair
from app.engine.build_info import parse_system_info
from app.kv.kv_types import COMPARE_MODES, DEFAULT_KV_MODE, FP16_KV_MODE, KV_MODES, KvMode
from app.platform.errors import UnknownKvTypeError


@pytest.mark.parametrize("text", ["q8_0/f16", "q8_0-f16", "Q8_0/F16", " q8_0 / f16 "])
def test_the_label_and_the_pair_spelling_parse_to_one_mode(text: str) -> None:
    mode = KvMode.parse(text)
    assert mode == DEFAULT_KV_MODE
    assert (mode.label, mode.pair, mode.words) == ("q8_0/f16", "q8_0-f16", "K q8_0 / V f16")


def test_every_named_mode_has_a_role_and_the_comparison_starts_at_f16() -> None:
    assert all(mode.role for mode in KV_MODES)
    assert len(set(KV_MODES)) == len(KV_MODES)
    assert COMPARE_MODES[0] == FP16_KV_MODE and set(COMPARE_MODES) <= set(KV_MODES)
    assert KvMode.parse("q5_1/q4_0").role == ""  # a mode the app does not name


@pytest.mark.parametrize("text", ["q9_0/f16", "q8_0/f16/f16", "/f16", ""])
def test_a_mode_that_is_not_one_is_refused_in_one_sentence(text: str) -> None:
    with pytest.raises(UnknownKvTypeError) as refused:
        KvMode.parse(text)
    assert "\n" not in str(refused.value)


def test_the_pair_is_what_builds_and_manifests_list() -> None:
    """llama.cpp's FA_QUANTS list and a package manifest name pairs as KvMode.pair spells them."""
    info = parse_system_info("CUDA : ARCHS = 900 | FA_QUANTS = q8_0-f16,f16-f16 |")
    assert info.has_fa_pair(DEFAULT_KV_MODE) is True
    assert info.has_fa_pair(KvMode.parse("q8_0/q8_0")) is False
    assert handles_pair(("q8_0-f16",), DEFAULT_KV_MODE)
    assert not handles_pair(("q8_0-f16",), FP16_KV_MODE)


def test_block_sizes_are_ggmls_and_looked_up_only_when_asked() -> None:
    """q8_0 is 34 bytes per 32 values because ggml says so; importing the list of modes does
    not import the gguf package (numpy), which the CLI's start and the engine's must not."""
    assert (DEFAULT_KV_MODE.k.block_values, DEFAULT_KV_MODE.k.block_bytes) == (32, 34)
    assert DEFAULT_KV_MODE.k.row_bytes(64) == 68
    code = "import sys, app.kv.kv_types; print('numpy' in sys.modules, 'gguf' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]
