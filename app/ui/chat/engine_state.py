"""What the chat page says when a load fails or the engine dies: the status bar's model label,
the picker, the engine-stopped notice and the error box (its first line plain, the lines the
engine wrote before dying behind Details)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.services.message_bridge import MessageBridge
from app.ui.chat.model_picker import ModelPicker
from app.ui.chat.notices import EngineStopped
from app.ui.chat.status_bar import ChatStatus

RELOADS = "Your conversation is saved; the model reloads when you send a message."


class EngineStateNotices(QObject):
    """Signals:
    changed(): what is loaded (or will be) changed; the page updates its offer and mode.
    """

    changed = Signal()

    def __init__(
        self,
        engine: EngineClient,
        status: ChatStatus,
        picker: ModelPicker,
        banner: EngineStopped,
        bridge: MessageBridge,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine, self.status, self.picker = engine, status, picker
        self.banner, self.bridge = banner, bridge
        self.last_crash: str | None = None  # its load_failed / reply_failed say it again
        listen_to_engine(engine, self)

    def show_current_model(self) -> None:
        """The picker names the loaded model, else the one the next message reloads."""
        loaded = self.engine.loaded
        if loaded is not None:
            self.picker.show_model(loaded.model_path)
        elif self.last_crash and self.engine.last_options is not None:
            self.picker.show_model(self.engine.last_options.model_path)
        else:
            self.picker.show_model(None)

    def said_already(self, message: str) -> bool:
        """Whether `message` is the crash the error box and the notice already said."""
        return message == self.last_crash

    def on_engine_loading_started(self, _options: object) -> None:
        self.last_crash = None  # the notice stays up until a model is there again

    def on_engine_model_loaded(self, _loaded: object) -> None:
        self.last_crash = None
        self.banner.hide()

    def on_engine_load_failed(self, message: str) -> None:
        if self.said_already(message):
            self.status.show_unloaded(self._crash_status())
        else:
            self.status.show_unloaded()
            self.show_current_model()
            self.banner.hide()
            self.bridge.error(f"Could not load the model: {message}")
        self.changed.emit()

    def on_engine_model_unloaded(self) -> None:
        if self.last_crash:
            self.status.show_unloaded(self._crash_status())
        else:
            self.status.show_unloaded()
            self.banner.hide()
        self.show_current_model()
        self.changed.emit()

    def on_engine_crashed(self, message: str) -> None:
        self.last_crash = message
        self.status.show_unloaded(self._crash_status())
        self.show_current_model()
        sentence, _, details = message.partition("\n")
        given_up = self.engine.gave_up_on
        if given_up is not None:
            after = (
                f"It stopped {self.engine.crashes_in_a_row} times in a row with "
                f"{Path(given_up).name}, so that model is not loaded again by itself; "
                "choose it in the model picker to try again. Your conversation is saved."
            )
        elif self.engine.last_options is not None:
            after = RELOADS
        else:
            after = "Your conversation is saved."
        self.banner.show_text(f"{sentence} {after}")
        # The engine's last lines (llama.cpp's log) go to the box's Details, never its text.
        self.bridge.error(f"{sentence} {after}" + (f"\n{details}" if details else ""))
        self.changed.emit()

    def _crash_status(self) -> str:
        if self.engine.gave_up_on is not None:
            return f"Engine stopped ({self.engine.crashes_in_a_row} crashes in a row)"
        if self.engine.last_options is not None:
            return "Engine stopped: reloads when you send"
        return "Engine stopped"
