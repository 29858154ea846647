"""The load dialog says what a user needs, no more (#25 item 5): its Workers section is one
closed line unless workers are set or the user opens it, and loading goes by one word per
situation: "Load" for another model, "Reload" for the one loaded now, in the dialog's title, on
its button, in its advice, in the refusal's sentence and on the refusal box's "... anyway"
button."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt

from app.kv.fit import memory_need
from app.load.load_check import gpu_build
from app.load.load_choices import remember_choice
from app.models.gguf_read import read_gguf_header
from app.platform.probes import FREE_MEMORY_ENV
from tests.ui.test_load_dialog import fake_app, open_from_menu
from tests.waits import HANG_GUARD_MS

LARGE_CTX = 16384


def test_the_workers_section_is_closed_unless_used(qtbot, chat_data_dir) -> None:
    parts, _engine = fake_app(chat_data_dir)
    try:
        page = parts.window.chat
        dialog = open_from_menu(qtbot, page, "Starter model")
        box = dialog.workers_box
        assert box.section.toggle.isVisible() and not box.section.opened
        assert not box.address.isVisibleTo(dialog) and not box.add_button.isVisibleTo(dialog)
        closed_height = dialog.sizeHint().height()
        box.section.toggle.setFocus()
        qtbot.keyClick(box.section.toggle, Qt.Key.Key_Space)  # the user opens it
        assert box.section.opened and box.address.isVisible() and box.add_button.isVisible()
        assert dialog.sizeHint().height() > closed_height + box.address.height()
        path = dialog.facts.model_path
        dialog.reject()

        # A model remembered with workers: its dialog opens with them shown.
        choice = replace(dialog.chosen(), model_path=path, rpc_workers=("127.0.0.1:50052",))
        remember_choice(chat_data_dir, choice)
        dialog = open_from_menu(qtbot, page, "Starter model")
        assert dialog.workers_box.section.opened
        assert dialog.workers_box.list.isVisible() and dialog.workers_box.workers == (
            "127.0.0.1:50052",
        )
        dialog.reject()
    finally:
        parts.window.close()
        parts.close()


def _refusal_words(qtbot, page, dialog) -> tuple[str, str, list[str]]:
    """The dialog's button, its advice at LARGE_CTX, and the refusal box's sentence and
    buttons once the button is pressed (the box is then cancelled)."""
    with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):
        dialog.n_ctx.setValue(LARGE_CTX)
    button, advice = dialog.load_button.text(), dialog.fit_label.text()
    dialog.load_button.click()
    qtbot.waitUntil(lambda: page.load_refusal is not None, timeout=HANG_GUARD_MS)
    box = page.load_refusal
    sentence = box.text()
    buttons = [b.text().replace("&", "") for b in box.buttons()]
    box.reject()
    qtbot.waitUntil(lambda: page.load_refusal is None, timeout=HANG_GUARD_MS)
    return button, advice + "\n" + sentence, buttons


def test_load_and_reload_are_one_word_each_everywhere(
    qtbot, chat_data_dir, starter_model_path, monkeypatch
) -> None:
    header = read_gguf_header(starter_model_path)
    size = starter_model_path.stat().st_size
    need = memory_need(header, LARGE_CTX, "q8_0/f16", file_size=size, on_gpu=gpu_build())
    monkeypatch.setenv(FREE_MEMORY_ENV, str(need.total_bytes - 1))  # LARGE_CTX: 1 byte short
    parts, _engine = fake_app(chat_data_dir)
    try:
        page = parts.window.chat
        dialog = open_from_menu(qtbot, page, "Starter model")
        assert dialog.windowTitle() == "Load a model"
        button, words, buttons = _refusal_words(qtbot, page, dialog)
        assert button == "Load"
        assert "press Load and choose Load anyway." in words
        assert words.endswith("or choose Load anyway.") and "Load anyway" in buttons
        assert "Reload" not in words and "Reload anyway" not in buttons

        dialog = open_from_menu(qtbot, page, "Starter model")
        dialog.n_ctx.setValue(2048)
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=HANG_GUARD_MS):
            dialog.load_button.click()
        dialog = open_from_menu(qtbot, page, "Load options")  # the loaded model's dialog
        assert dialog.windowTitle() == "Reload the model"
        button, words, buttons = _refusal_words(qtbot, page, dialog)
        assert button == "Reload"
        assert "press Reload and choose Reload anyway." in words
        assert words.endswith("or choose Reload anyway.") and "Reload anyway" in buttons
        assert "Load anyway" not in buttons and "press Load" not in words
    finally:
        parts.window.close()
        parts.close()
