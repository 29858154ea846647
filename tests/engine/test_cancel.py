"""Stop: the shared cancel flag is read by llama.cpp's native abort callback, so a cancel cuts
a prompt decode or a token decode short inside llama.cpp, not only between tokens.

The first tests run the engine's generation code in this process on the real starter model,
with the real llama.cpp, and set the flag at the one moment only the abort callback can
act on: after the generation loop last looked at it, as llama.cpp starts a decode. Without
the callback that decode runs to its end, and the reply gets one more token than it should.
The last test measures the stop latency through the real engine process
(benchmarks/cancel_latency.py prints the same measurement over many cancels).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Iterator
from typing import Any, Self

import pytest

from app.engine import generation
from app.engine.cancel import CancelFlag
from app.engine.messages import Failed, Finished, Generate, Load, Loaded, SamplingSettings, Token
from app.engine.process import EngineProcess
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from tests.engine_events import next_event
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

N_CTX = 2048
GREEDY = SamplingSettings(temperature=0.0, max_tokens=24)
LONG_PROMPT = " ".join(f"word{i}" for i in range(250))  # ~930 tokens


def _options(path: Any, **changes: Any) -> LoadProfile:
    return LoadProfile(
        model_path=str(path),
        n_ctx=N_CTX,
        kv=KvMode.parse("q8_0/f16"),
        n_threads=ENGINE_THREADS,
        seed=1,
        **changes,
    )


@pytest.fixture(scope="module")
def model(starter_model_path) -> Iterator[Any]:
    """The starter model loaded by the engine's own loader, in this process."""
    from app.engine.llama_log import install
    from app.engine.loader import load_model

    loaded = load_model(_options(starter_model_path, n_gpu_layers=0), install())
    yield loaded
    loaded.llm.close()


class CancelWhenDecoding:
    """Wraps llm.eval (which both the prompt evaluation and the reply's token loop in
    app/engine/generation.py call): on the `nth` call that has tokens to decode, sets the
    cancel flag and then lets llama.cpp decode. Records whether that decode was aborted."""

    def __init__(self, llm: Any, flag: CancelFlag, nth: int) -> None:
        self.llm, self.flag, self.nth = llm, flag, nth
        self.calls = 0
        self.aborted: bool | None = None
        self._eval = llm.eval

    def __enter__(self) -> Self:
        self.llm.eval = self
        return self

    def __exit__(self, *_exc: object) -> None:
        del self.llm.eval  # the class's method again

    def __call__(self, tokens: Any) -> None:
        if len(tokens) == 0:
            return self._eval(tokens)
        self.calls += 1
        if self.calls != self.nth:
            return self._eval(tokens)
        self.flag.set()  # the loop checked the flag before this call: only llama.cpp can see it now
        try:
            self._eval(tokens)
        except RuntimeError:  # llama_decode returned 2: stopped by the abort callback
            self.aborted = True
            raise
        self.aborted = False
        return None


def _generate(
    model: Any,
    flag: CancelFlag,
    prompt: str,
    sampling: SamplingSettings = GREEDY,
    request: str = "r",
) -> tuple[list[Token], Finished]:
    events: list[object] = []
    flag.clear()
    finished = generation.run_generation(
        model.llm, Generate(request, sampling, prompt=prompt), model.template, flag, events.append
    )
    return [e for e in events if isinstance(e, Token)], finished


def test_stop_is_llama_cpps_native_abort_callback_on_the_shared_flag(model, monkeypatch):
    registered: list[tuple[int | None, int | None]] = []
    real = generation._set_abort

    def spy(ctx: Any, callback: Any, data: Any) -> None:
        registered.append(
            (ctypes.cast(callback, ctypes.c_void_p).value, getattr(data, "value", data))
        )
        real(ctx, callback, data)

    monkeypatch.setattr(generation, "_set_abort", spy)
    flag = CancelFlag()
    _generate(
        model, flag, "The capital of France is", SamplingSettings(temperature=0.0, max_tokens=2)
    )
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    strlen = ctypes.cast(libc.strlen, ctypes.c_void_p).value
    # A native function reading the flag's byte: no Python runs per graph node.
    assert registered[0] == (strlen, flag.address)
    assert registered[-1] == (None, None)  # and unhooked afterwards
    assert len(registered) == 2


def test_a_cancel_while_llama_cpp_evaluates_the_prompt_stops_that_decode(model):
    flag = CancelFlag()
    prompt = " ".join(f"word{i}" for i in range(100))  # one batch: no check between batches
    with CancelWhenDecoding(model.llm, flag, nth=1) as spy:
        tokens, finished = _generate(model, flag, prompt)
    assert finished.stop_reason == "cancelled"
    assert finished.generated_tokens == 0 and tokens == [] and finished.text == ""
    assert spy.aborted is True, "the prompt decode ran to its end after the cancel"
    # The engine goes on: the same prompt, uncancelled, replies in full.
    tokens, again = _generate(model, flag, prompt)
    assert again.stop_reason == "length" and again.generated_tokens == GREEDY.max_tokens


def test_a_cancel_while_llama_cpp_decodes_a_token_drops_only_that_token(model):
    flag = CancelFlag()
    prompt = "Once upon a time, in a small village by the sea,"
    _generate(model, flag, prompt)
    # Every reply below finds the prompt cached and evaluates its last token alone. Compare
    # like with like: a reply whose prompt went in as one batch can differ from these (the
    # CPU's matrix kernels for 1 row and for 14 give different roundings; on an AVX-512 CPU
    # the greedy text parts at token 6), with or without any cancel.
    _, full = _generate(model, flag, prompt)
    assert full.generated_tokens == GREEDY.max_tokens
    # Call 1 is the prompt; call k + 1 decodes the k-th generated token to sample the next.
    with CancelWhenDecoding(model.llm, flag, nth=6) as spy:
        tokens, cut = _generate(model, flag, prompt)
    assert cut.stop_reason == "cancelled"
    assert cut.generated_tokens == 5  # a between-tokens check alone would have let a 6th through
    assert spy.aborted is True, "the token decode ran to its end after the cancel"
    assert "".join(t.text for t in tokens) == cut.text and full.text.startswith(cut.text)
    # llama.cpp dropped the aborted token's cache entries: the next reply is the full one,
    # whatever text this CPU's arithmetic makes of the prompt.
    _, again = _generate(model, flag, prompt)
    assert again.text == full.text
    assert again.generated_tokens == full.generated_tokens


# ---- through the engine process --------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(starter_model_path) -> Iterator[EngineProcess]:
    proc = EngineProcess()
    proc.start()
    # One batch for a whole long prompt: only the abort callback can stop it part-way. On the
    # CPU, where llama.cpp checks that callback between graph nodes (as in the tests above).
    proc.send(Load(_options(starter_model_path, n_batch=N_CTX, n_gpu_layers=0)))
    _, loaded = next_event(proc, (Loaded, Failed))
    assert isinstance(loaded, Loaded), loaded
    yield proc
    proc.stop()


def test_stop_latency_in_the_engine_process(engine):
    """A Stop cuts a reply and a long prompt short. Timed only against the same run's own
    prompt time (a ratio, so a busy machine slows both); the typical figures are a few ms
    (benchmarks/cancel_latency.py)."""
    # Mid-reply: cancel after a few tokens.
    engine.send(
        Generate(
            "reply",
            SamplingSettings(temperature=0.8, max_tokens=1000, seed=3),
            prompt="Once upon a time",
        )
    )
    for _ in range(3):
        next_event(engine, (Token,))
    cancelled_at = time.perf_counter()
    engine.cancel()
    _, finished = next_event(engine, (Finished, Failed))
    reply_latency = time.perf_counter() - cancelled_at
    assert isinstance(finished, Finished) and finished.stop_reason == "cancelled"
    assert finished.generated_tokens < 100

    # Mid-prompt: the long prompt is one llama_decode call of several seconds here. It starts
    # as soon as the one-token reply before it has finished; cancel then.
    engine.send(
        Generate("full", SamplingSettings(temperature=0.0, max_tokens=1), prompt=LONG_PROMPT)
    )
    _, full = next_event(engine, (Finished, Failed))
    assert isinstance(full, Finished) and full.prompt_tokens > 800
    engine.send(Generate("before", SamplingSettings(temperature=0.0, max_tokens=1), prompt="Hi"))
    engine.send(
        Generate(
            "prompt", SamplingSettings(temperature=0.0, max_tokens=8), prompt=LONG_PROMPT + "!"
        )
    )
    _, before = next_event(engine, (Finished, Failed))
    assert isinstance(before, Finished) and before.request_id == "before"
    cancelled_at = time.perf_counter()
    engine.cancel()
    _, finished = next_event(engine, (Finished, Failed))
    prompt_latency = time.perf_counter() - cancelled_at
    assert isinstance(finished, Finished) and finished.stop_reason == "cancelled"
    assert finished.generated_tokens == 0
    print(
        f"stop latency: mid-reply {reply_latency * 1000:.1f} ms, "
        f"mid-prompt {prompt_latency * 1000:.1f} ms "
        f"(the whole prompt takes {full.time_to_first_token_s * 1000:.0f} ms)"
    )
    assert prompt_latency < full.time_to_first_token_s / 2
    # And the engine goes on.
    engine.send(
        Generate(
            "after",
            SamplingSettings(temperature=0.0, max_tokens=8),
            prompt="The capital of France is",
        )
    )
    _, after = next_event(engine, (Finished, Failed))
    assert isinstance(after, Finished) and after.generated_tokens == 8
