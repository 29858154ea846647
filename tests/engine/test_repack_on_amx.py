"""Repacked weights (`kvstudio run --repack`) on a CPU with AMX: llama.cpp's AMX kernels then
multiply the weights, and they crash on the starter (SIGSEGV; llama.cpp issue 20824). The
engine refuses with one sentence there, and loads as asked everywhere else. Which of the two
this machine shows depends on its CPU: both are what a user of such a machine must see."""

from __future__ import annotations

import pytest

from app.engine import devices
from app.engine.llama_log import install
from app.engine.loader import AMX_REPACK_REFUSAL, load_model
from app.load.profile import LoadProfile
from app.platform.errors import BadInputError

pytestmark = pytest.mark.slow


def test_repacked_weights_load_or_are_refused_in_one_sentence(starter_model_path):
    options = LoadProfile(str(starter_model_path), n_ctx=256, n_threads=2, repack_weights=True)
    if devices.has_amx():
        with pytest.raises(BadInputError) as refused:
            load_model(options, install())
        assert str(refused.value) == AMX_REPACK_REFUSAL
        return
    loaded = load_model(options, install())
    try:
        loaded.llm.eval(loaded.llm.tokenize(b"The capital of France is"))
    finally:
        loaded.llm.close()
