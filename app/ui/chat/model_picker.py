"""Model picker: a button with a menu of known models (starter, library, recent files),
an Open file… entry, load options and unload; plus the load options dialog."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from functools import partial

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QMenu,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core import starter
from app.core.kv_types import KV_TYPES
from app.core.settings import Settings
from app.ui.chat.status_bar import model_name

log = logging.getLogger(__name__)

STARTER = "starter"


def _library_models() -> list[tuple[str, str]]:
    """(label, ref) of the models app.core.library knows, when that module works."""
    try:
        from app.core.library import list_models
    except ImportError:
        return []
    try:
        return [(m.name, m.ref) for m in list_models(include_starter=False) if not m.error]
    except Exception:  # a broken cache folder must not break the menu
        log.warning("model library could not be listed", exc_info=True)
        return []


class ModelPicker(QToolButton):
    """Signals:
    model_chosen(str): a model to load: a .gguf path or 'starter'.
    options_requested(): open the load options dialog.
    unload_requested(): unload the model.
    """

    model_chosen = Signal(str)
    options_requested = Signal()
    unload_requested = Signal()

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.settings = settings
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setText("Select a model to load  ▾")
        self._menu = QMenu(self)
        self._menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(self._menu)

    def show_model(self, path: str | None, loading: bool = False) -> None:
        if path is None:
            self.setText("Select a model to load  ▾")
        else:
            self.setText(f"{'Loading ' if loading else ''}{model_name(path)}  ▾")
        self.setToolTip(path or "")

    def _fill_menu(self) -> None:
        menu = self._menu
        menu.clear()
        if starter.is_installed():
            menu.addAction(
                f"Starter model: {starter.NAME}", lambda: self.model_chosen.emit(STARTER)
            )
        library = _library_models()
        if library:
            menu.addSection("Library")
            for label, ref in library[:30]:
                menu.addAction(label, partial(self.model_chosen.emit, ref))
        recent = [p for p in self.settings.recent_models if p != STARTER and os.path.exists(p)]
        if recent:
            menu.addSection("Recent files")
            for path in recent:
                menu.addAction(model_name(path), partial(self.model_chosen.emit, path))
        menu.addSeparator()
        menu.addAction("Open GGUF file…", self.open_file)
        menu.addAction("Load options…", lambda: self.options_requested.emit())
        menu.addAction("Unload model", lambda: self.unload_requested.emit())

    def open_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open a GGUF model",
            os.path.expanduser("~"),
            "GGUF models (*.gguf);;All files (*)",
        )
        if path:
            self.model_chosen.emit(path)


class LoadOptionsDialog(QDialog):
    """n_ctx, K and V cache types, GPU layers, threads. Flash Attention is always on
    (a quantized V cache needs it, and it is what the int8-K kernel runs in)."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Load options")
        self._settings = settings
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(256, 1_048_576)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setValue(settings.n_ctx)
        self.type_k = QComboBox()
        self.type_v = QComboBox()
        for box, value in ((self.type_k, settings.type_k), (self.type_v, settings.type_v)):
            box.addItems(list(KV_TYPES))
            box.setCurrentText(value)
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(-1, 999)
        self.gpu_layers.setSpecialValueText("all")
        self.gpu_layers.setValue(settings.n_gpu_layers)
        self.threads = QSpinBox()
        self.threads.setRange(0, 512)
        self.threads.setSpecialValueText("automatic")
        self.threads.setValue(settings.n_threads or 0)
        flash = QCheckBox("Flash Attention (always on: the int8-K cache runs in it)")
        flash.setChecked(True)
        flash.setEnabled(False)
        form = QFormLayout()
        form.addRow("Context length (tokens)", self.n_ctx)
        form.addRow("K cache type", self.type_k)
        form.addRow("V cache type", self.type_v)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("CPU threads", self.threads)
        hint = QLabel(
            "Default: K q8_0 / V f16 — an 8-bit K cache with full-precision V. "
            "The new options apply to the next model load."
        )
        hint.setWordWrap(True)
        hint.setObjectName("hint")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(flash)
        layout.addWidget(hint)
        layout.addWidget(buttons)

    def chosen(self) -> Settings:
        return replace(
            self._settings,
            n_ctx=self.n_ctx.value(),
            type_k=self.type_k.currentText(),
            type_v=self.type_v.currentText(),
            n_gpu_layers=self.gpu_layers.value(),
            n_threads=self.threads.value() or None,
        )
