"""What a user does with a message, in the real window (no engine needed): copy one code
block with its own button, see the message buttons without hovering, switch a reply's
versions, export a conversation through its menu."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QFileDialog

from app.chats.records import DONE, STREAMING
from app.ui.chat.message_actions import COPY, EDIT, NEXT, PREVIOUS, REGENERATE
from tests.waits import HANG_GUARD_MS

FIRST = "print('first block')"
SECOND = "def greet(name):\n\treturn f'<b>Hello</b> {name}'  # tab kept\n\n    # end"
REPLY = f"Two blocks:\n\n```python\n{FIRST}\n```\n\nAnd the function:\n\n```python\n{SECOND}\n```\n"


def _open(app, replies: list[str]):
    """A conversation with a question and a reply with `replies` as its versions (the last
    shown), opened in the chat page."""
    page = app.window.chat
    store = app.store
    conversation = page.session.new_conversation()
    store.add_message(conversation.id, "user", "Show me some code")
    reply = store.add_message(conversation.id, "assistant", "", STREAMING, model="/m/tiny.gguf")
    for n, text in enumerate(replies):
        if n:
            store.start_new_version(reply.id, "/m/tiny.gguf")
        store.finish_message(reply.id, text, DONE, generated_tokens=5)
    page.open_conversation(conversation.id)
    return page, reply.id


def _row_rect(page, row: int) -> QRect:
    page.view.executeDelayedItemsLayout()
    return page.view.visualRect(page.session.model.index(row))


def _click(qtbot, page, pos: QPoint) -> None:
    qtbot.mouseClick(page.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def _has_colour(image: QImage, area: QRect, colour: QColor, tolerance: int = 40) -> bool:
    for y in range(max(0, area.top()), min(image.height(), area.bottom() + 1)):
        for x in range(max(0, area.left()), min(image.width(), area.right() + 1)):
            pixel = image.pixelColor(x, y)
            if (
                abs(pixel.red() - colour.red())
                + abs(pixel.green() - colour.green())
                + abs(pixel.blue() - colour.blue())
                <= tolerance
            ):
                return True
    return False


def test_each_code_block_has_a_copy_button_that_copies_exactly_its_code(qtbot, chat_app) -> None:
    page, _reply = _open(chat_app, [REPLY])
    index = page.session.model.index(1)
    rect = _row_rect(page, 1)
    QApplication.clipboard().setText("something else")
    second = page.view.delegate.code_copy_rect(rect, index, 1)
    assert second is not None and page.view.viewport().rect().contains(second)
    with qtbot.waitSignal(page.view.delegate.code_copied, timeout=HANG_GUARD_MS):
        _click(qtbot, page, second.center())
    assert QApplication.clipboard().text() == SECOND  # the tab, the blank line, the indent
    first = page.view.delegate.code_copy_rect(rect, index, 0)
    assert first is not None
    _click(qtbot, page, first.center())
    assert QApplication.clipboard().text() == FIRST


@pytest.mark.slow
def test_code_is_highlighted_by_its_language(qtbot, chat_app) -> None:
    page, _reply = _open(chat_app, [REPLY])
    rect = _row_rect(page, 1)
    image = page.view.viewport().grab().toImage()
    code_area = QRect(rect.left(), rect.top(), rect.width(), rect.height())
    # pygments' default style: keywords green (#008000), function names blue (#0000ff)
    assert _has_colour(image, code_area, QColor("#008000"))
    assert _has_colour(image, code_area, QColor("#0000ff"))


def test_message_buttons_are_drawn_without_hovering(qtbot, chat_app) -> None:
    page, reply_id = _open(chat_app, [REPLY])
    page.view.viewport().setAttribute(Qt.WidgetAttribute.WA_UnderMouse, False)
    image = page.view.viewport().grab().toImage()
    delegate = page.view.delegate
    user_index, reply_index = page.session.model.index(0), page.session.model.index(1)
    buttons = {
        (0, COPY): delegate.button_rect(_row_rect(page, 0), user_index, COPY),
        (0, EDIT): delegate.button_rect(_row_rect(page, 0), user_index, EDIT),
        (1, COPY): delegate.button_rect(_row_rect(page, 1), reply_index, COPY),
        (1, REGENERATE): delegate.button_rect(_row_rect(page, 1), reply_index, REGENERATE),
    }
    for name, rect in buttons.items():
        assert rect is not None, name
        assert _has_colour(image, rect, QColor("#2f6fdb"), tolerance=90), name  # its label
    # Copy under the reply copies the whole reply.
    _click(qtbot, page, buttons[(1, COPY)].center())
    assert QApplication.clipboard().text() == chat_app.store.message(reply_id).content == REPLY


@pytest.mark.slow
def test_previous_and_next_switch_the_reply_shown(qtbot, chat_app) -> None:
    page, reply_id = _open(chat_app, ["First version", "Second version", "Third version"])
    model, delegate = page.session.model, page.view.delegate
    assert (model.message_at(1).version, model.message_at(1).versions) == (3, 3)
    assert delegate.button_rect(_row_rect(page, 1), model.index(1), NEXT) is not None
    previous = delegate.button_rect(_row_rect(page, 1), model.index(1), PREVIOUS)
    _click(qtbot, page, previous.center())
    assert model.message_at(1).content == "Second version"
    _click(qtbot, page, delegate.button_rect(_row_rect(page, 1), model.index(1), PREVIOUS).center())
    shown = model.message_at(1)
    assert (shown.content, shown.version, shown.versions) == ("First version", 1, 3)
    # The first version has no previous one: clicking its ‹ changes nothing.
    _click(qtbot, page, delegate.button_rect(_row_rect(page, 1), model.index(1), PREVIOUS).center())
    assert model.message_at(1).content == "First version"
    _click(qtbot, page, delegate.button_rect(_row_rect(page, 1), model.index(1), NEXT).center())
    assert model.message_at(1).content == "Second version"
    # What the next message's history reads, and what reopening shows.
    assert chat_app.store.message(reply_id).content == "Second version"
    page.open_conversation(page.session.conversation.id)
    assert (model.message_at(1).content, model.message_at(1).version) == ("Second version", 2)


def test_versions_of_other_heights_switch_click_after_click(qtbot, chat_app) -> None:
    """A version with more lines moves the buttons under it; the next click, at once, lands on
    the button where it is now drawn (no turn of the event loop between the clicks)."""
    page, _reply = _open(chat_app, ["One line.", "Three\n\nlines\n\nhere.", "One again."])
    model, delegate = page.session.model, page.view.delegate
    shown = []
    for name in (PREVIOUS, PREVIOUS, NEXT, NEXT):
        rect = delegate.button_rect(_row_rect(page, 1), model.index(1), name)
        assert rect is not None and page.view.indexAt(rect.center()).row() == 1, name
        _click(qtbot, page, rect.center())
        shown.append(model.message_at(1).version)
    assert shown == [2, 1, 2, 3]


def test_export_writes_markdown_and_json_from_the_conversation_menu(
    qtbot, chat_app, tmp_path: Path, monkeypatch
) -> None:
    secret = "hf_exportMustNeverHoldThisToken1234"
    monkeypatch.setenv("HF_TOKEN", secret)
    page, _reply = _open(chat_app, ["An early reply", REPLY])
    conversation_id = page.session.conversation.id
    chat_app.store.rename_conversation(conversation_id, "Code: a/b <test>")
    page.conversations.refresh()
    asked: list[str] = []

    def save_as(_parent, _caption, suggested, _filter):
        asked.append(suggested)
        return str(tmp_path / Path(suggested).name), _filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_as)
    menu = page.conversations.menu_for(conversation_id)
    actions = {a.text(): a for a in menu.actions() if a.text()}
    with qtbot.waitSignal(page.conversations.conversation_exported, timeout=HANG_GUARD_MS) as md:
        actions["Export as Markdown…"].trigger()
    with qtbot.waitSignal(page.conversations.conversation_exported, timeout=HANG_GUARD_MS) as js:
        actions["Export as JSON…"].trigger()

    assert [Path(a).name for a in asked] == ["Code a b test.md", "Code a b test.json"]
    assert chat_app.window.statusBar().currentMessage() == f"Chat exported to {js.args[0]}."
    markdown = Path(md.args[0]).read_text(encoding="utf-8")
    assert markdown.startswith("# Code: a/b <test>\n")
    assert markdown.index("Show me some code") < markdown.index(REPLY.rstrip())
    data = json.loads(Path(js.args[0]).read_text(encoding="utf-8"))
    assert [(m["role"], m["text"], m["model"]) for m in data["messages"]] == [
        ("user", "Show me some code", None),
        ("assistant", REPLY, "/m/tiny.gguf"),
    ]
    assert all(m["time"] for m in data["messages"])
    assert [v["text"] for v in data["messages"][1]["all_versions"]] == ["An early reply", REPLY]
    assert secret not in markdown and secret not in json.dumps(data)
