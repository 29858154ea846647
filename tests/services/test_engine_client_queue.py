"""EngineClient runs replies one at a time in the order asked for (the chat's and the local
server's share it): a reply asked for while one runs waits instead of stopping it, and one
stopped while it waits ends 'cancelled' without reaching the engine."""

from __future__ import annotations

import pytest

from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")

from app.engine.messages import Generate
from app.load.profile import LoadProfile
from app.services.engine_client import EngineClient
from tests.fake_engine import FakeEngine

WAIT = HANG_GUARD_MS


def test_replies_wait_their_turn_and_a_waiting_one_can_be_stopped(qtbot) -> None:
    engine = FakeEngine(reply="one two")
    client = EngineClient(process_factory=lambda: engine)
    ended: list[tuple[str, str]] = []
    client.reply_finished.connect(lambda f: ended.append((f.request_id, f.stop_reason)))
    try:
        with qtbot.waitSignal(client.model_loaded, timeout=WAIT):
            client.load(LoadProfile(model_path="/models/tiny.gguf"))
        with qtbot.waitSignal(
            client.reply_finished, timeout=WAIT, check_params_cb=lambda f: f.request_id == "r3"
        ):
            for request_id in ("r1", "r2", "r3"):
                client.generate(Generate(request_id, prompt="Count:"))
            client.stop("r2")
        assert ended[0] == ("r2", "cancelled")  # at once, while r1 still runs
        assert [rid for rid, reason in ended[1:] if reason != "cancelled"] == ["r1", "r3"]
        sent = [c.request_id for c in engine.sent if isinstance(c, Generate)]
        assert sent == ["r1", "r3"]
    finally:
        client.shutdown()


def test_a_failure_names_its_request(qtbot) -> None:
    client = EngineClient(process_factory=FakeEngine)
    try:
        with qtbot.waitSignal(client.request_failed, timeout=WAIT) as failed:
            client.generate(Generate("r9", prompt="x"))
        assert failed.args == ["r9", "No model is loaded: load a model first."]
    finally:
        client.shutdown()
