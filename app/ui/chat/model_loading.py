"""Loading a model from the Chat page, up to the engine: the load dialog, the checks a load
gets off the GUI thread (the file opens, the load fits the free memory, the RPC workers answer)
and the "Load anyway?" box when a check refuses a load the user may force."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from app.backends.store import BackendStore
from app.engine.build_info import BackendPairs, parse_system_info
from app.engine.rpc_load_check import backend_with_rpc, check_rpc_load
from app.load.load_check import check_model_load
from app.load.load_choices import choice_for
from app.load.load_words import LOAD_ANYWAY_ADVICE, load_word
from app.load.profile import LoadProfile
from app.models import starter
from app.models.model_ref import resolve_model
from app.platform.errors import ContextTooLargeError
from app.services.engine_client import EngineClient
from app.services.local_workers import LocalWorkers
from app.services.message_bridge import MessageBridge
from app.state.settings import Settings, SettingsFile
from app.ui.chat.load_dialog import LoadDialog
from app.ui.chat.model_picker import STARTER, ModelPicker


class ModelLoading(QObject):
    """Signals:
    checking_started(str): a load of this ref is being checked (the picker says so already).
    resolve_failed(str): a chosen model could not be opened (before the engine).
    not_started(): a load ended before the engine: it could not be opened, or the user
        cancelled "Load anyway?".
    """

    checking_started = Signal(str)
    resolve_failed = Signal(str)
    not_started = Signal()
    # (ref, LoadProfile or None, the Exception that stops it or None), from a helper thread
    _model_resolved = Signal(str, object, object)

    def __init__(
        self,
        engine: EngineClient,
        settings: SettingsFile,
        bridge: MessageBridge,
        picker: ModelPicker,
        local_workers: LocalWorkers,
        page: QWidget,
    ) -> None:
        """`page`: the parent of the dialog and the message box."""
        super().__init__(page)
        self.engine, self.settings, self.bridge = engine, settings, bridge
        self._picker, self._local_workers, self._page = picker, local_workers, page
        self.resolving = False  # a load is being checked off the GUI thread
        self._pending_ref: str | None = None  # the ref of the load on its way to the engine
        self.load_refusal: QMessageBox | None = None  # the open "Load anyway?" box
        self.load_dialog: LoadDialog | None = None  # the open load dialog
        self._model_resolved.connect(self._on_model_resolved)

    def take_pending_ref(self) -> str | None:
        """The ref of the load sent to the engine (None once taken): the model loaded or
        failed, so the next load starts afresh."""
        ref, self._pending_ref = self._pending_ref, None
        return ref

    def load_model(self, ref: str) -> None:
        """Load a .gguf path or 'starter' with its remembered load settings, else the defaults;
        off the GUI thread the file is checked (the starter model is assembled on first use) and
        so is whether the load fits the free memory."""
        self._start_load(ref, None)

    def load_profile(self, ref: str, profile: LoadProfile) -> None:
        """Load `ref` exactly as `profile` says (the load dialog's choice), checked the same way
        off the GUI thread; no file is read back for it."""
        self._start_load(ref, profile)

    def _start_load(self, ref: str, profile: LoadProfile | None) -> None:
        if self.resolving:
            return
        self.resolving = True
        self._pending_ref = ref
        self._picker.show_model("starter model" if ref == STARTER else ref, loading=True)
        self.checking_started.emit(ref)
        loaded = self.engine.loaded.model_path if self.engine.loaded else None
        threading.Thread(
            target=self._resolve,
            args=(ref, profile, self.settings.settings, loaded),
            daemon=True,
            name="resolve-model",
        ).start()

    def _resolve(
        self, ref: str, profile: LoadProfile | None, s: Settings, loaded: str | None
    ) -> None:
        error: Exception | None = None
        try:
            if profile is None:
                # The model's remembered load settings (the load dialog's), else the defaults.
                profile = choice_for(self.settings.folder, s, resolve_model(ref))
            advice = LOAD_ANYWAY_ADVICE.format(load_word(profile.model_path, loaded))
            if profile.rpc_workers:  # every worker answers, runs the K/V pair, fits
                folder = backend_with_rpc(self.settings.folder, "the Backends page")
                check_rpc_load(profile, folder, advice=advice)
            else:
                check_model_load(Path(profile.model_path), profile, advice=advice)
        except Exception as exc:  # noqa: BLE001 - reported to the user on the GUI thread
            error = exc
        self._model_resolved.emit(ref, profile, error)

    def _on_model_resolved(
        self, ref: str, options: LoadProfile | None, error: Exception | None
    ) -> None:
        self.resolving = False
        if isinstance(error, ContextTooLargeError) and error.forceable and options is not None:
            self._offer_load_anyway(str(error), options)
            return
        if error is not None or options is None:
            message = f"Could not open the model: {error}"
            self.bridge.error(message)
            self.resolve_failed.emit(message)
            self._load_not_started()
            return
        self.engine.load(options)

    def _offer_load_anyway(self, sentence: str, options: LoadProfile) -> None:
        """The refusal in a message box: Load anyway (Reload anyway for the model loaded now)
        sends the load, Cancel drops it."""
        if self.load_refusal is not None:
            self.load_refusal.close()
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "The model may not fit",
            sentence,
            QMessageBox.StandardButton.Cancel,
            self._page,
        )
        box.setTextFormat(Qt.TextFormat.PlainText)  # the sentence names the model's file
        loaded = self.engine.loaded.model_path if self.engine.loaded else None
        word = load_word(options.model_path, loaded)
        anyway = box.addButton(f"{word} anyway", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)

        def on_finished(_result: int) -> None:
            self.load_refusal = None
            if box.clickedButton() is anyway:
                self.engine.load(options)
            else:
                self._load_not_started()

        box.finished.connect(on_finished)
        self.load_refusal = box
        box.open()

    def _load_not_started(self) -> None:
        self._pending_ref = None
        self.not_started.emit()

    # ---- the load dialog ---------------------------------------------------------------

    def backend_pairs(self) -> BackendPairs:
        """The K/V pairs the running backend's GPU Flash Attention has: what llama.cpp said
        when the model loaded, else what the chosen package's manifest names."""
        loaded = self.engine.loaded
        backend, _ = BackendStore(self.settings.folder).for_engine()
        if loaded is not None:
            return BackendPairs(backend.name, parse_system_info(loaded.system_info).fa_pairs)
        fa_pairs = backend.manifest.fa_pairs if backend.manifest is not None else ()
        return BackendPairs(backend.name, fa_pairs or None)

    def open_load_dialog(self, ref: str | None = None) -> None:
        """The load dialog for `ref` (None: the loaded model, else the last one, else the
        starter): its load settings, the live fit, and Load (Reload for the loaded model)."""
        loaded = self.engine.loaded.model_path if self.engine.loaded else None
        ref = ref or loaded or self.settings.settings.last_model
        if not ref and starter.is_available():
            ref = STARTER
        if not ref:
            self._picker.open_file()  # nothing to set up yet: choose a file first
            return
        if self.load_dialog is not None:
            self.load_dialog.close()
        dialog = LoadDialog(
            ref,
            self.settings.settings,
            self.settings.folder,
            self.backend_pairs(),
            loaded,
            self._page,
            local_workers=self._local_workers,
        )
        dialog.load_requested.connect(self.load_profile)
        dialog.finished.connect(partial(self._on_load_dialog_finished, dialog))
        self.load_dialog = dialog
        dialog.open()

    def _on_load_dialog_finished(self, dialog: LoadDialog, _result: int) -> None:
        if self.load_dialog is dialog:
            self.load_dialog = None
        dialog.deleteLater()
