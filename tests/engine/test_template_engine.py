"""Hostile chat templates through the real engine: a tiny GGUF carrying each is loaded by
llama.cpp in the engine process. Before this, llama-cpp-python compiled the template while
loading (a template that does not parse made the model impossible to load, even for a raw
prompt; `"x" * 10**9` was folded into gigabytes at compile time), and an endless render
could not be stopped."""

from __future__ import annotations

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
    SamplingSettings,
    TemplateFallback,
)
from app.engine.process import EngineProcess
from app.load.profile import LoadProfile
from tests.engine_events import next_event
from tests.engine_threads import ENGINE_THREADS
from tests.gguf_factory import write_tiny_gguf

AREA = "Templates and text from files"
GREEDY = SamplingSettings(temperature=0.0, max_tokens=4)
HOSTILE_AT_LOAD = {
    "not valid Jinja (line 3": (
        "{% for m in messages %}\n{{ m.content }}\n{% for x in %}{% endfor %}"
    ),
    "Python internals": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "characters": "{{ 'x' * 10**9 }}",
    "ran longer than": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}",
    "lipsum was given": "{{ lipsum(n=10**6) }}",
}
# Fine on the sample conversation tried at load; hostile only when the user says a word.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n"
)
LOOPS_ON_LOOP = (
    "{% if messages[-1].content == 'loop' %}{% set l = range(100000)|list %}"
    "{% for a in l %}{% for b in l %}{% endfor %}{% endfor %}{% endif %}" + CHATML
)
BOMBS_ON_BOMB = "{% if messages[-1].content == 'bomb' %}{{ 'x' * 10**9 }}{% endif %}" + CHATML


def _load(proc: EngineProcess, path: Path) -> Loaded:
    proc.send(Load(LoadProfile(model_path=str(path), n_ctx=256, n_threads=ENGINE_THREADS, seed=1)))
    _, event = next_event(proc, (Loaded, Failed))
    assert isinstance(event, Loaded), event
    return event


@pytest.fixture(scope="module")
def engine():
    proc = EngineProcess()
    proc.start()
    yield proc
    proc.stop()


def _peak_mib(pid: int | None) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.slow
def test_a_hostile_template_loads_with_the_plain_one_and_says_why(engine, tmp_path, reliability):
    for reason, template in HOSTILE_AT_LOAD.items():
        path = write_tiny_gguf(tmp_path / f"{len(template)}.gguf", chat_template=template)
        started = time.monotonic()
        loaded = _load(engine, path)
        assert time.monotonic() - started < 60, reason  # unbounded, it ran for minutes
        assert loaded.chat_format == "chatml"
        assert reason in loaded.chat_template_notice, loaded.chat_template_notice
        assert loaded.chat_template_notice.endswith("Using the plain chatml template.")
    # The file whose template does not parse still answers a raw prompt and a chat.
    path = write_tiny_gguf(
        tmp_path / "bad.gguf", chat_template=HOSTILE_AT_LOAD["not valid Jinja (line 3"]
    )
    _load(engine, path)
    engine.send(Generate("raw", GREEDY, prompt="the"))
    _, raw = next_event(engine, (Finished, Failed))
    engine.send(Generate("chat", GREEDY, messages=(ChatMessage("user", "Hi"),)))
    _, chat = next_event(engine, (Finished, Failed))
    assert isinstance(raw, Finished) and isinstance(chat, Finished), (raw, chat)
    peak = _peak_mib(engine.pid)
    assert peak < 1024, peak  # the 10**9 template alone took 1.9 GB before
    reliability.record(
        AREA, "hostile templates loaded by the real engine, plain one used", len(HOSTILE_AT_LOAD)
    )
    reliability.record(AREA, "engine peak memory over those loads", f"{peak:.0f} MiB")


def test_stop_ends_an_endless_render_in_the_engine(engine, tmp_path):
    loaded = _load(engine, write_tiny_gguf(tmp_path / "loop.gguf", chat_template=LOOPS_ON_LOOP))
    assert loaded.chat_format == "gguf" and loaded.chat_template_notice == ""
    engine.send(Generate("loop", GREEDY, messages=(ChatMessage("user", "loop"),)))
    pressed = time.monotonic()
    engine.cancel()
    _, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished) and finished.stop_reason == "cancelled", finished
    # Ended by the Stop, not by the 5 s limit (which refuses the template instead of 'cancelled').
    assert time.monotonic() - pressed < 5


def test_a_template_that_breaks_a_limit_mid_chat_falls_back_once(engine, tmp_path, reliability):
    _load(engine, write_tiny_gguf(tmp_path / "bomb.gguf", chat_template=BOMBS_ON_BOMB))
    engine.send(Generate("bomb", GREEDY, messages=(ChatMessage("user", "bomb"),)))
    seen, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished) and finished.generated_tokens > 0, finished
    notices = [e for e in seen if isinstance(e, TemplateFallback)]
    assert [n.chat_format for n in notices] == ["chatml"]
    assert "* would make 1,000,000,000 characters" in notices[0].notice
    engine.send(Generate("again", GREEDY, messages=(ChatMessage("user", "bomb"),)))
    seen, finished = next_event(engine, (Finished, Failed))
    assert isinstance(finished, Finished)
    assert not [e for e in seen if isinstance(e, TemplateFallback)]  # the plain one from now on
    reliability.record(AREA, "templates refused mid-chat: reply given with the plain one", 1)
