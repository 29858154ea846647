"""Confirmation boxes quote names the user did not write (a chat's title is its first message,
a model's name is its file's): they show them literally, never as HTML (issue 11: plain text,
never rich text). QMessageBox.question guesses rich text from a `<b>` in its text."""

from __future__ import annotations

from PySide6.QtGui import Qt, QTextDocument
from PySide6.QtWidgets import QMessageBox

HOSTILE = "<b>bold</b><img src=x.png> \x1b[2J"


def _shown_text(text: str) -> str:
    """What a message box displays for `text` (it renders it as rich text when it looks so)."""
    document = QTextDocument()
    if Qt.mightBeRichText(text):
        document.setHtml(text)
    else:
        document.setPlainText(text)
    return document.toPlainText()


def test_deleting_a_chat_quotes_its_title_literally(qtbot, chat_app, monkeypatch, reliability):
    page = chat_app.window.chat
    page.session.new_conversation()
    conversation = page.session.conversation
    page.session.rename_conversation(conversation.id, HOSTILE)
    asked: list[str] = []

    def question(_parent, _title, text, *_args, **_kw):
        asked.append(text)
        return QMessageBox.StandardButton.Cancel

    monkeypatch.setattr(QMessageBox, "question", question)
    page.conversations.ask_delete(conversation.id)
    shown = _shown_text(asked[0])
    assert "<b>bold</b><img src=x.png>" in shown  # the tags as text, not bold and an image
    assert "\x1b" not in shown
    reliability.record(
        "Templates and text from files", "confirmation boxes quoting a name", "literal text"
    )
