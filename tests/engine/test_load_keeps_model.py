"""A model llama.cpp refuses never costs the user the model they had loaded: refused before
any weights are read (an unknown architecture), the loaded one is kept; refused later (a
tensor missing), the loaded one is loaded again. Either way the Failed says which model is
loaded now, and it replies. The real engine process on the starter model."""

from __future__ import annotations

import pytest

from app.engine.messages import Failed, Finished, Generate, Load, SamplingSettings
from app.engine.process import EngineProcess
from tests.engine.test_engine_process import _load, _options
from tests.engine_events import next_event
from tests.gguf_factory import write_unknown_arch_gguf, write_vocab_only_gguf

pytestmark = pytest.mark.slow


def _reply(proc: EngineProcess, request_id: str) -> Finished:
    sampling = SamplingSettings(temperature=0.0, max_tokens=3)
    proc.send(Generate(request_id, sampling=sampling, prompt="The capital of France is"))
    _, event = next_event(proc, (Finished, Failed))
    assert isinstance(event, Finished), event
    return event


def test_a_refused_model_leaves_the_loaded_one_loaded(starter_model_path, tmp_path) -> None:
    strange = write_unknown_arch_gguf(tmp_path / "strange.gguf")
    no_tensors = write_vocab_only_gguf(tmp_path / "no-tensors.gguf")
    with EngineProcess() as proc:
        before = _load(proc, _options(starter_model_path))

        proc.send(Load(_options(strange)))
        _, failed = next_event(proc, (Failed,))
        assert isinstance(failed, Failed)
        assert failed.message == (
            "llama.cpp could not load strange.gguf: unknown model architecture: 'strangearch'."
        )
        assert failed.kept is not None and not failed.reloaded
        assert failed.kept.model_path == before.model_path
        assert _reply(proc, "after-strange").generated_tokens > 0

        proc.send(Load(_options(no_tensors)))
        _, failed = next_event(proc, (Failed,))
        assert isinstance(failed, Failed)
        assert "could not load no-tensors.gguf" in failed.message
        assert failed.kept is not None and failed.reloaded
        assert failed.kept.model_path == before.model_path
        assert _reply(proc, "after-reload").generated_tokens > 0


def test_a_refused_first_model_is_a_plain_failure(tmp_path) -> None:
    strange = write_unknown_arch_gguf(tmp_path / "strange.gguf")
    with EngineProcess() as proc:
        proc.send(Load(_options(strange)))
        _, failed = next_event(proc, (Failed,))
        assert isinstance(failed, Failed) and failed.kept is None
