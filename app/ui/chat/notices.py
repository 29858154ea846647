"""The chat page's notices above the input: what to do with no model (try the starter, find
a chat model) and, after the engine died, what happened and what happens next."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.ui.plain_text import plain_label

STARTER_OFFER = (
    "<b>No model is loaded.</b> Try the starter model, Gemma 3 270M, here and offline: a small "
    "base model that continues text rather than answering. For a conversation, find a chat "
    "model."
)
NO_MODEL = (
    "<b>No model is loaded.</b> Find a chat model, choose a GGUF file with the picker above, "
    "or get the small starter model in Models, My models."
)


class ModelOffer(QFrame):
    """Signals:
    starter_requested(): load the starter model (text continuation).
    find_chat_model_requested(): go to the Models page's Discover tab.
    """

    starter_requested = Signal()
    find_chat_model_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("starterOffer")
        self.text = QLabel(STARTER_OFFER)  # our own markup only
        self.text.setWordWrap(True)
        self.starter_button = QPushButton("Try the starter (text continuation)")
        self.starter_button.setObjectName("starterButton")
        self.find_button = QPushButton("Find a chat model")
        self.find_button.setObjectName("findChatModelButton")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.starter_button)
        layout.addWidget(self.find_button)
        self.starter_button.clicked.connect(self.starter_requested)
        self.find_button.clicked.connect(self.find_chat_model_requested)

    def show_starter(self, available: bool) -> None:
        """Offer the starter when it is on this computer; else only the way to a model."""
        self.text.setText(STARTER_OFFER if available else NO_MODEL)
        self.starter_button.setVisible(available)


class EngineStopped(QFrame):
    """The engine died: its sentence and what happens next, until a model loads again. The
    lines the engine wrote before dying are in the error box's Details, not here."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("engineStopped")
        self.text = plain_label(QLabel(""))  # quotes llama.cpp's abort line
        self.text.setWordWrap(True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 8, 14, 8)
        layout.addWidget(self.text, 1)
        self.hide()

    def show_text(self, text: str) -> None:
        self.text.setText(text)
        self.show()
