"""A model past the engine's memory ceiling, loaded from the chat window offscreen with the real
engine: the window says so in one sentence naming the ceiling and stays up; a message typed
then is kept in the input, and the window says no model is loaded."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.platform.memory_ceiling import ENV
from app.ui.chat.chat_page import NO_MODEL_TO_SEND
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
    # The window still answers: Send says no model is loaded, and a message typed now is kept
    # in the input (not sent to fail) while the status bar says why.
    assert not page.send_button.isEnabled() and page.send_button.toolTip() == NO_MODEL_TO_SEND
    with qtbot.waitSignal(chat_app.bridge.info_reported, timeout=HANG_GUARD_MS) as said:
        qtbot.keyClicks(page.input, "Hello?")
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert said.args[0] == NO_MODEL_TO_SEND
    assert chat_app.window.statusBar().currentMessage() == NO_MODEL_TO_SEND
    assert page.input.toPlainText() == "Hello?" and page.session.model.messages() == []
