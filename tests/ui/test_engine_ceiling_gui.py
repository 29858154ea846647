"""A model past the engine's memory ceiling, loaded from the chat window offscreen with the real
engine: the window says so in one sentence naming the ceiling and stays up, ready for the next
message."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.platform.memory_ceiling import ENV
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

SAID = (
    "The model needed more memory than the engine's ceiling of 300.0 MiB; a smaller context "
    f"or model fits, or set {ENV} to raise the ceiling."
)


@pytest.fixture
def small_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "300MiB")  # read by the engine the window starts


def test_a_load_past_the_ceiling_is_a_sentence_and_the_window_stays_up(
    qtbot, small_ceiling, chat_app, starter_model_path
) -> None:
    page = chat_app.window.chat
    with qtbot.waitSignal(chat_app.engine.load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        page.offer_button.click()
    assert failed.args[0].startswith(SAID)
    qtbot.waitUntil(lambda: chat_app.window.last_error_box is not None, timeout=HANG_GUARD_MS)
    box = chat_app.window.last_error_box
    assert box.text().startswith(f"Could not load the model: {SAID}")
    box.accept()
    assert chat_app.window.isVisible()
    # The window still answers: a message now says no model is loaded, in the conversation.
    with qtbot.waitSignal(page.session.reply_failed, timeout=HANG_GUARD_MS):
        qtbot.keyClicks(page.input, "Hello?")
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert page.session.model.messages()[-1].error == "No model is loaded: load a model first."
