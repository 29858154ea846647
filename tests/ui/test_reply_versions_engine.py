"""Reply versions with the real engine and the starter model: the Regenerate button under the
reply, twice, keeps three versions; ‹ and › switch the text shown; a restart of the app on the
same data folder keeps all three and the one shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QRect, Qt

from app.ui.chat.message_actions import NEXT, PREVIOUS, REGENERATE
from tests.ui.conftest import REPLY_TIMEOUT_MS

pytestmark = pytest.mark.slow


def _button(page, row: int, name: str) -> QRect:
    page.view.executeDelayedItemsLayout()
    index = page.session.model.index(row)
    rect = page.view.delegate.button_rect(page.view.visualRect(index), index, name)
    assert rect is not None, name
    return rect


def _click(qtbot, page, rect: QRect) -> None:
    qtbot.mouseClick(page.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def _switch(qtbot, page, name: str) -> None:
    # The click emits at once; the ceiling only keeps a broken click from hanging the run.
    with qtbot.waitSignal(page.view.delegate.version_requested, timeout=REPLY_TIMEOUT_MS):
        _click(qtbot, page, _button(page, 1, name))


def test_regenerate_twice_keeps_versions_to_switch_and_a_restart_keeps_them(
    qtbot, chat_data_dir: Path, loaded_chat_app
) -> None:
    from app.gui import build_app
    from app.platform.paths import data_dir

    app = loaded_chat_app
    page = app.window.chat
    page.session.new_conversation()
    texts = []
    for seed in (1, 2, 3):
        # A different seed each time, so each version says something else.
        page.session.set_conversation_settings(
            "", {"max_tokens": 10, "temperature": 1.2, "seed": seed}
        )
        with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS):
            if seed == 1:
                page.send("Once upon a time")
            else:
                _click(qtbot, page, _button(page, 1, REGENERATE))
        texts.append(page.session.model.message_at(1).content)
    model = page.session.model
    assert model.rowCount() == 2  # one question, one reply: versions, not new rows
    assert (model.message_at(1).version, model.message_at(1).versions) == (3, 3)
    assert all(texts) and len(set(texts)) == 3

    _switch(qtbot, page, PREVIOUS)
    assert model.message_at(1).content == texts[1]
    _switch(qtbot, page, PREVIOUS)
    assert (model.message_at(1).content, model.message_at(1).version) == (texts[0], 1)
    _switch(qtbot, page, NEXT)
    assert (model.message_at(1).content, model.message_at(1).version) == (texts[1], 2)
    conversation_id = page.session.conversation.id
    app.window.close()
    app.close()

    again = build_app(data_dir())
    try:
        again.window.show()
        chat = again.window.chat
        chat.open_conversation(conversation_id)
        shown = chat.session.model.message_at(1)
        assert (shown.content, shown.version, shown.versions) == (texts[1], 2, 3)
        _switch(qtbot, chat, NEXT)
        assert chat.session.model.message_at(1).content == texts[2]
        assert [v.content for v in again.store.reply_versions(shown.id)] == texts
    finally:
        again.window.close()
        again.close()
