"""Load, reply and unload five times in one running app (the real window, EngineClient and
engine process, the tiny random-weight model): every cycle replies, the same engine serves them
all, and neither process holds more open files or threads after the fifth cycle than after
the first. benchmarks/long_session.py is the 50-cycle soak with the memory bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.random_model import write_model
from tests.session_cycles import Cycle, LoadCycles
from tests.waits import HANG_GUARD_MS

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

CYCLES = 5


def test_five_load_reply_unload_cycles_leak_no_files_or_threads(
    qtbot, chat_app, tmp_path: Path, reliability
) -> None:
    model = write_model(tmp_path / "tiny-llama.gguf", 2, "small", None)
    cycles: list[Cycle] = []
    driver = LoadCycles(chat_app, str(model), CYCLES, max_tokens=16)
    driver.cycle_finished.connect(cycles.append)
    failures: list[str] = []
    driver.failed.connect(failures.append)
    with qtbot.waitSignals([driver.finished], timeout=HANG_GUARD_MS, raising=False) as done:
        driver.start()
    assert not failures, failures[0]
    assert done.signal_triggered, f"only {len(cycles)} of {CYCLES} cycles finished"

    assert [c.number for c in cycles] == list(range(1, CYCLES + 1))
    assert all(c.generated_tokens > 0 for c in cycles)
    assert len({c.engine_pid for c in cycles}) == 1  # one engine process the whole time
    first, last = cycles[0], cycles[-1]
    for name in ("gui", "engine"):
        before, after = getattr(first, name), getattr(last, name)
        assert after.fds <= before.fds, f"{name} open files grew: {before.fds} -> {after.fds}"
        assert after.threads <= before.threads, (
            f"{name} threads grew: {before.threads} -> {after.threads}"
        )

    area = "Long sessions"
    reliability.record(area, "load-reply-unload cycles in one app session (test, tiny model)", 5)
    reliability.record(
        area,
        "test: GUI open files / threads after cycle 1 -> 5",
        f"{first.gui.fds} / {first.gui.threads} -> {last.gui.fds} / {last.gui.threads}",
    )
    reliability.record(
        area,
        "test: engine open files / threads after cycle 1 -> 5",
        f"{first.engine.fds} / {first.engine.threads} -> {last.engine.fds} / {last.engine.threads}",
    )
