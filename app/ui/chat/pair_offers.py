"""The load dialog's word on a K/V pair the running GPU backend has no Flash Attention kernel
for: a warning that says what llama.cpp would do instead (convert the cache to f16 at every
step), and a button for each pair it has (int8 K and V, or plain f16)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.engine.build_info import BackendPairs
from app.kv.kv_types import FP16_KV_MODE, INT8_KV_MODE, KvMode
from app.ui.tones import WARNING, set_tone

# What the dialog offers when the chosen K/V pair has no Flash Attention kernel in the
# running GPU backend: int8 K and V (in llama.cpp's default pair list), or plain f16.
ALTERNATIVE_PAIRS = (INT8_KV_MODE, FP16_KV_MODE)


class PairOffers(QWidget):
    """Shown only while the chosen pair lacks a kernel. Signals:
    pair_chosen(object): a button's KvMode was pressed.
    """

    pair_chosen = Signal(object)

    def __init__(self, pairs: BackendPairs | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pairs = pairs
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setObjectName("pairWarning")
        set_tone(self.warning, WARNING)  # the look's warning box
        self.buttons: dict[KvMode, QPushButton] = {}
        offers = QHBoxLayout()
        for mode in ALTERNATIVE_PAIRS:
            button = QPushButton(f"Use K={mode.k.name} / V={mode.v.name}")
            button.clicked.connect(lambda _=False, mode=mode: self.pair_chosen.emit(mode))
            self.buttons[mode] = button
            offers.addWidget(button)
        offers.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.warning)
        layout.addLayout(offers)

    def show_support(self, mode: KvMode) -> None:
        """Say whether the backend runs `mode`'s pair; offer the pairs it has when it does not."""
        missing = self._pairs is not None and self._pairs.native(mode) is False
        self.setVisible(missing)
        self.warning.setVisible(missing)
        for other, button in self.buttons.items():
            ok = self._pairs is not None and self._pairs.native(other) is not False
            button.setVisible(missing and ok)
        if missing and self._pairs is not None:
            offered = [m.label for m, b in self.buttons.items() if not b.isHidden()]
            instead = " or ".join(offered) if offered else "another pair"
            self.warning.setText(
                f"The {self._pairs.backend} backend has no Flash Attention kernel for "
                f"K={mode.k.name} / V={mode.v.name}: llama.cpp would convert the cache to f16 at "
                "every step, which is slow and gives back the memory int8-K saves. Use "
                f"{instead} instead."
            )
