"""listen_to_engine: a page names its handlers after the engine's events and hears them, in the
engine's order, through the real EngineClient (the fake engine process underneath); a handler
name that matches no event is refused instead of silently never being called."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QObject

from app.engine.messages import Generate, Loaded
from app.load.profile import LoadProfile
from app.services.engine_client import EngineClient
from app.services.engine_events import HANDLERS, listen_to_engine
from tests.fake_engine import FakeEngine
from tests.waits import HANG_GUARD_MS


class Listener(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[str] = []

    def on_engine_loading_started(self, profile: LoadProfile) -> None:
        self.heard.append(f"loading {profile.n_ctx}")

    def on_engine_model_loaded(self, loaded: Loaded) -> None:
        self.heard.append(f"loaded {loaded.n_ctx}")

    def on_engine_token(self, token: object) -> None:
        self.heard.append("token")

    def on_engine_busy(self, busy: bool) -> None:
        self.heard.append(f"busy {busy}")


def test_a_listener_hears_what_the_engine_client_signals_in_its_order(qtbot) -> None:
    client = EngineClient(process_factory=lambda: FakeEngine(reply="a b"))
    listener = Listener()
    listen_to_engine(client, listener)
    signalled: list[str] = []  # the same four events, connected by hand to the raw signals
    client.loading_started.connect(lambda profile: signalled.append(f"loading {profile.n_ctx}"))
    client.model_loaded.connect(lambda loaded: signalled.append(f"loaded {loaded.n_ctx}"))
    client.token_received.connect(lambda _token: signalled.append("token"))
    client.busy_changed.connect(lambda busy: signalled.append(f"busy {busy}"))
    try:
        with qtbot.waitSignal(client.model_loaded, timeout=HANG_GUARD_MS):
            client.load(LoadProfile("/models/tiny.gguf", n_ctx=1024))
        with qtbot.waitSignal(client.reply_finished, timeout=HANG_GUARD_MS):
            client.generate(Generate("r1", prompt="Say:"))
    finally:
        client.shutdown()
    assert listener.heard == signalled
    assert listener.heard.count("token") == 2 and "loaded 1024" in listener.heard


def test_a_handler_named_for_no_event_is_refused() -> None:
    class Misnamed(Listener):
        def on_engine_reply_done(self, _finished: object) -> None: ...

    client = EngineClient(process_factory=FakeEngine)
    try:
        with pytest.raises(TypeError, match="on_engine_reply_done"):
            listen_to_engine(client, Misnamed())
    finally:
        client.shutdown()


def test_every_handler_names_a_signal_of_the_engine_client() -> None:
    for signal in HANDLERS.values():
        assert hasattr(EngineClient, signal), signal
