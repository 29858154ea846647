"""The Settings page's default load settings: context length, GPU layers, K and V cache types.

They are the app's defaults (core settings: the SettingsFile the chat page loads from), so the
next load uses them; a load dialog may still change them for one load. Typed values are checked
here and a bad one gets one sentence, not a silent clamp.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.kv.kv_types import KV_TYPES, KvMode
from app.load.load_check import gpu_build
from app.platform.errors import BadInputError
from app.state.settings import MAX_CONTEXT, SettingsFile
from app.ui.chat.load_dialog import NO_GPU
from app.ui.plain_text import plain_label

MIN_CONTEXT = 256  # below this a chat template and one message hardly fit
MAX_GPU_LAYERS = 999  # the load dialog's limit; more layers than any model has means "all"
ALL = "all"


@dataclass(frozen=True)
class LoadDefaults:
    n_ctx: int
    n_gpu_layers: int  # -1: all
    kv: KvMode

    def sentence(self, has_gpu: bool) -> str:
        kv = self.kv.words
        if not has_gpu:
            return f"{self.n_ctx:,} tokens of context, {kv} ({NO_GPU})"
        layers = "all layers" if self.n_gpu_layers < 0 else f"{self.n_gpu_layers} layers"
        return f"{self.n_ctx:,} tokens of context, {layers} on the GPU, {kv}"


def _whole_number(text: str) -> int | None:
    cleaned = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    return int(cleaned) if cleaned.isdigit() else None


def parse_context(text: str) -> int:
    n = _whole_number(text)
    if n is None or not MIN_CONTEXT <= n <= MAX_CONTEXT:
        raise BadInputError(
            f"The context length must be a whole number of tokens from {MIN_CONTEXT:,} "
            f"to {MAX_CONTEXT:,}, not '{text.strip()[:40]}'."
        )
    return n


def parse_gpu_layers(text: str) -> int:
    if text.strip().lower() in (ALL, "-1"):
        return -1
    n = _whole_number(text)
    if n is None or n > MAX_GPU_LAYERS:
        raise BadInputError(
            f"GPU layers must be 'all' or a whole number from 0 to {MAX_GPU_LAYERS}, "
            f"not '{text.strip()[:40]}'."
        )
    return n


class LoadDefaultsSection(QGroupBox):
    """Signals: defaults_saved(object LoadDefaults): the next load uses these."""

    defaults_saved = Signal(object)

    def __init__(self, settings: SettingsFile, parent: QWidget | None = None) -> None:
        super().__init__("Default load settings", parent)
        self._settings = settings
        self.context_edit = QLineEdit()
        self.context_edit.setObjectName("defaultContext")
        self.gpu_layers_edit = QLineEdit()
        self.gpu_layers_edit.setPlaceholderText(ALL)
        self.gpu_layers_edit.setToolTip("'all', or how many layers go to the GPU (0: none)")
        # As in the load dialog: on a backend without a GPU there is nothing to choose.
        self.has_gpu = gpu_build()
        if not self.has_gpu:
            self.gpu_layers_edit.setEnabled(False)
            self.gpu_layers_edit.setToolTip(
                "The llama.cpp backend the engine runs has no GPU backend, so every layer runs "
                "on the CPU. The Backends page adds a GPU one."
            )
        self.type_k = QComboBox()
        self.type_v = QComboBox()
        for box in (self.type_k, self.type_v):
            box.addItems(list(KV_TYPES))
        self.save_button = QPushButton("Save defaults")
        self.message = plain_label(QLabel())  # may quote what was typed
        self.message.setWordWrap(True)
        hint = QLabel(
            "Every model loads with these unless you change them when you load it. "
            "K q8_0 / V f16 keeps K in 8 bits: about a quarter less KV memory than f16/f16."
        )
        hint.setObjectName("hint")
        hint.setWordWrap(True)

        form = QFormLayout()
        form.addRow("Context length (tokens)", self.context_edit)
        form.addRow("GPU layers", self.gpu_layers_edit)
        form.addRow("K cache type", self.type_k)
        form.addRow("V cache type", self.type_v)
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(hint)
        layout.addLayout(buttons)

        self.save_button.clicked.connect(self.save)
        self.context_edit.returnPressed.connect(self.save)
        self.gpu_layers_edit.returnPressed.connect(self.save)
        self.refresh()

    def refresh(self) -> None:
        """Show the saved defaults (a load dialog may have changed them)."""
        s = self._settings.settings
        self.context_edit.setText(str(s.n_ctx))
        layers = ALL if s.n_gpu_layers < 0 else str(s.n_gpu_layers)
        self.gpu_layers_edit.setText(layers if self.has_gpu else NO_GPU)
        self.type_k.setCurrentText(s.type_k)
        self.type_v.setCurrentText(s.type_v)

    def save(self) -> None:
        try:
            chosen = LoadDefaults(
                parse_context(self.context_edit.text()),
                parse_gpu_layers(self.gpu_layers_edit.text())
                if self.has_gpu
                else self._settings.settings.n_gpu_layers,  # kept for a GPU backend later
                KvMode.of(self.type_k.currentText(), self.type_v.currentText()),
            )
            self._settings.update(
                n_ctx=chosen.n_ctx,
                n_gpu_layers=chosen.n_gpu_layers,
                type_k=chosen.kv.k.name,
                type_v=chosen.kv.v.name,
            )
        except BadInputError as error:
            self.message.setText(str(error))
            return
        except OSError as error:
            self.message.setText(f"The settings could not be saved: {error.strerror or error}.")
            return
        self.refresh()
        self.message.setText(f"Saved: the next load uses {chosen.sentence(self.has_gpu)}.")
        self.defaults_saved.emit(chosen)

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh()
        super().showEvent(event)
