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
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core import starter
from app.core.kv_types import KV_TYPES
from app.core.safe_text import safe_text
from app.core.settings import Settings
from app.engine.build_info import BackendPairs
from app.ui.chat.status_bar import model_name
from app.ui.plain_text import plain_tooltip

log = logging.getLogger(__name__)

STARTER = "starter"
# What the load dialog offers when the chosen K/V pair has no Flash Attention kernel in the
# running GPU backend: int8 K and V (in llama.cpp's default pair list), or plain f16.
ALTERNATIVE_PAIRS = (("q8_0", "q8_0"), ("f16", "f16"))
NAME_LIMIT = 80  # characters of a model's name in the menu and on the button


def _entry(name: str) -> str:
    """A model's name (the file's, the author's text) as a menu entry or button text: cleaned,
    cut, and with '&' doubled so Qt shows it instead of taking it for a shortcut mark."""
    return safe_text(name, NAME_LIMIT).replace("&", "&&")


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
            self.setText(f"{'Loading ' if loading else ''}{_entry(model_name(path))}  ▾")
        self.setToolTip(plain_tooltip(path or ""))

    def _fill_menu(self) -> None:
        menu = self._menu
        menu.clear()
        if starter.is_available():
            menu.addAction(
                f"Starter model: {starter.NAME}", lambda: self.model_chosen.emit(STARTER)
            )
        library = _library_models()
        if library:
            menu.addSection("Library")
            for label, ref in library[:30]:
                menu.addAction(_entry(label), partial(self.model_chosen.emit, ref))
        recent = [p for p in self.settings.recent_models if p != STARTER and os.path.exists(p)]
        if recent:
            menu.addSection("Recent files")
            for path in recent:
                menu.addAction(_entry(model_name(path)), partial(self.model_chosen.emit, path))
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

    def __init__(
        self,
        settings: Settings,
        parent: QWidget | None = None,
        pairs: BackendPairs | None = None,
    ) -> None:
        """`pairs`: which K/V pairs the running backend's Flash Attention has kernels for;
        a pair it lacks is said, with the pairs it has offered instead."""
        super().__init__(parent)
        self.setWindowTitle("Load options")
        self._settings = settings
        self._pairs = pairs
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
        self.pair_warning = QLabel()
        self.pair_warning.setWordWrap(True)
        self.pair_warning.setObjectName("pairWarning")
        self.pair_warning.setStyleSheet(
            "background: #fff4e5; color: #8a4b00; border: 1px solid #f5c07a; "
            "border-radius: 6px; padding: 6px;"
        )
        self.pair_buttons: dict[str, QPushButton] = {}
        offers = QHBoxLayout()
        for k, v in ALTERNATIVE_PAIRS:
            button = QPushButton(f"Use K={k} / V={v}")
            button.clicked.connect(lambda _=False, k=k, v=v: self._choose_pair(k, v))
            self.pair_buttons[f"{k}/{v}"] = button
            offers.addWidget(button)
        offers.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(flash)
        layout.addWidget(self.pair_warning)
        layout.addLayout(offers)
        layout.addWidget(hint)
        layout.addWidget(buttons)
        self.type_k.currentTextChanged.connect(self._show_pair_support)
        self.type_v.currentTextChanged.connect(self._show_pair_support)
        self._show_pair_support()

    def _choose_pair(self, k: str, v: str) -> None:
        self.type_k.setCurrentText(k)
        self.type_v.setCurrentText(v)

    def _show_pair_support(self) -> None:
        k, v = self.type_k.currentText(), self.type_v.currentText()
        missing = self._pairs is not None and self._pairs.native(k, v) is False
        self.pair_warning.setVisible(missing)
        for name, button in self.pair_buttons.items():
            ok = self._pairs is not None and self._pairs.native(*name.split("/")) is not False
            button.setVisible(missing and ok)
        if missing and self._pairs is not None:
            offered = [n for n, b in self.pair_buttons.items() if not b.isHidden()]
            instead = " or ".join(offered) if offered else "another pair"
            self.pair_warning.setText(
                f"The {self._pairs.backend} backend has no Flash Attention kernel for "
                f"K={k} / V={v}: llama.cpp would convert the cache to f16 at every step, "
                f"which is slow and gives back the memory int8-K saves. Use {instead} instead."
            )

    def chosen(self) -> Settings:
        return replace(
            self._settings,
            n_ctx=self.n_ctx.value(),
            type_k=self.type_k.currentText(),
            type_v=self.type_v.currentText(),
            n_gpu_layers=self.gpu_layers.value(),
            n_threads=self.threads.value() or None,
        )
