"""The real engine process gives the memory of an unloaded model back to the system."""

from __future__ import annotations

import psutil
import pytest

from app.engine.messages import (
    ChatMessage,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    SamplingSettings,
    Unload,
)
from app.engine.process import EngineProcess
from app.load.profile import LoadProfile
from app.models.random_model import write_model
from tests.engine_events import next_event
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.skipif(
    not psutil.LINUX, reason="glibc's malloc_trim: other systems return memory their own way"
)


def _next(proc: EngineProcess, kind: type) -> object:
    return next_event(proc, (kind,), timeout=120)[1]


def test_an_unloaded_model_leaves_the_engine_as_small_as_before_it_loaded(tmp_path):
    model = write_model(tmp_path / "tiny.gguf", 2, "small", None)
    options = LoadProfile(model_path=str(model), n_ctx=2048, n_threads=ENGINE_THREADS)
    reply = Generate(
        "r", SamplingSettings(max_tokens=32, seed=1), (ChatMessage("user", "Hello there"),)
    )
    with EngineProcess() as proc:
        # A reply without a model is refused once the engine is up with llama_cpp imported.
        proc.send(reply)
        _next(proc, Failed)
        engine = psutil.Process(proc.pid)
        before = engine.memory_info().rss
        after_unloads = []
        for _ in range(3):
            proc.send(Load(options))
            _next(proc, Loaded)
            proc.send(reply)
            _next(proc, Finished)
            loaded = engine.memory_info().rss
            proc.send(Unload())
            # Commands run in order: this refusal comes once the unload has finished.
            proc.send(reply)
            _next(proc, Failed)
            unloaded = engine.memory_info().rss
            # Without malloc_trim glibc kept about two thirds of it (tiny model: 3.5 of
            # 15 MiB given back, then less each cycle).
            assert loaded - unloaded > (loaded - before) / 2
            after_unloads.append(unloaded)
    assert after_unloads[-1] - after_unloads[0] < 2**20  # no creep from cycle to cycle


def test_the_engine_runs_with_a_steady_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The soak benchmark's engine crept up over load/reply/unload cycles with glibc's default
    arenas (5.8%) and with its moving mmap threshold (4.3%): the engine is started with two
    arenas and a fixed threshold (app/platform/heap.py), unless the user set them."""
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # the user's own choice
    with EngineProcess() as proc:
        proc.send(Generate("r", SamplingSettings(max_tokens=1), (ChatMessage("user", "hi"),)))
        _next(proc, Failed)  # the engine is up
        environment = psutil.Process(proc.pid).environ()
    assert environment.get("MALLOC_ARENA_MAX") == "2"
    assert environment.get("MALLOC_MMAP_THRESHOLD_") == "65536"
