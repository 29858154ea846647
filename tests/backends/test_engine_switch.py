"""The engine runs the chosen backend: switched to the CPU package and back, a real generation
on each, and the libllama the engine process mapped is read from /proc to prove which ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends.store import BUILT_IN
from app.engine.backend_probe import probe
from app.engine.messages import Failed, Finished, Generate, Load, Loaded, SamplingSettings
from app.engine.process import EngineProcess
from app.load.profile import LoadProfile
from tests.backends.package_edits import mapped_libllama
from tests.engine_events import next_event
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

GREEDY = SamplingSettings(temperature=0.0, max_tokens=6)


def generate(proc: EngineProcess, model: Path) -> Finished:
    proc.send(Load(LoadProfile(model_path=str(model), n_ctx=512, n_threads=ENGINE_THREADS, seed=1)))
    _, loaded = next_event(proc, (Loaded, Failed))
    assert isinstance(loaded, Loaded), loaded
    proc.send(Generate("switch", GREEDY, prompt="The capital of France is"))
    _, finished = next_event(proc, (Finished, Failed))
    assert isinstance(finished, Finished), finished
    return finished


def test_engine_switches_to_the_package_and_back(store, cpu_package, starter_model_path):
    store.add(cpu_package, probe)
    proc = EngineProcess(backends=store)
    try:
        proc.start()
        assert proc.backend == BUILT_IN
        built_in = generate(proc, starter_model_path)
        assert "site-packages/llama_cpp/lib" in str(mapped_libllama(proc.pid or 0))

        store.use("cpu", probe)
        proc.stop()  # the next send starts a fresh engine, on the chosen backend
        on_package = generate(proc, starter_model_path)
        assert proc.backend == "cpu" and proc.backend_notice is None
        assert mapped_libllama(proc.pid or 0) == (store.folder / "cpu" / "libllama.so").resolve()
        assert on_package.generated_tokens == 6 and on_package.text.strip()

        store.use(BUILT_IN, probe)
        proc.stop()
        back = generate(proc, starter_model_path)
        assert "site-packages/llama_cpp/lib" in str(mapped_libllama(proc.pid or 0))
        assert back.text == built_in.text  # the same build gives the same greedy text
    finally:
        proc.stop()


def test_a_damaged_chosen_package_starts_the_built_in_one_and_says_why(
    store, cpu_package, starter_model_path
):
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    (store.folder / "cpu" / "libmtmd.so").unlink()
    proc = EngineProcess(backends=store)
    try:
        finished = generate(proc, starter_model_path)
        assert proc.backend == BUILT_IN and finished.generated_tokens == 6
        assert proc.backend_notice == (
            "The cpu backend's files do not match its manifest: libmtmd.so is missing. "
            "The engine runs the built-in backend instead."
        )
    finally:
        proc.stop()
