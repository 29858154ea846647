"""The engine's memory ceiling (app/platform/memory_ceiling.py) through `kvstudio run` on the
real starter model: past it the load fails in one sentence naming the ceiling; the model file's
mapping does not count against it; the engine carries the default ceiling; a bad value of the
variable is one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.platform import units
from app.platform.memory_ceiling import ENV, MIN_RESERVE, machine_memory
from tests.cli_runner import assert_bad_input, kvstudio
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

_RUN = (
    "run",
    "starter",
    "-p",
    "Hello",
    "-n",
    "4",
    "--ctx",
    "2048",
    "--threads",
    str(ENGINE_THREADS),
)


def test_a_load_past_the_ceiling_fails_in_one_sentence(starter_model_path) -> None:
    result = kvstudio(*_RUN, env={ENV: "300MiB"})
    assert result.returncode == 1, result
    assert result.stderr.strip() == (
        "kvstudio: The model needed more memory than the engine's ceiling of 300.0 MiB; "
        f"a smaller context or model fits, or set {ENV} to raise the ceiling."
    )
    assert result.stdout == ""


def test_the_model_file_mapping_does_not_count_against_it(starter_model_path) -> None:
    # The load allocates a 514.5 MB compute buffer (llama.cpp) and a 512 MiB logits array
    # (llama-cpp-python) besides Python's own ~150 MiB; with the 241 MiB file mapped that is
    # over 1,400 MiB, so under RLIMIT_AS 1,300 MiB would fail. Under RLIMIT_DATA it replies.
    assert starter_model_path.stat().st_size > 240 * 1024**2
    result = kvstudio(*_RUN, "--json", env={ENV: "1300MiB"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"generated_tokens": 4' in result.stdout


def test_the_engine_sets_the_machine_less_a_reserve_on_itself(monkeypatch) -> None:
    from app.engine.messages import Load
    from app.engine.process import EngineProcess
    from app.load.profile import LoadProfile

    monkeypatch.delenv(ENV, raising=False)
    total = machine_memory()
    assert total is not None
    expected = max(total - max(MIN_RESERVE, total // 8), MIN_RESERVE)
    engine = EngineProcess()
    try:
        # Any command answered proves the engine is past its start, where it sets the ceiling.
        engine.send(Load(LoadProfile(model_path="/nonexistent/model.gguf", n_ctx=256)))
        assert engine.recv(timeout=120) is not None
        limits = Path(f"/proc/{engine.pid}/limits").read_text().splitlines()
        data = next(line for line in limits if line.startswith("Max data size"))
        assert data.split()[3] == str(expected), (data, units.size(expected))
        assert engine.ceiling == expected
    finally:
        engine.stop()


def test_a_bad_value_is_one_sentence() -> None:
    result = kvstudio(*_RUN, env={ENV: "lots"})
    assert_bad_input(result, f"{ENV} must be a size such as 8GiB or 512MiB, or 'off'")
