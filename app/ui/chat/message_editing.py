"""Editing one of the user's messages: its text in the input, the message itself highlighted
in the conversation (the delegate draws it so) and the banner saying what Enter and Esc do."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel

from app.chats.store import ChatStore
from app.ui.chat.input_box import InputBox
from app.ui.chat.message_view import MessageView


class MessageEditing(QObject):
    def __init__(
        self, store: ChatStore, input_box: InputBox, banner: QLabel, view: MessageView
    ) -> None:
        super().__init__(view)
        self.store, self.input, self.banner, self.view = store, input_box, banner, view
        self.message_id: int | None = None  # the message being edited

    def start(self, message_id: int) -> None:
        self.message_id = message_id
        self.input.setPlainText(self.store.message(message_id).content)
        self.input.setFocus()
        self.banner.show()
        self._show(message_id)

    def take(self) -> int | None:
        """The message edited, now that its new text is sent (editing ends, the input is
        cleared by the send)."""
        message_id = self.message_id
        self._end()
        return message_id

    def cancel(self) -> None:
        """Leave the message as it was; the input is emptied of its text."""
        if self.message_id is not None:
            self._end()
            self.input.clear()

    def _end(self) -> None:
        self.message_id = None
        self.banner.hide()
        self._show(None)

    def _show(self, message_id: int | None) -> None:
        self.view.delegate.editing_id = message_id
        messages = self.view.messages
        row = messages.row_of(message_id) if message_id is not None else None
        if row is not None:
            self.view.scrollTo(messages.index(row))
        self.view.viewport().update()
