"""Load settings remembered per model file, and the live fit estimate of a choice."""

from __future__ import annotations

import json

import pytest

from app.kv.fit import NO_FIT, estimate_fit
from app.kv.kv_types import KvMode
from app.load.load_check import check_load_fits
from app.load.load_choices import (
    FILE_NAME,
    MAX_MODELS,
    LoadFacts,
    choice_for,
    live_fit,
    read_choices,
    remember_choice,
)
from app.load.profile import LoadProfile
from app.models.gguf_read import read_gguf_header
from app.platform.errors import ContextTooLargeError
from app.platform.probes import FreeMemory
from app.state.settings import DEFAULT_CONTEXT, Settings

GIB = 1024**3
F16 = KvMode.parse("f16/f16")


def test_a_choice_is_remembered_for_its_file_and_others_use_the_defaults(
    tmp_path, starter_model_path
) -> None:
    chosen = LoadProfile(str(starter_model_path), n_ctx=3072, kv=F16, n_gpu_layers=0, n_threads=2)
    remember_choice(tmp_path, chosen)
    assert choice_for(tmp_path, Settings(), starter_model_path) == chosen
    from tests.gguf_factory import write_tiny_gguf

    other = write_tiny_gguf(tmp_path / "other.gguf", n_ctx_train=32768)
    assert choice_for(tmp_path, Settings(), other) == LoadProfile(
        str(other), n_ctx=DEFAULT_CONTEXT, kv=KvMode.parse("q8_0/f16"), n_gpu_layers=-1
    )


def test_workers_and_their_layer_split_are_remembered(tmp_path, starter_model_path) -> None:
    chosen = LoadProfile(
        str(starter_model_path),
        n_ctx=2048,
        rpc_workers=("127.0.0.1:50052",),
        layer_split=(1.0, 3.0),
    )
    remember_choice(tmp_path, chosen)
    assert choice_for(tmp_path, Settings(), starter_model_path) == chosen


def test_the_default_context_is_cut_to_what_the_model_was_trained_for(tmp_path) -> None:
    from tests.gguf_factory import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    trained = read_gguf_header(path).context_length
    assert trained is not None and trained < DEFAULT_CONTEXT
    assert choice_for(tmp_path, Settings(), path).n_ctx == trained


def test_an_entry_of_the_wrong_shape_is_dropped_alone(tmp_path) -> None:
    good = {"n_ctx": 2048, "type_k": "q8_0", "type_v": "f16", "n_gpu_layers": -1, "n_threads": None}
    (tmp_path / FILE_NAME).write_text(
        json.dumps(
            {
                "version": 1,
                "models": {
                    "/m/good.gguf": good,
                    "/m/text.gguf": {**good, "n_ctx": "2048"},
                    "/m/type.gguf": {**good, "type_k": "q3_0"},
                    "/m/bool.gguf": {**good, "n_gpu_layers": True},
                    "/m/split-text.gguf": {**good, "layer_split": ["1", "3"]},
                    "/m/split-zero.gguf": {**good, "layer_split": [0, 0]},
                    "/m/split-below.gguf": {**good, "layer_split": [-1, 2]},
                },
            }
        )
    )
    assert list(read_choices(tmp_path)) == ["/m/good.gguf"]


def test_a_damaged_file_is_set_aside_and_counts_as_empty(tmp_path) -> None:
    (tmp_path / FILE_NAME).write_text('{"version": 1, "models": {')
    assert read_choices(tmp_path) == {}
    assert not (tmp_path / FILE_NAME).exists()
    assert len(list(tmp_path.glob(f"{FILE_NAME}.bak-*"))) == 1


@pytest.mark.slow
def test_only_the_most_recent_choices_are_kept(tmp_path) -> None:
    for n in range(MAX_MODELS + 3):
        remember_choice(tmp_path, LoadProfile(f"/m/{n}.gguf", n_ctx=2048))
    remember_choice(tmp_path, LoadProfile("/m/5.gguf", n_ctx=2048))  # chosen again: the newest
    kept = list(read_choices(tmp_path))
    assert len(kept) == MAX_MODELS and kept[-1] == "/m/5.gguf" and "/m/0.gguf" not in kept


def _facts(path, budget: int) -> LoadFacts:
    header = read_gguf_header(path)
    free = FreeMemory(budget, "system RAM", "test", False)
    size = path.stat().st_size
    return LoadFacts(str(path), header, size, False, {0: free, 1: free, -1: free})


@pytest.mark.parametrize("n_ctx", [2048, 8192, 32768])
def test_the_live_fit_is_the_models_pages_estimate_and_load_checks_refusal(
    starter_model_path, n_ctx
) -> None:
    facts = _facts(starter_model_path, 600 * 1024**2)
    choice = LoadProfile(str(starter_model_path), n_ctx=n_ctx)
    fit = live_fit(facts, choice, advice="lower it")
    (expected,) = estimate_fit(
        facts.header, facts.file_size, n_ctx, facts.budget(-1), (KvMode.parse("q8_0/f16"),)
    ).modes
    assert fit.mode_fit == expected
    try:
        check_load_fits(facts.header, choice, facts.budget(-1), file_size=facts.file_size)
        refusal = None
    except ContextTooLargeError as error:
        refusal = str(error).replace("lower --ctx, or pass --force to load anyway", "lower it")
    assert fit.refusal == refusal
    assert (fit.refusal is not None) == (expected.verdict == NO_FIT)


def test_a_pair_llama_cpp_refuses_is_said_and_cannot_be_forced(tmp_path) -> None:
    from tests.gguf_factory import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "odd.gguf", head_dim=40)
    fit = live_fit(_facts(path, 8 * GIB), LoadProfile(str(path), n_ctx=256), "x")
    assert fit.estimate is None and not fit.forceable
    assert fit.refusal is not None and "divisible by 32" in fit.refusal


def test_a_damaged_file_is_named_at_start(tmp_path) -> None:
    from app.damaged_files import check_state_files

    (tmp_path / FILE_NAME).write_text("\x00\x01 not json")
    (notice,) = check_state_files(tmp_path)
    assert notice.startswith("Your model load settings file was unreadable; it was kept as ")
    assert notice.endswith("every model loads with the default load settings.")
