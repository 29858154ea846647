"""The line a base model gets in the chat: what such a model is, in one sentence, and the
one-click download of a small instruct model (the first of the Models page's Recommended list)
as the way to a real conversation; beside it, the way to the other mode (the text box, or the
chat in a question-and-answer frame)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.models.hub.curated_models import CURATED_MODELS, CuratedModel
from app.platform import units as fmt
from app.ui.plain_text import plain_label, plain_tooltip

# The smallest recommended chat model: the quickest download that answers in turns.
FIRST_CHAT_MODEL: CuratedModel = CURATED_MODELS[0]

IN_CHAT = (
    "This is a base model: it was trained to continue text, not to follow a conversation, so "
    "here it answers in a short question-and-answer frame; for real chat, download a small "
    "instruct model."
)


def download_label(model: CuratedModel = FIRST_CHAT_MODEL) -> str:
    return f"Download {model.name} Instruct ({fmt.size(model.size_bytes)})"


class BaseModelNote(QFrame):
    """Signals:
    download_requested(CuratedModel): download this chat model now.
    switch_requested(): the other mode (the button's text says which).
    """

    download_requested = Signal(object)
    switch_requested = Signal()

    def __init__(self, text: str, switch_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("baseModelNotice")
        self.text = plain_label(QLabel(text))
        self.text.setWordWrap(True)
        self.download_button = QPushButton(download_label())
        self.download_button.setObjectName("downloadChatModelButton")
        self.download_button.setToolTip(
            plain_tooltip(
                f"{FIRST_CHAT_MODEL.repo_id}: {FIRST_CHAT_MODEL.file}, from the Models page's "
                "Recommended list. The Downloads tab shows its progress; Load into chat when "
                "it is there."
            )
        )
        self.switch_button = QPushButton(switch_text)
        self.switch_button.setObjectName("switchModeButton")
        buttons = QHBoxLayout()  # under the text: at 1024 px the text keeps its width
        buttons.addStretch(1)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.switch_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.addWidget(self.text)
        layout.addLayout(buttons)
        self.download_button.clicked.connect(lambda: self.download_requested.emit(FIRST_CHAT_MODEL))
        self.switch_button.clicked.connect(self.switch_requested)
