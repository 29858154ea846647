"""The local server's way into the app's engine: API requests join the EngineClient's queue,
so they wait their turn with the chat's replies and the dashboard sees them as it sees those.

Lives on the GUI thread. submit() and cancel() come from the server's thread and hop over as
queued signals; events go back to each request's sink (app.server.gateway.EventSink).
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, Signal

from app.engine.messages import (
    ContextTrimmed,
    Failed,
    Finished,
    Generate,
    Loaded,
    PromptStarted,
    Token,
)
from app.server.gateway import EventSink, ModelInfo, cancelled_before_start
from app.services.engine_client import EngineClient


class ClientGateway(QObject):
    """An app.server.gateway.EngineGateway over `client`."""

    _submitted = Signal(object, object)  # Generate, EventSink
    _cancelled = Signal(str)

    def __init__(self, client: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._client = client
        self._sinks: dict[str, EventSink] = {}  # GUI thread only
        # Replaced whole, never changed in place, so the server's thread reads it safely.
        self._model: ModelInfo | None = None
        if client.loaded is not None:
            self._on_client_model_loaded(client.loaded)
        queued = Qt.ConnectionType.QueuedConnection
        self._submitted.connect(self._on_submitted, queued)
        self._cancelled.connect(self._on_cancelled, queued)
        client.model_loaded.connect(self._on_client_model_loaded)
        client.loading_started.connect(self._on_client_model_gone)
        client.model_unloaded.connect(self._on_client_model_gone)
        client.prompt_started.connect(self._on_client_event)
        client.context_trimmed.connect(self._on_client_event)
        client.token_received.connect(self._on_client_event)
        client.reply_finished.connect(self._on_client_reply_finished)
        client.request_failure.connect(self._on_client_request_failed)

    # ---- EngineGateway (any thread) ------------------------------------------------------

    def model(self) -> ModelInfo | None:
        return self._model

    def health(self) -> str:
        if self._model is None:
            return "No model is loaded in KV Studio, or one is loading; load one in the app."
        return ""

    def submit(self, command: Generate, sink: EventSink) -> None:
        self._submitted.emit(command, sink)

    def cancel(self, request_id: str) -> None:
        self._cancelled.emit(request_id)

    # ---- GUI thread ------------------------------------------------------------------------

    def cancel_all(self) -> None:
        """The server is stopping: its requests stop too (the chat's carry on). Each ends
        now, not when the engine's Finished comes back through this (then busy) thread."""
        sinks, self._sinks = self._sinks, {}
        for request_id, sink in sinks.items():
            self._client.stop(request_id)
            sink(cancelled_before_start(request_id))

    def _on_submitted(self, command: Generate, sink: EventSink) -> None:
        self._sinks[command.request_id] = sink
        self._client.generate(command)

    def _on_cancelled(self, request_id: str) -> None:
        if request_id in self._sinks:
            self._client.stop(request_id)

    def _on_client_model_loaded(self, loaded: Loaded) -> None:
        self._model = ModelInfo.from_loaded(loaded, int(time.time()))

    def _on_client_model_gone(self, *_args: object) -> None:
        self._model = None

    def _on_client_event(self, event: PromptStarted | ContextTrimmed | Token) -> None:
        sink = self._sinks.get(event.request_id)
        if sink is not None:
            sink(event)

    def _on_client_reply_finished(self, finished: Finished) -> None:
        sink = self._sinks.pop(finished.request_id, None)
        if sink is not None:
            sink(finished)

    def _on_client_request_failed(self, failed: Failed) -> None:
        # The engine's Failed with its code: a prompt over the context is the client's 400
        sink = self._sinks.pop(failed.request_id or "", None)
        if sink is not None:
            sink(failed)
