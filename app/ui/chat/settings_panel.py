"""Per-conversation settings: system prompt and sampling (saved with the conversation)."""

from __future__ import annotations

from dataclasses import asdict

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.messages import SamplingSettings
from app.ui.plain_text import typed_text


def _double(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    return box


class SettingsPanel(QWidget):
    """Signals:
    settings_changed(str, dict): (system prompt, sampling dict), debounced.
    """

    settings_changed = Signal(str, dict)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self._loading = False
        title = QLabel("Chat settings")
        title.setObjectName("panelTitle")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("System prompt (optional)")
        self.system_prompt.setMaximumHeight(120)
        self.temperature = _double(0.0, 2.0, 0.05)
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_p = _double(0.0, 1.0, 0.01)
        self.min_p = _double(0.0, 1.0, 0.01)
        self.repeat_penalty = _double(0.5, 2.0, 0.01)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 131072)
        self.stop_strings = QPlainTextEdit()
        self.stop_strings.setPlaceholderText("One stop string per line (\\n for a newline)")
        self.stop_strings.setMaximumHeight(70)
        self.reset_button = QPushButton("Reset to defaults")
        form = QFormLayout()
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-k", self.top_k)
        form.addRow("Top-p", self.top_p)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("Max tokens", self.max_tokens)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.addWidget(title)
        layout.addWidget(QLabel("System prompt"))
        layout.addWidget(self.system_prompt)
        layout.addLayout(form)
        layout.addWidget(QLabel("Stop strings"))
        layout.addWidget(self.stop_strings)
        layout.addWidget(self.reset_button)
        layout.addStretch(1)
        self._timer = QTimer(self, singleShot=True, interval=300)
        self._timer.timeout.connect(self._emit)
        for box in (
            self.temperature,
            self.top_k,
            self.top_p,
            self.min_p,
            self.repeat_penalty,
            self.max_tokens,
        ):
            box.valueChanged.connect(self._changed)
        self.system_prompt.textChanged.connect(self._changed)
        self.stop_strings.textChanged.connect(self._changed)
        self.reset_button.clicked.connect(self._on_reset_clicked)
        self.show_settings("", {})

    def _on_reset_clicked(self) -> None:
        self.show_settings(self.system_prompt.toPlainText(), {})
        self._timer.start()

    def show_settings(self, system_prompt: str, sampling: dict) -> None:
        """Show a conversation's settings (missing keys: the defaults)."""
        values = {**asdict(SamplingSettings()), **sampling}
        self._timer.stop()
        self._loading = True
        self.system_prompt.setPlainText(system_prompt)
        self.temperature.setValue(float(values["temperature"]))
        self.top_k.setValue(int(values["top_k"]))
        self.top_p.setValue(float(values["top_p"]))
        self.min_p.setValue(float(values["min_p"]))
        self.repeat_penalty.setValue(float(values["repeat_penalty"]))
        self.max_tokens.setValue(int(values["max_tokens"]))
        stops = [s.encode("unicode_escape").decode("ascii") for s in values.get("stop") or ()]
        self.stop_strings.setPlainText("\n".join(stops))
        self._loading = False

    def sampling(self) -> dict:
        stops = []
        for line in self.stop_strings.toPlainText().splitlines():
            if line:
                stops.append(line.encode("latin-1", "backslashreplace").decode("unicode_escape"))
        return {
            "temperature": round(self.temperature.value(), 4),
            "top_k": self.top_k.value(),
            "top_p": round(self.top_p.value(), 4),
            "min_p": round(self.min_p.value(), 4),
            "repeat_penalty": round(self.repeat_penalty.value(), 4),
            "max_tokens": self.max_tokens.value(),
            "stop": stops,
        }

    def _changed(self) -> None:
        if not self._loading:
            self._timer.start()

    def flush(self) -> None:
        """Emit pending changes now (before sending a message)."""
        if self._timer.isActive():
            self._timer.stop()
            self._emit()

    def _emit(self) -> None:
        self.settings_changed.emit(typed_text(self.system_prompt), self.sampling())
