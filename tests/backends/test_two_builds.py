"""What the tests compare in generated text holds on two llama.cpp builds with other CPU
features: the built-in one (pip's -march=native build: AVX-512 on the machines CI has run on)
and the portable CPU package (AVX2, no AVX-512). Their greedy texts may differ from each other
(other kernels, other roundings); what must not differ on either is what a user relies on:
after a Stop, the same prompt gives the reply it gave before the Stop."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.backends.store import BUILT_IN, BackendStore
from app.engine.backend_probe import probe
from app.engine.messages import Finished, Generate, Load, Loaded, SamplingSettings, Token
from app.engine.process import EngineProcess
from app.load.profile import LoadProfile
from tests.backends.package_edits import mapped_libllama
from tests.engine_events import expect_event
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

PROMPT = "Once upon a time, in a small village by the sea,"
GREEDY = SamplingSettings(temperature=0.0, max_tokens=24)


def _reply(proc: EngineProcess, request: str) -> Finished:
    proc.send(Generate(request, GREEDY, prompt=PROMPT))
    finished = expect_event(proc, (Finished,))
    assert isinstance(finished, Finished)
    return finished


@pytest.fixture(params=[BUILT_IN, "cpu"])
def engine(
    request, store: BackendStore, cpu_package, starter_model_path
) -> Iterator[EngineProcess]:
    store.add(cpu_package, probe)
    store.use(request.param, probe)
    proc = EngineProcess(backends=store)
    try:
        proc.send(
            Load(LoadProfile(str(starter_model_path), n_ctx=512, n_threads=ENGINE_THREADS, seed=1))
        )
        expect_event(proc, (Loaded,))
        assert proc.backend == request.param
        lib = str(mapped_libllama(proc.pid or 0))
        assert ("site-packages/llama_cpp/lib" in lib) == (request.param == BUILT_IN), lib
        yield proc
    finally:
        proc.stop()


def test_after_a_stop_the_same_prompt_gives_the_same_reply(engine: EngineProcess) -> None:
    _reply(engine, "cold")  # the prompt in one batch; the replies below find it cached
    before = _reply(engine, "before")
    assert before.generated_tokens == GREEDY.max_tokens
    # A long reply, so the Stop comes before its end however busy the machine is; greedy, it
    # runs along the same tokens as the one before.
    long = SamplingSettings(temperature=0.0, max_tokens=1000)
    engine.send(Generate("stopped", long, prompt=PROMPT))
    for _ in range(3):
        expect_event(engine, (Token,))
    engine.cancel()
    stopped = expect_event(engine, (Finished,))
    assert isinstance(stopped, Finished) and stopped.stop_reason == "cancelled"
    shorter, longer = sorted((stopped.text, before.text), key=len)
    assert longer.startswith(shorter)
    after = _reply(engine, "after")
    assert (after.text, after.generated_tokens) == (before.text, before.generated_tokens)
