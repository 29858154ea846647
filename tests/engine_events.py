"""Waiting on a real engine process's events: the tests go on the moment the event they wait for
comes; the timeout only ends a test whose event never comes (a hang guard, tests/waits.py)."""

from __future__ import annotations

import time
from pathlib import Path

from app.engine.messages import Failed, Load, Loaded
from app.engine.process import EngineProcess
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from tests.engine_threads import ENGINE_THREADS
from tests.waits import ENGINE_HANG_GUARD_S


def next_event(
    proc: EngineProcess, kinds: tuple[type, ...], timeout: float = ENGINE_HANG_GUARD_S
) -> tuple[list[object], object]:
    """Events until the first of `kinds`, returned with the events before it."""
    seen: list[object] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = proc.recv(timeout=deadline - time.monotonic())
        if isinstance(event, kinds):
            return seen, event
        if event is not None:
            seen.append(event)
    raise AssertionError(f"no {kinds} within {timeout:.0f} s; got {seen[-5:]}")


def expect_event(proc: EngineProcess, kinds: tuple[type, ...]) -> object:
    """The first of `kinds`; an engine that answers Failed first fails the test with its words."""
    _, event = next_event(proc, (*kinds, Failed))
    assert not isinstance(event, Failed) or Failed in kinds, event
    return event


def load_answer(proc: EngineProcess, path: Path) -> Loaded | Failed:
    """The engine's answer to loading `path` (small context, f16/f16): Loaded or Failed."""
    profile = LoadProfile(
        model_path=str(path), n_ctx=256, kv=KvMode.of("f16", "f16"), n_threads=ENGINE_THREADS
    )
    proc.send(Load(profile))
    _, answer = next_event(proc, (Loaded, Failed))
    assert isinstance(answer, (Loaded, Failed))
    return answer
