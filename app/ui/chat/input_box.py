"""The message input: Enter sends, Shift+Enter adds a line; grows up to a few lines."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from app.ui.plain_text import typed_text

MAX_LINES = 8


class EnterSendsBox(QPlainTextEdit):
    """A text box where Enter (or Ctrl+Enter) sends and Shift+Enter starts a new line, as in
    the message input and the editor of a message being edited. Signals:
    submitted(str): Enter was pressed with text in the box.
    cancelled(): Escape was pressed.
    """

    submitted = Signal(str)
    cancelled = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            text = typed_text(self)
            if text.strip():
                self.submitted.emit(text)
            return
        if event.key() == Qt.Key.Key_Escape:
            self.cancelled.emit()
            return
        super().keyPressEvent(event)


class InputBox(EnterSendsBox):
    """The message input (cancelled: Escape, which leaves the text continuation box too)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inputBox")
        self.setPlaceholderText("Type a message…  (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self.updateGeometry)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)

    def sizeHint(self) -> QSize:
        lines = min(MAX_LINES, max(2, self.document().blockCount()))
        height = self.fontMetrics().lineSpacing() * lines + 20
        return QSize(super().sizeHint().width(), height)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()
