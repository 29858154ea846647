"""The status bar while a load is checked, and a load that fails: the status bar says what it
is doing from the moment a model is chosen, and the failure is a message box the user
dismisses, holding the whole sentence, with no half sentence left in the status bar."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from tests.waits import HANG_GUARD_MS


def test_a_load_that_fails_is_a_dismissable_message_not_a_status_line(
    qtbot, chat_app, tmp_path: Path
) -> None:
    window = chat_app.window
    page = window.chat
    not_a_model = tmp_path / "holiday photos from the summer of 2024 (edited).gguf"
    not_a_model.write_bytes(b"these are not the bytes of a GGUF model file" * 10)

    with qtbot.waitSignal(page.model_resolve_failed, timeout=HANG_GUARD_MS) as failed:
        page.load_model(str(not_a_model))
        assert page.status.busy_bar.isVisible()  # said at once, before the check ends
        assert page.status.busy_label.text().startswith("Checking holiday photos")
    box = window.last_error_box
    assert isinstance(box, QMessageBox) and box.isVisible()
    assert box.text() == failed.args[0]  # the whole sentence
    assert window.statusBar().currentMessage() == ""  # no sentence cut off at the edge
    assert not page.status.busy_bar.isVisible()
    assert page.status.model_label.text() == "No model loaded"
    box.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=HANG_GUARD_MS)
