"""The chat by keyboard alone (QTest key events, focusWidget() checked after each): Tab
reaches every message and each of its buttons (code block Copy, Copy, Edit, the version
arrows, Regenerate) in order and then leaves the conversation; Enter presses the button under
the focus; Edit turns the message into an editor in its own bubble (Enter or Ctrl+Enter
resends, Esc or Cancel leaves it); F1 and ? open the shortcuts sheet;
the text-continuation box lets the focus go with Ctrl+Tab and Esc."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.chats.records import DONE
from app.chats.store import ChatStore
from app.ui.chat.message_actions import COPY, EDIT, NEXT, PREVIOUS, REGENERATE
from app.ui.chat.shortcuts import SHEET, ShortcutsSheet

QUESTION = "How do I print in Python?"
ANSWER = "Use print:\n\n```python\nprint('hello')\n```\n\nThat is all."
OTHER_ANSWER = "Call the print function."


@pytest.fixture
def chat_window(qtbot, chat_data_dir: Path) -> Iterator:
    """The app on a conversation of a question and a reply with two versions (the second,
    with a code block, shown)."""
    from app.gui import build_app

    store = ChatStore(chat_data_dir / "conversations.sqlite3")
    conversation = store.create_conversation()
    store.add_message(conversation.id, "user", QUESTION)
    reply = store.add_message(conversation.id, "assistant", OTHER_ANSWER)
    store.start_new_version(reply.id, None)
    store.finish_message(reply.id, ANSWER, DONE)
    store.close()
    parts = build_app(chat_data_dir)
    parts.window.resize(1200, 800)
    parts.window.show()
    parts.window.activateWindow()
    qtbot.waitExposed(parts.window)
    yield parts
    parts.window.close()
    parts.close()


def _press(qtbot, key, modifiers=Qt.KeyboardModifier.NoModifier):
    widget = QApplication.focusWidget()
    assert widget is not None
    qtbot.keyClick(widget, key, modifiers)
    return QApplication.focusWidget()


def test_tab_reaches_every_message_and_button_and_enter_presses_it(qtbot, chat_window) -> None:
    page = chat_window.window.chat
    view = page.view
    assert page.session.model.rowCount() == 2
    user, reply = page.session.model.messages()
    page.settings_toggle.setFocus(Qt.FocusReason.OtherFocusReason)  # where Tab starts
    assert QApplication.focusWidget() is page.settings_toggle

    expected = [
        (user.id, ""),
        (user.id, COPY),
        (user.id, EDIT),
        (reply.id, ""),
        (reply.id, "code:0"),
        (reply.id, PREVIOUS),  # ‹ 2 / 2 ›: only ‹ can be pressed
        (reply.id, COPY),
        (reply.id, REGENERATE),
    ]
    for stop in expected:
        assert _press(qtbot, Qt.Key.Key_Tab) is view
        assert view.focus_stop == stop
        assert view.delegate.focus == stop  # drawn with a ring
    assert _press(qtbot, Qt.Key.Key_Tab) is page.input  # out of the conversation
    for stop in reversed(expected[-3:]):
        assert _press(qtbot, Qt.Key.Key_Backtab) is view
        assert view.focus_stop == stop
    assert view.focus_stop == (reply.id, PREVIOUS)

    assert _press(qtbot, Qt.Key.Key_Up) is view and view.focus_stop == (user.id, "")
    assert _press(qtbot, Qt.Key.Key_Down) is view and view.focus_stop == (reply.id, "")
    assert _press(qtbot, Qt.Key.Key_Tab) is view and view.focus_stop == (reply.id, "code:0")
    assert _press(qtbot, Qt.Key.Key_Return) is view
    assert QGuiApplication.clipboard().text() == "print('hello')"

    assert _press(qtbot, Qt.Key.Key_Tab) is view and view.focus_stop == (reply.id, PREVIOUS)
    assert _press(qtbot, Qt.Key.Key_Space) is view
    shown = page.session.model.message_at(1)
    assert (shown.version, shown.content) == (1, OTHER_ANSWER)
    assert view.focus_stop == (reply.id, "")  # ‹ cannot be pressed on version 1: it went
    assert _press(qtbot, Qt.Key.Key_Tab) is view and view.focus_stop == (reply.id, NEXT)

    assert _press(qtbot, Qt.Key.Key_Tab) is view and view.focus_stop == (reply.id, COPY)
    assert _press(qtbot, Qt.Key.Key_Return) is view
    assert QGuiApplication.clipboard().text() == OTHER_ANSWER


def _editor_of(view):
    """The message editor open in `view` (read afresh: after an earlier check that none was
    open, a type checker would take `view.editor` for None from there on)."""
    editor = view.editor
    assert editor is not None, "no message is being edited"
    return editor


def _tab_to_edit(qtbot, page) -> None:
    """From the settings toggle, Tab to the first message's Edit button."""
    user = page.session.model.message_at(0)
    page.settings_toggle.setFocus(Qt.FocusReason.OtherFocusReason)
    for _ in range(3):
        _press(qtbot, Qt.Key.Key_Tab)
    assert page.view.focus_stop == (user.id, EDIT)


def test_edit_by_keyboard_opens_an_editor_in_the_message_and_esc_leaves_it(
    qtbot, chat_window
) -> None:
    page = chat_window.window.chat
    view = page.view
    user = page.session.model.message_at(0)
    qtbot.keyClicks(page.input, "a draft")  # the input keeps its own text throughout
    _tab_to_edit(qtbot, page)
    editor_box = _press(qtbot, Qt.Key.Key_Return)
    editor = view.editor
    assert editor is not None and editor_box is editor.text_box  # the focus is in it
    assert editor.text_box.toPlainText() == QUESTION
    assert view.delegate.editing_id == user.id  # its bubble is drawn highlighted round it
    # In place: the editor is inside the edited message's row, not in the input below.
    assert editor.parent() is view.viewport() and editor.isVisible()
    row = view.visualRect(page.session.model.index(0))
    assert row.contains(editor.geometry())
    assert page.input.toPlainText() == "a draft"
    # Tab goes on to the editor's Cancel and Resend; Shift+Tab back to the text.
    assert _press(qtbot, Qt.Key.Key_Tab) is editor.cancel_button
    assert _press(qtbot, Qt.Key.Key_Tab) is editor.resend_button
    assert _press(qtbot, Qt.Key.Key_Backtab) is editor.cancel_button
    assert _press(qtbot, Qt.Key.Key_Backtab) is editor.text_box
    qtbot.keyClicks(editor.text_box, " Or not?")
    # Esc: the message as it was, the keyboard back on its Edit button.
    assert _press(qtbot, Qt.Key.Key_Escape) is view
    assert view.editor is None and view.delegate.editing_id is None
    assert view.focus_stop == (user.id, EDIT)
    assert page.session.model.message_at(0).content == QUESTION
    assert page.input.toPlainText() == "a draft"
    # Again, and Cancel pressed with Space leaves it the same way.
    focused = _press(qtbot, Qt.Key.Key_Return)
    reopened = _editor_of(view)
    assert focused is reopened.text_box
    assert _press(qtbot, Qt.Key.Key_Tab) is reopened.cancel_button
    assert _press(qtbot, Qt.Key.Key_Space) is view and view.editor is None


@pytest.fixture
def fake_engine_chat(qtbot, chat_data_dir: Path) -> Iterator:
    """The app on the same conversation with a loaded model that answers at once (the fake
    engine: only the engine's messages matter to an edit)."""
    from app.gui import build_app
    from app.load.profile import LoadProfile
    from app.services.engine_client import EngineClient
    from tests.fake_engine import FakeEngine
    from tests.waits import HANG_GUARD_MS

    store = ChatStore(chat_data_dir / "conversations.sqlite3")
    conversation = store.create_conversation()
    store.add_message(conversation.id, "user", QUESTION)
    store.add_message(conversation.id, "assistant", ANSWER, status=DONE)
    store.add_message(conversation.id, "user", "And in C?")
    store.add_message(conversation.id, "assistant", OTHER_ANSWER, status=DONE)
    store.close()
    engine = EngineClient(process_factory=lambda: FakeEngine(EDITED_REPLY))
    parts = build_app(chat_data_dir, engine=engine)
    parts.window.resize(1024, 640)
    parts.window.show()
    parts.window.activateWindow()
    qtbot.waitExposed(parts.window)
    with qtbot.waitSignal(engine.model_loaded, timeout=HANG_GUARD_MS):
        engine.load(LoadProfile(model_path=str(chat_data_dir / "chat.gguf")))
    yield parts
    parts.window.close()
    parts.close()


EDITED_REPLY = "Use console.log."


def test_edit_and_resend_by_keyboard_replaces_the_message_and_what_follows(
    qtbot, fake_engine_chat
) -> None:
    from tests.waits import HANG_GUARD_MS

    page = fake_engine_chat.window.chat
    engine = fake_engine_chat.engine
    assert page.session.model.rowCount() == 4
    _tab_to_edit(qtbot, page)
    box = _press(qtbot, Qt.Key.Key_Return)
    assert box is page.view.editor.text_box
    qtbot.keyClick(box, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(box, "How do I print")
    height = page.view.editor.height()
    for _ in range(3):  # Shift+Enter: new lines, and the message's row grows with them
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "in JavaScript?")
    assert box.toPlainText() == "How do I print\n\n\nin JavaScript?"
    assert page.view.editor.height() > height
    row = page.view.visualRect(page.session.model.index(0))
    assert row.contains(page.view.editor.geometry())
    with qtbot.waitSignal(engine.reply_finished, timeout=HANG_GUARD_MS):
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    messages = page.session.model.messages()
    assert [(m.role, m.content) for m in messages] == [
        ("user", "How do I print\n\n\nin JavaScript?"),
        ("assistant", EDITED_REPLY),
    ]
    stored = fake_engine_chat.store.messages(page.session.conversation.id)
    assert [m.content for m in stored] == [m.content for m in messages]
    assert page.view.editor is None and page.view.delegate.editing_id is None
    assert QApplication.focusWidget() is page.input  # the conversation goes on from there

    # Plain Enter resends too; an emptied editor resends nothing.
    _tab_to_edit(qtbot, page)
    box = _press(qtbot, Qt.Key.Key_Return)
    qtbot.keyClick(box, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(box, Qt.Key.Key_Delete)
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert page.view.editor is not None and not page.session.generating
    qtbot.keyClicks(box, "Print in Go?")
    with qtbot.waitSignal(engine.reply_finished, timeout=HANG_GUARD_MS):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    assert [m.content for m in page.session.model.messages()] == ["Print in Go?", EDITED_REPLY]


def test_f1_and_question_mark_open_the_shortcuts_sheet(qtbot, chat_window) -> None:
    window = chat_window.window
    window.chat.view.setFocus(Qt.FocusReason.OtherFocusReason)  # not a text box: ? is a key
    for key in (Qt.Key.Key_F1, Qt.Key.Key_Question):
        _press(qtbot, key)
        sheet = window.chat_menus.sheet
        assert isinstance(sheet, ShortcutsSheet)
        qtbot.waitUntil(sheet.isVisible, timeout=5000)
        texts = {sheet.table.item(row, 0).text() for row in range(sheet.table.rowCount())}
        assert texts == {s.keys for s in SHEET}
        assert any("Esc" in s.keys and "Stop" in s.does for s in SHEET)
        qtbot.waitUntil(lambda sheet=sheet: QApplication.activeWindow() is sheet, timeout=5000)
        assert sheet.isAncestorOf(_press(qtbot, Qt.Key.Key_Escape)) or not sheet.isVisible()
        qtbot.waitUntil(lambda sheet=sheet: not sheet.isVisible(), timeout=5000)
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
        window.chat.view.setFocus(Qt.FocusReason.OtherFocusReason)
    # ? typed in the message box is a question mark, not the sheet
    window.chat.input.setFocus(Qt.FocusReason.OtherFocusReason)
    qtbot.keyClicks(window.chat.input, "why?")
    assert window.chat.input.toPlainText() == "why?"
    assert not window.chat_menus.sheet.isVisible()


def test_focus_leaves_the_text_continuation_box_by_ctrl_tab_and_esc(qtbot) -> None:
    from app.services.engine_client import EngineClient
    from app.ui.chat.completion_panel import CompletionPanel

    panel = CompletionPanel(EngineClient())  # the engine is never started here
    qtbot.addWidget(panel)
    panel.show()
    panel.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is panel, timeout=5000)
    panel.editor.setFocus(Qt.FocusReason.OtherFocusReason)
    assert _press(qtbot, Qt.Key.Key_Tab) is panel.editor  # Tab types a tab in the text
    assert panel.editor.toPlainText() == "\t"
    left = _press(qtbot, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert left is not panel.editor and left is not None
    assert _press(qtbot, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier) is panel.editor
    assert _press(qtbot, Qt.Key.Key_Escape) not in (panel.editor, None)
    assert panel.editor.toPlainText() == "\t"
