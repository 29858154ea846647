"""The chat page's completion mode, shown for a base model: a line that says what such a model
does, a text box whose text the model continues, its length and repeat penalty, Continue/Stop,
and why a continuation failed, in the panel where it happened."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QKeyEvent,
    QKeySequence,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.messages import Finished
from app.services.engine_client import EngineClient
from app.ui.chat.base_model_note import FIRST_CHAT_MODEL, download_label
from app.ui.chat.completion import DEFAULT_LENGTH, DEFAULT_REPEAT_PENALTY, CompletionSession
from app.ui.plain_text import plain_label, plain_tooltip, typed_text
from app.ui.theme_colours import TEXT_COLOURS, scheme_of

BASE_MODEL_LINE = (
    "This is a base model: it continues your text rather than answering. "
    "Find a chat model to have a conversation."
)
PLACEHOLDER = (
    "Write the beginning of a text (a story, a letter, a list) and press Continue: "
    "the model writes what comes next, here."
)
# The model's words are told apart from the user's by colour (the look's "quality" blue), and
# marked with this property so a theme switch can colour them again.
GENERATED = QTextFormat.Property.UserProperty + 1


class CompletionPanel(QWidget):
    """Signals:
    find_chat_model_requested(): the user wants a chat model (the Models page's Discover).
    chat_anyway_requested(): the user wants the chat view with this model all the same.
    download_requested(CuratedModel): download this small chat model now.
    """

    find_chat_model_requested = Signal()
    chat_anyway_requested = Signal()
    download_requested = Signal(object)

    def __init__(self, engine: EngineClient, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("completionPanel")
        self.session = CompletionSession(engine, self)

        self.notice = QFrame()
        self.notice.setObjectName("baseModelNotice")
        self.notice_text = plain_label(QLabel(BASE_MODEL_LINE))
        self.notice_text.setWordWrap(True)
        self.download_button = QPushButton(download_label())
        self.download_button.setObjectName("downloadChatModelButton")
        self.find_button = QPushButton("Find a chat model")
        self.find_button.setObjectName("findChatModelButton")
        self.chat_anyway_button = QPushButton("Chat anyway")
        self.chat_anyway_button.setObjectName("chatAnywayButton")
        notice_buttons = QHBoxLayout()  # under the text: at 1024 px the text keeps its width
        notice_buttons.addStretch(1)
        for button in (self.download_button, self.find_button, self.chat_anyway_button):
            notice_buttons.addWidget(button)
        notice_layout = QVBoxLayout(self.notice)
        notice_layout.setContentsMargins(14, 10, 14, 10)
        notice_layout.addWidget(self.notice_text)
        notice_layout.addLayout(notice_buttons)

        self.editor = QPlainTextEdit()
        self.editor.setObjectName("completionEditor")
        self.editor.setPlaceholderText(PLACEHOLDER)
        self.error_label = plain_label(QLabel(""))
        self.error_label.setObjectName("completionError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.length_box = QSpinBox()
        self.length_box.setObjectName("completionLength")
        self.length_box.setRange(1, 4096)
        self.length_box.setValue(DEFAULT_LENGTH)
        self.length_box.setSuffix(" tokens")
        self.penalty_box = QDoubleSpinBox()
        self.penalty_box.setObjectName("completionRepeatPenalty")
        self.penalty_box.setRange(1.0, 2.0)
        self.penalty_box.setSingleStep(0.05)
        self.penalty_box.setValue(DEFAULT_REPEAT_PENALTY)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setObjectName("continueButton")
        self.continue_button.setToolTip("Ctrl+Enter")
        self.result_label = QLabel("")
        self.result_label.setObjectName("completionResult")
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Length"))
        controls.addWidget(self.length_box)
        controls.addSpacing(12)
        controls.addWidget(QLabel("Repeat penalty"))
        controls.addWidget(self.penalty_box)
        controls.addSpacing(12)
        controls.addWidget(self.result_label, 1)
        controls.addWidget(self.continue_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 12, 24, 14)
        layout.addWidget(self.notice)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.error_label)
        layout.addLayout(controls)

        self.find_button.clicked.connect(self.find_chat_model_requested)
        self.download_button.clicked.connect(lambda: self.download_requested.emit(FIRST_CHAT_MODEL))
        self.chat_anyway_button.clicked.connect(self.chat_anyway_requested)
        self.continue_button.clicked.connect(self._on_continue_clicked)
        QShortcut(QKeySequence("Ctrl+Return"), self.editor, self._on_continue_clicked)
        self.editor.installEventFilter(self)  # Tab types a tab there: Ctrl+Tab and Esc leave
        s = self.session
        s.text_received.connect(self._on_session_text_received)
        s.generating_changed.connect(self._on_session_generating_changed)
        s.finished.connect(self._on_session_finished)
        s.failed.connect(self._on_session_failed)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.editor and isinstance(event, QKeyEvent):
            ctrl = event.modifiers() & Qt.KeyboardModifier.ControlModifier
            key = event.key()
            if event.type() == QEvent.Type.ShortcutOverride and key == Qt.Key.Key_Escape:
                event.accept()  # the editor's, not the page's Esc
                return True
            if event.type() == QEvent.Type.KeyPress:
                if key == Qt.Key.Key_Escape:
                    if self.session.generating:
                        self.session.stop()
                    else:
                        self.focusNextChild()
                    return True
                if ctrl and key in (Qt.Key.Key_Tab, Qt.Key.Key_Backtab):
                    shift = event.modifiers() & Qt.KeyboardModifier.ShiftModifier
                    back = key == Qt.Key.Key_Backtab or bool(shift)
                    self.focusPreviousChild() if back else self.focusNextChild()
                    return True
        return super().eventFilter(watched, event)

    def show_reason(self, reason: str) -> None:
        """Why the loaded model was taken for a base model (the notice's tooltip)."""
        self.notice_text.setToolTip(
            plain_tooltip(f"This model is taken for a base model: {reason}.")
        )

    def continue_text(self) -> bool:
        """Ask the model to continue the box's text; False when it cannot start now."""
        self.error_label.hide()
        started = self.session.start(
            typed_text(self.editor), self.length_box.value(), self.penalty_box.value()
        )
        if not started and not self.session.generating:
            self._show_error("Write some text first: the model continues it.")
        return started

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()

    def _on_continue_clicked(self) -> None:
        if self.session.generating:
            self.session.stop()
        else:
            self.continue_text()

    def _on_session_text_received(self, text: str) -> None:
        cursor = self.editor.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        generated = QTextCharFormat()
        generated.setForeground(QColor(TEXT_COLOURS[scheme_of(self.palette())]["quality"]))
        generated.setProperty(GENERATED, True)
        cursor.insertText(text, generated)  # plain text, never markup
        self.editor.setTextCursor(cursor)
        self.editor.ensureCursorVisible()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._colour_generated_text()

    def _colour_generated_text(self) -> None:
        """Give the model's words so far the shown look's colour (after a theme switch)."""
        colour = QColor(TEXT_COLOURS[scheme_of(self.palette())]["quality"])
        document = self.editor.document()
        spans = []  # found first, coloured after: colouring splits and merges fragments
        block = document.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                fmt = fragment.charFormat()
                if fmt.boolProperty(GENERATED) and fmt.foreground().color() != colour:
                    spans.append((fragment.position(), fragment.length()))
                it += 1
            block = block.next()
        recoloured = QTextCharFormat()
        recoloured.setForeground(colour)
        for start, length in spans:
            cursor = QTextCursor(document)
            cursor.setPosition(start)
            cursor.setPosition(start + length, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(recoloured)

    def _on_session_generating_changed(self, generating: bool) -> None:
        self.editor.setReadOnly(generating)
        self.continue_button.setText("Stop" if generating else "Continue")
        self.continue_button.setProperty("stop", generating)
        self.continue_button.style().unpolish(self.continue_button)
        self.continue_button.style().polish(self.continue_button)
        if generating:
            self.result_label.setText("Writing…")
        else:  # what the user types next is theirs, not the model's colour
            self.editor.setCurrentCharFormat(QTextCharFormat())

    def _on_session_finished(self, finished: Finished) -> None:
        why = {"stop": "the model ended the text", "cancelled": "stopped"}.get(
            finished.stop_reason, "length reached"
        )
        self.result_label.setText(f"{finished.generated_tokens} tokens ({why})")
        speed = finished.tokens_per_second  # in the tooltip: the line stays short at 1024 px
        self.result_label.setToolTip(f"{speed:.1f} tokens per second" if speed else "")

    def _on_session_failed(self, message: str) -> None:
        self.result_label.setText("")
        self._show_error(f"The continuation failed: {message}")
