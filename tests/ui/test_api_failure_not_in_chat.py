"""A request of the local server that fails is not the chat's reply: the chat says nothing about
it (it used to show "The reply failed: ..." for any request on the shared engine), while the
chat's own failed reply is still said."""

from __future__ import annotations

from app.engine.messages import ChatMessage, Generate
from tests.waits import HANG_GUARD_MS


def test_a_failed_api_request_is_not_reported_as_the_chats_reply(qtbot, chat_app) -> None:
    engine, page = chat_app.engine, chat_app.window.chat
    warnings: list[str] = []
    chat_app.bridge.warning_reported.connect(warnings.append)
    with qtbot.waitSignal(engine.request_failed, timeout=HANG_GUARD_MS) as failed:
        # What the server does for an API request (no model is loaded, so it fails).
        engine.generate(Generate("api-1", messages=(ChatMessage("user", "hi"),)))
    assert failed.args[0] == "api-1"
    assert warnings == []

    # The chat's own reply, asked of its session (the page no longer sends without a model):
    # its failure is said.
    page.session.new_conversation()
    with qtbot.waitSignal(page.session.reply_failed, timeout=HANG_GUARD_MS):
        assert page.session.send("hello?")
    assert warnings == ["The reply failed: No model is loaded: load a model first."]
