"""The editor a message of the user's turns into while it is edited: its text in a box inside
the message's own bubble (the view places it there, message_view.py; the delegate paints the
bubble around it highlighted), a line saying what the keys do, and Cancel and Resend.

Enter or Ctrl+Enter resends the text (the messages after it are replaced), Shift+Enter starts
a new line, Esc cancels; Tab goes on to Cancel and Resend."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.input_box import EnterSendsBox
from app.ui.plain_text import typed_text

KEYS = (
    "Enter resends it (the messages after it are replaced), Shift+Enter: a new line, Esc cancels."
)
MIN_LINES, MAX_LINES = 2, 12  # the text box grows with the text, then scrolls
_MARGIN = 8  # around the box and the row under it, inside the bubble


class EditBox(EnterSendsBox):
    """The text being edited: submitted(str) resends it, cancelled() (Esc) leaves it."""

    def __init__(self, text: str, parent: QFrame) -> None:
        super().__init__(parent)
        self.setObjectName("messageEditorText")
        self.setTabChangesFocus(True)
        self.setPlainText(text)
        self.moveCursor(self.textCursor().MoveOperation.End)


class MessageEditor(QFrame):
    """Signals:
    submitted(str): the new text, to resend (Enter, Ctrl+Enter or Resend).
    cancelled(): leave the message as it was (Esc or Cancel).
    height_changed(): the text grew or shrank by a line: the row makes room (height_for).
    """

    submitted = Signal(str)
    cancelled = Signal()
    height_changed = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageEditor")
        self.text_box = EditBox(text, self)
        self.keys = QLabel(KEYS)
        self.keys.setObjectName("hint")
        self.keys.setWordWrap(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelEditButton")
        self.resend_button = QPushButton("Resend")
        self.resend_button.setObjectName("resendEditButton")
        self.resend_button.setToolTip("Send the edited message again (Enter)")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.keys, 1)
        row.addWidget(self.cancel_button)
        row.addWidget(self.resend_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(_MARGIN, _MARGIN, _MARGIN, _MARGIN)
        layout.setSpacing(6)
        layout.addWidget(self.text_box, 1)
        layout.addLayout(row)
        QFrame.setTabOrder(self.text_box, self.cancel_button)
        QFrame.setTabOrder(self.cancel_button, self.resend_button)
        self.text_box.submitted.connect(self.submitted)
        self.text_box.cancelled.connect(self.cancelled)
        self.cancel_button.clicked.connect(self.cancelled)
        self.resend_button.clicked.connect(self._on_resend_clicked)
        self.text_box.textChanged.connect(self._on_text_changed)
        self._width = 0  # the width the height was last worked out for

    @property
    def text(self) -> str:
        return typed_text(self.text_box)

    def height_for(self, width: int) -> int:
        """The height the editor wants at `width`: the text wrapped (2 to 12 lines, then it
        scrolls) and the row of keys and buttons under it."""
        self._width = width
        self.ensurePolished()  # the style sheet's font and frame, before they are measured
        box = self.text_box
        margins = 2 * (int(box.document().documentMargin()) + box.frameWidth()) + 2
        metrics = QFontMetrics(box.font())
        wrapped = metrics.boundingRect(
            QRect(0, 0, max(40, width - 2 * _MARGIN - margins - 16), 100_000),
            Qt.TextFlag.TextWordWrap,
            self.text + "x",  # a last empty line counts
        ).height()
        line = metrics.lineSpacing()
        box_height = min(MAX_LINES * line, max(MIN_LINES * line, wrapped)) + margins
        row = max(
            self.resend_button.sizeHint().height(),
            self.keys.heightForWidth(max(80, width - 2 * _MARGIN - self._buttons_width())),
        )
        return box_height + 6 + row + 2 * _MARGIN

    def _buttons_width(self) -> int:
        return self.cancel_button.sizeHint().width() + self.resend_button.sizeHint().width() + 24

    def _on_text_changed(self) -> None:
        if self._width and self.height_for(self._width) != self.height():
            self.height_changed.emit()

    def _on_resend_clicked(self) -> None:
        if self.text.strip():
            self.submitted.emit(self.text)
