"""KVSTUDIO_THREADS: the CPU threads llama.cpp gets when a load does not choose its own; a
chosen number wins, and a bad value is one sentence (exit 2) before any engine starts."""

from __future__ import annotations

import pytest

from app.engine.cpu_threads import ENV, threads_for
from app.engine.llama_log import install
from app.engine.loader import load_model
from app.load.profile import LoadProfile
from app.platform.errors import BadInputError
from tests.cli_runner import kvstudio


def _threads_llama_cpp_got(model_path, monkeypatch, typed: str, chosen: int | None) -> tuple:
    monkeypatch.setenv(ENV, typed)
    loaded = load_model(
        LoadProfile(str(model_path), n_ctx=256, n_gpu_layers=0, n_threads=chosen), install()
    )
    try:
        params = loaded.llm.context_params
        return params.n_threads, params.n_threads_batch
    finally:
        loaded.llm.close()


def test_a_load_that_does_not_choose_gets_the_variables_threads(starter_model_path, monkeypatch):
    assert _threads_llama_cpp_got(starter_model_path, monkeypatch, "1", None) == (1, 1)
    # A number chosen for the load (the dialog's Threads, --threads) wins over the variable.
    assert _threads_llama_cpp_got(starter_model_path, monkeypatch, "1", 2) == (2, 2)


def test_without_the_variable_llama_cpp_python_chooses(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert threads_for(None) is None and threads_for(3) == 3


@pytest.mark.parametrize("typed", ["two", "0", "-1", "1.5"])
def test_a_bad_value_is_one_sentence_and_exit_2(typed: str, monkeypatch) -> None:
    sentence = f"{ENV} must be a whole number of threads from 1 up; it is {typed!r}."
    monkeypatch.setenv(ENV, typed)
    with pytest.raises(BadInputError) as refused:
        threads_for(None)
    assert str(refused.value) == sentence
    result = kvstudio("run", "starter", "-p", "hi", "-n", "1", env={ENV: typed})
    assert (result.returncode, result.stderr.strip()) == (2, f"kvstudio: {sentence}")
