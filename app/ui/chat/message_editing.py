"""Editing one of the user's messages in place: the message's bubble turns into an editor of
its text (the view places it, message_view.py), highlighted; Enter resends the new text, which
replaces that message and everything after it, and Esc leaves the message as it was, with the
keyboard back on the message's Edit button. The input below keeps whatever was typed there."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication

from app.chats.store import ChatStore
from app.ui.chat.message_actions import EDIT
from app.ui.chat.message_editor import MessageEditor
from app.ui.chat.message_view import MessageView


class MessageEditing(QObject):
    """Signals:
    resend_requested(int, str): the edited message's id and its new text (Enter or Resend).
    """

    resend_requested = Signal(int, str)

    def __init__(self, store: ChatStore, view: MessageView) -> None:
        super().__init__(view)
        self.store, self.view = store, view

    @property
    def message_id(self) -> int | None:
        """The message being edited, if any."""
        return self.view.delegate.editing_id if self.view.editor is not None else None

    @property
    def editor(self) -> MessageEditor | None:
        return self.view.editor

    def start(self, message_id: int) -> None:
        editor = self.view.open_editor(message_id, self.store.message(message_id).content)
        if editor is not None:
            editor.submitted.connect(lambda text: self.resend_requested.emit(message_id, text))
            editor.cancelled.connect(self.cancel)

    def close(self) -> None:
        """End editing (the new text is being resent)."""
        self.view.close_editor()

    def cancel(self) -> None:
        """Leave the message as it was; the keyboard goes back to its Edit button."""
        message_id = self.message_id
        if message_id is None:
            return
        editor, focus = self.view.editor, QApplication.focusWidget()
        had_focus = editor is not None and focus is not None and editor.isAncestorOf(focus)
        self.view.close_editor()
        if had_focus:
            self.view.focus_stop = (message_id, EDIT)
            self.view.setFocus(Qt.FocusReason.OtherFocusReason)
