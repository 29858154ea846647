"""Which of the chat page's two modes shows: the conversation, or for a base model the text
box it continues (completion_panel.py). A base model starts in the text box; "Chat anyway"
opens the conversation for it, where its replies come from a question-and-answer frame and
the base-model note stays above the input, with the way back to the text box."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QStackedWidget, QWidget

from app.services.engine_client import EngineClient
from app.ui.chat.base_model_note import BaseModelNote
from app.ui.chat.completion_panel import CompletionPanel
from app.ui.chat.status_bar import ChatStatus


class ChatModes(QObject):
    def __init__(
        self,
        engine: EngineClient,
        modes: QStackedWidget,
        chat_area: QWidget,
        completion: CompletionPanel,
        base_note: BaseModelNote,
        status: ChatStatus,
    ) -> None:
        super().__init__(modes)
        self.engine, self.modes, self.chat_area = engine, modes, chat_area
        self.completion, self.base_note, self.status = completion, base_note, status
        self._chat_anyway: set[str] = set()  # base models the user chose to chat with
        completion.chat_anyway_requested.connect(self._on_completion_chat_anyway_requested)
        base_note.switch_requested.connect(self._on_base_note_switch_requested)

    @property
    def completion_mode(self) -> bool:
        """Whether the page shows the completion panel (a base model) instead of the chat."""
        return self.modes.currentWidget() is self.completion

    def update(self) -> None:
        """Show the mode for the loaded model (the chat when none is loaded)."""
        loaded = self.engine.loaded
        base = loaded is not None and bool(loaded.base_model)
        in_text_box = base and loaded is not None and loaded.model_path not in self._chat_anyway
        if in_text_box and loaded is not None:
            self.completion.show_reason(loaded.base_model)
        self.modes.setCurrentWidget(self.completion if in_text_box else self.chat_area)
        self.base_note.setVisible(base and not in_text_box)
        self.status.show_base_model_mode("continuation" if in_text_box else "frame" if base else "")

    def _on_completion_chat_anyway_requested(self) -> None:
        if self.engine.loaded is not None:
            self._chat_anyway.add(self.engine.loaded.model_path)
        self.update()

    def _on_base_note_switch_requested(self) -> None:
        if self.engine.loaded is not None:
            self._chat_anyway.discard(self.engine.loaded.model_path)
        self.update()
