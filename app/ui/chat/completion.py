"""Text continuation for base models, without widgets: the text is sent as a raw prompt (no
chat template; the engine tokenizes it as it is) and the model's continuation streams back.

A base model has learnt to continue text, not to answer turns: wrapped in a chat template it
echoes the markup and repeats itself. The completion panel (completion_panel.py) shows this.
"""

from __future__ import annotations

import logging
import uuid

from PySide6.QtCore import QObject, Signal

from app.engine.messages import Finished, Generate, SamplingSettings, Token
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine

log = logging.getLogger(__name__)

# A base model wanders and loops past a paragraph or two; 1.3 keeps it from repeating
# the same line (the chat's 1.1 does not, on the starter model).
DEFAULT_LENGTH = 200
DEFAULT_REPEAT_PENALTY = 1.3
DEFAULT_TEMPERATURE = 0.8


class CompletionSession(QObject):
    """Signals:
    text_received(str): a piece of the continuation, to append after the text.
    generating_changed(bool): a continuation started or ended.
    finished(Finished): the continuation ended (stop_reason 'stop', 'length', 'cancelled').
    failed(str): the continuation could not be made, in one sentence.
    """

    text_received = Signal(str)
    generating_changed = Signal(bool)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, engine: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self._request_id: str | None = None
        listen_to_engine(engine, self)

    @property
    def generating(self) -> bool:
        return self._request_id is not None

    def start(
        self,
        text: str,
        max_tokens: int = DEFAULT_LENGTH,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        temperature: float = DEFAULT_TEMPERATURE,
    ) -> bool:
        """Continue `text`. False when there is nothing to continue or one already runs."""
        if self.generating or not text.strip():
            return False
        self._request_id = uuid.uuid4().hex
        sampling = SamplingSettings(
            temperature=temperature, repeat_penalty=repeat_penalty, max_tokens=max_tokens
        )
        self.generating_changed.emit(True)
        self.engine.generate(Generate(self._request_id, sampling=sampling, prompt=text))
        return True

    def stop(self) -> None:
        if self._request_id is not None:
            self.engine.stop(self._request_id)

    def _end(self) -> None:
        self._request_id = None
        self.generating_changed.emit(False)

    def on_engine_token(self, token: Token) -> None:
        if token.request_id == self._request_id:
            self.text_received.emit(token.text)

    def on_engine_reply_finished(self, finished: Finished) -> None:
        if finished.request_id == self._request_id:
            self._end()
            self.finished.emit(finished)

    def on_engine_request_failed(self, request_id: str, message: str) -> None:
        if request_id == self._request_id:
            log.warning("continuation failed: %s", message)
            self._end()
            self.failed.emit(message.partition("\n")[0])  # a crash's output tail stays out
