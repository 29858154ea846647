"""The real engine process on the starter model: load, KV sizes, streaming, cancel, crash."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from app.engine.messages import (
    ChatMessage,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    PromptStarted,
    SamplingSettings,
    Token,
)
from app.engine.process import EngineProcess
from app.kv.kv_types import KvMode, kv_type
from app.load.profile import LoadProfile
from app.models.gguf_read import read_gguf_header
from app.platform.errors import EngineCrashedError
from tests.engine_events import next_event
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

N_CTX = 2048
GREEDY = SamplingSettings(temperature=0.0, max_tokens=8)


def _options(path: Path, kv: str = "q8_0/f16") -> LoadProfile:
    k, v = kv.split("/")
    return LoadProfile(
        model_path=str(path), n_ctx=N_CTX, kv=KvMode.of(k, v), n_threads=ENGINE_THREADS, seed=1
    )


def _load(proc: EngineProcess, options: LoadProfile) -> Loaded:
    proc.send(Load(options))
    _, event = next_event(proc, (Loaded, Failed))
    assert isinstance(event, Loaded), event
    return event


@pytest.fixture(scope="module")
def engine(starter_model_path):
    proc = EngineProcess()
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def loaded_q8(engine, starter_model_path) -> Loaded:
    return _load(engine, _options(starter_model_path))


def test_load_reports_both_gemma3_caches(loaded_q8):
    caches = loaded_q8.kv_caches
    assert sorted(c.swa for c in caches) == [False, True]
    assert all((c.k_type, c.v_type) == ("q8_0", "f16") for c in caches)
    global_cache = next(c for c in caches if not c.swa)
    assert global_cache.cells == N_CTX and global_cache.layers == 3
    assert loaded_q8.n_ctx == N_CTX and loaded_q8.architecture == "gemma3"
    assert loaded_q8.chat_format == "gemma"  # the base model's GGUF has no template
    assert loaded_q8.compute_buffers and loaded_q8.compute_buffers[0].bytes > 0
    assert "CPU" in loaded_q8.system_info
    assert loaded_q8.warnings == ()  # the CPU backend runs q8_0/f16 Flash Attention itself


def test_generation_streams_tokens(engine, loaded_q8):
    engine.send(Generate("stream", GREEDY, prompt="The capital of France is"))
    events, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished), finished
    started, tokens = events[0], events[1:]
    assert isinstance(started, PromptStarted) and started.request_id == "stream"
    assert started.prompt_tokens == finished.prompt_tokens
    assert [t.request_id for t in tokens] == ["stream"] * len(tokens) and len(tokens) >= 4
    assert "".join(t.text for t in tokens) == finished.text and finished.text.strip()
    assert finished.generated_tokens == 8 and finished.stop_reason == "length"
    assert finished.prompt_tokens == tokens[0].n_past - 1
    assert finished.time_to_first_token_s > 0 and finished.tokens_per_second > 0


def test_events_carry_engine_times_on_this_machine_s_clock(engine, loaded_q8):
    """PromptStarted, Token and Finished are stamped in the engine with time.monotonic(),
    which is the same clock here: the GUI places them where they happened."""
    before = time.monotonic()
    engine.send(Generate("timed", GREEDY, prompt="The capital of France is"))
    events, finished = next_event(engine, (Finished, Failed))
    after = time.monotonic()
    assert isinstance(finished, Finished), finished
    times = [e.at for e in events] + [finished.at]
    assert before <= times[0] and times == sorted(times) and times[-1] <= after
    started, first = events[0], events[1]
    assert isinstance(started, PromptStarted) and isinstance(first, Token)
    # The first token comes after the prompt was evaluated.
    assert first.at - started.at > 0


def test_chat_uses_the_gemma_turn_format(engine, loaded_q8):
    messages = (ChatMessage("user", "Say hello."),)
    engine.send(
        Generate("chat", SamplingSettings(temperature=0.0, max_tokens=6), messages=messages)
    )
    _, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished), finished
    # <bos><start_of_turn>user\nSay hello.<end_of_turn>\n<start_of_turn>model\n
    assert 10 <= finished.prompt_tokens <= 16
    assert "<end_of_turn>" not in finished.text


def test_q8_0_k_is_exactly_34_64_of_f16_k(engine, loaded_q8, starter_model_path):
    f16 = _load(engine, _options(starter_model_path, "f16/f16"))
    header = read_gguf_header(starter_model_path)
    n_embd_k_gqa = header.key_length * header.head_count_kv_at(0)  # 256 * 1 for Gemma 3 270M
    for q8_cache, f16_cache in zip(loaded_q8.kv_caches, f16.kv_caches, strict=True):
        assert (q8_cache.cells, q8_cache.layers, q8_cache.swa) == (
            f16_cache.cells,
            f16_cache.layers,
            f16_cache.swa,
        )
        cells_layers = q8_cache.cells * q8_cache.layers
        exact_q8 = cells_layers * kv_type("q8_0").row_bytes(n_embd_k_gqa)
        exact_f16 = cells_layers * kv_type("f16").row_bytes(n_embd_k_gqa)
        assert exact_q8 * 64 == exact_f16 * 34
        # llama.cpp prints MiB from a C float with 2 decimals: the exact bytes must
        # print as the figures it logged, so the logged sizes are these exact sizes.
        assert f"{exact_q8 / 1048576:.2f}" == f"{q8_cache.k_mib:.2f}"
        assert f"{exact_f16 / 1048576:.2f}" == f"{f16_cache.k_mib:.2f}"
        assert q8_cache.v_mib == f16_cache.v_mib
        # And from the printed figures alone, within their 0.005 MiB rounding each.
        assert abs(q8_cache.k_mib - f16_cache.k_mib * 34 / 64) <= 0.005 * (1 + 34 / 64)
    _load(engine, _options(starter_model_path))  # back to the default for later tests


def test_bad_file_load_fails_in_words_and_engine_stays_usable(
    engine, loaded_q8, tmp_path, starter_model_path
):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"this is not a model\n" * 10)
    pid = engine.pid
    engine.send(Load(_options(bad)))
    _, failed = next_event(engine, (Failed, Loaded))
    assert isinstance(failed, Failed) and "not a GGUF" in failed.message
    assert "\n" not in failed.message and engine.pid == pid and engine.is_alive()
    # A refused file leaves the loaded model loaded (tests/engine/test_load_keeps_model.py).
    assert failed.kept is not None and failed.kept.model_path == str(starter_model_path)
    engine.send(Generate("after-bad", GREEDY, prompt="Hi"))
    _, event = next_event(engine, (Failed, Finished))
    assert isinstance(event, Finished)
    _load(engine, _options(starter_model_path))
    engine.send(Generate("after-reload", GREEDY, prompt="Hi"))
    _, event = next_event(engine, (Failed, Finished))
    assert isinstance(event, Finished)


def test_killed_engine_is_reported_and_replaced(starter_model_path, tmp_path):
    proc = EngineProcess()
    try:
        proc.start()
        _load(proc, _options(starter_model_path))
        proc.send(Generate("warm", GREEDY, prompt="Once"))
        next_event(proc, (Finished,))
        bad = tmp_path / "bad.gguf"
        bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 8)
        proc.send(Load(_options(bad)))  # the engine logs this failure to its stderr
        next_event(proc, (Failed,))
        first_pid = proc.pid
        os.kill(first_pid, signal.SIGKILL)
        with pytest.raises(EngineCrashedError) as crash:
            while True:
                proc.recv(timeout=10)
        message = str(crash.value)
        assert message.startswith("The engine stopped (killed by signal 9, SIGKILL).\n")
        assert "Load failed" in message  # the tail of what it wrote to stderr
        loaded = _load(proc, _options(starter_model_path))  # the next send starts a new engine
        assert proc.pid != first_pid and loaded.kv_caches
        proc.send(Generate("again", GREEDY, prompt="Hello"))
        _, finished = next_event(proc, (Finished, Failed))
        assert isinstance(finished, Finished) and finished.generated_tokens == 8
    finally:
        proc.stop()


def test_reusing_a_prompt_prefix_past_the_sliding_window_gives_the_fresh_answer(engine, loaded_q8):
    """Gemma 3's sliding-window cache forgets old positions; reusing a prefix that ends
    further back than the window must re-read the prompt, or the reply silently changes."""
    shared = "List A: " + " ".join(f"item{i}" for i in range(10)) + "."
    tail = " List B: " + " ".join(f"thing{i}" for i in range(320)) + "."
    # The second prompt shares only the first 25 tokens; after ~1160 the 1024-cell
    # sliding-window cache no longer holds them.
    first, second = shared + tail, shared + " Now count backwards:"
    sampling = SamplingSettings(temperature=0.0, max_tokens=6)
    replies = []
    for request, prompt in (("a", first), ("b", second)):
        engine.send(Generate(request, sampling, prompt=prompt))
        _, finished = next_event(engine, (Finished, Failed))
        assert isinstance(finished, Finished), finished
        replies.append(finished)
    assert replies[0].prompt_tokens > 1100
    engine.send(Load(loaded_q8.options))  # a fresh context
    next_event(engine, (Loaded,))
    engine.send(Generate("fresh", sampling, prompt=second))
    _, fresh = next_event(engine, (Finished, Failed))
    assert fresh.text == replies[1].text


def test_stop_string_ends_the_reply_before_it(engine, loaded_q8):
    sampling = SamplingSettings(temperature=0.0, max_tokens=40, stop=("7",))
    engine.send(Generate("stop", sampling, prompt="1, 2, 3, 4,"))
    events, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished), finished
    tokens = [e for e in events if isinstance(e, Token)]
    assert finished.stop_reason == "stop" and "7" not in finished.text
    assert "6" in finished.text and "".join(t.text for t in tokens) == finished.text


def test_evaluate_and_bench_are_dispatched_and_generation_still_works(engine, loaded_q8):
    from app.engine.messages import Bench, BenchDone, Evaluate, Evaluated

    text = " ".join(f"The number {i} comes after {i - 1}." for i in range(1, 80))
    engine.send(Evaluate("ppl", text, chunk_tokens=128, n_chunks=1))
    _, evaluated = next_event(engine, (Evaluated, Failed))
    assert isinstance(evaluated, Evaluated), evaluated
    assert evaluated.perplexity > 1 and evaluated.scored_tokens > 0
    engine.send(Bench("bench", depth=0, n_prompt=32, n_gen=4))
    _, done = next_event(engine, (BenchDone, Failed))
    assert isinstance(done, BenchDone), done
    assert done.decode_tokens_per_second > 0
    engine.send(Generate("after-measures", GREEDY, prompt="The capital of France is"))
    _, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished) and finished.generated_tokens == 8


def test_a_conversation_longer_than_the_context_drops_its_oldest_turns(engine, loaded_q8):
    from app.engine.messages import ContextTrimmed, KernelWarning

    long_turn = " ".join(f"word{i}" for i in range(150))  # ~600 tokens each
    messages = [ChatMessage("system", "Be brief.")]
    for i in range(5):
        messages += [ChatMessage("user", f"{i}: {long_turn}"), ChatMessage("assistant", "Noted.")]
    messages.append(ChatMessage("user", "Say hi."))
    # Room is kept for the reply (max_tokens, at most half the context): the prompt gets
    # 1024 of the 2048 tokens. The reply itself is cut short once it has started.
    sampling = SamplingSettings(temperature=0.0, max_tokens=1024)
    engine.send(Generate("long-chat", sampling, messages=tuple(messages)))
    seen, _ = next_event(engine, (Token,))
    engine.cancel()
    more, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished), finished
    # A notice about the conversation, sent before the prompt starts; not a kernel warning.
    assert [type(e) for e in seen[:2]] == [ContextTrimmed, PromptStarted]
    trimmed = seen[0]
    assert trimmed.request_id == "long-chat" and trimmed.n_ctx == N_CTX
    assert (
        1 <= trimmed.dropped_messages <= len(messages) - 2
    )  # the system prompt and "Say hi." stay
    assert trimmed.prompt_tokens == finished.prompt_tokens
    assert not [e for e in seen + more if isinstance(e, KernelWarning)]
    assert 400 < finished.prompt_tokens <= N_CTX // 2  # the last long turn still fits
