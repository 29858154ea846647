"""EngineClient's side of the engine's messages, with the fake engine (tests/fake_engine.py):
what a UI test that needs only the messages gets, in the order the real engine sends them."""

from __future__ import annotations

import pytest

from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")

from app.engine.messages import Generate
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from app.services.engine_client import EngineClient
from tests.fake_engine import FakeEngine

WAIT = HANG_GUARD_MS


def test_load_then_a_reply_streams_in_order(qtbot) -> None:
    engine = FakeEngine(reply="one two three")
    client = EngineClient(process_factory=lambda: engine)
    seen: list[str] = []
    client.prompt_started.connect(lambda _e: seen.append("prompt"))
    client.token_received.connect(lambda token: seen.append(token.text))
    try:
        with qtbot.waitSignal(client.model_loaded, timeout=WAIT) as loaded:
            client.load(
                LoadProfile(
                    model_path="/models/tiny.gguf", n_ctx=1024, kv=KvMode.parse("q8_0/q8_0")
                )
            )
        assert loaded.args[0].options.kv.v.name == "q8_0" and client.loaded is loaded.args[0]
        with qtbot.waitSignal(client.reply_finished, timeout=WAIT) as finished:
            client.generate(Generate("r1", prompt="Count:"))
        assert seen == ["prompt", "one", " two", " three"]
        assert finished.args[0].text == "one two three" and not client.busy
    finally:
        client.shutdown()
