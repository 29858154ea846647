"""The load dialog's K/V cache choice: Auto (the KV advisor's mode and context, why in its
tooltip), the modes that make sense with one line each, and every K and V type llama.cpp
accepts behind "More".

`type_k` and `type_v` hold the choice (the dialog reads and sets them); the mode box follows
them, showing "Other" for a pair it does not list. Choosing Auto sets both types and emits
`auto_chosen(advice)`, so the dialog sets the context too.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.kv.advisor import Advice
from app.kv.kv_types import DEFAULT_KV_MODE, KV_MODES, KV_TYPES, KvMode
from app.load.advice import advise_model
from app.services.tasks import TaskRunner
from app.ui.plain_text import plain_tooltip

AUTO, OTHER = "auto", "other"
AUTO_WAITING = "Auto: the advisor is reading this model…"
# What each listed mode is for, in a line (the share of KV memory is computed, below).
_USES = {
    "f16/f16": "full quality, the reference",
    "q8_0/f16": "int8-K, K in 8 bits (the default)",
    "q8_0/q8_0": "K and V in 8 bits",
    "q4_0/q4_0": "K and V in 4 bits: a visible quality cost",
}


def kv_share(mode: KvMode) -> float:
    """The KV bytes of `mode` as a share of f16/f16's (per 32 values of K and of V)."""
    f16 = KV_TYPES["f16"]
    per_block = mode.k.row_bytes(32) + mode.v.row_bytes(32)
    return per_block / (2 * f16.row_bytes(32))


def mode_line(mode: KvMode) -> str:
    """'q8_0/f16 - int8-K, K in 8 bits (the default); 77% of the f16 KV memory'."""
    use = _USES.get(mode.label, mode.role)
    return f"{mode.label} - {use}; {kv_share(mode):.0%} of the f16 KV memory"


def auto_line(advice: Advice) -> str:
    if advice.choice is None:
        return "Auto: no advice for this machine (see the tooltip)"
    return f"Auto: {advice.choice.mode.label} at {advice.n_ctx:,} tokens (the advisor's choice)"


def auto_tooltip(advice: Advice) -> str:
    rows = "\n".join(
        f"  {r.mode.label}: up to {r.largest_n_ctx:,} tokens, "
        + ("KL -" if r.quality.kl is None else f"KL {r.quality.kl:.4f}")
        + f" ({r.quality.words})"
        for r in advice.rows
        if not r.unavailable
    )
    notes = "".join(f"\n{note}" for note in advice.notes)
    return plain_tooltip(
        f"{advice.sentence}\nRule: {advice.rule} (KL <= {advice.max_kl:g}).\n{rows}{notes}"
    )


def _advise(model_path: str, n_gpu_layers: int) -> Advice:
    """Off the GUI thread: the advisor's answer (the file's sha256 is read once, then kept)."""
    return advise_model(Path(model_path), n_gpu_layers=n_gpu_layers)


class KvChoice(QWidget):
    """Signals:
    auto_chosen(object): Auto was chosen; the Advice (its mode is set in type_k/type_v).
    """

    auto_chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.advice: Advice | None = None
        self._syncing = False
        self.mode_box = QComboBox()
        self.mode_box.setObjectName("kvModeBox")
        self.mode_box.addItem(AUTO_WAITING, AUTO)
        for mode in KV_MODES:
            self.mode_box.addItem(mode_line(mode), mode.label)
        self.mode_box.addItem("Other K and V types (under More)", OTHER)
        self._enable_auto(False)
        self.more_button = QToolButton()
        self.more_button.setText("More")
        self.more_button.setCheckable(True)
        self.more_button.setToolTip("Every K and V cache type llama.cpp accepts, one by one.")
        self.type_k = QComboBox()
        self.type_v = QComboBox()
        for box in (self.type_k, self.type_v):
            box.addItems(list(KV_TYPES))
        self.type_k.setCurrentText(DEFAULT_KV_MODE.k.name)
        self.type_v.setCurrentText(DEFAULT_KV_MODE.v.name)
        self.more = QWidget()
        more = QFormLayout(self.more)
        more.setContentsMargins(0, 0, 0, 0)
        more.addRow("K cache type", self.type_k)
        more.addRow("V cache type", self.type_v)
        self.more.setVisible(False)

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.mode_box, 1)
        row.addWidget(self.more_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.more)

        self.more_button.toggled.connect(self.more.setVisible)
        self.mode_box.activated.connect(self._on_mode_activated)
        self.type_k.currentTextChanged.connect(self._follow_types)
        self.type_v.currentTextChanged.connect(self._follow_types)
        self._follow_types()

    # ---- the advisor ---------------------------------------------------------------------

    def ask_advisor(self, runner: TaskRunner, model_path: str, n_gpu_layers: int) -> None:
        """Ask the advisor about the model read, on `runner`'s thread; Auto offers the answer."""
        runner.submit(
            "advise",
            _advise,
            model_path,
            n_gpu_layers,
            on_done=self.set_advice,
            on_error=lambda message, _error: self.set_advice(None, message),
        )

    def set_advice(self, advice: Advice | None, why_not: str = "") -> None:
        """The advisor's answer for the model read (None: it failed, `why_not` says why)."""
        self.advice = advice
        self.mode_box.setItemText(
            0, auto_line(advice) if advice else "Auto: not available for this model"
        )
        self.mode_box.setItemData(
            0,
            auto_tooltip(advice) if advice else plain_tooltip(why_not),
            Qt.ItemDataRole.ToolTipRole,
        )
        self.mode_box.setToolTip(auto_tooltip(advice) if advice else plain_tooltip(why_not))
        self._enable_auto(advice is not None and advice.choice is not None)

    def choose_auto(self) -> None:
        """Take the advisor's choice (as choosing Auto in the box does)."""
        if self.advice is None or self.advice.choice is None:
            return
        self.set_mode(self.advice.choice.mode)
        self.mode_box.setCurrentIndex(0)
        self.auto_chosen.emit(self.advice)

    def _enable_auto(self, enabled: bool) -> None:
        model = cast(QStandardItemModel, self.mode_box.model())  # a QComboBox's own model
        item = model.item(0)
        item.setEnabled(enabled)

    # ---- the choice --------------------------------------------------------------------

    def mode(self) -> KvMode:
        return KvMode.of(self.type_k.currentText(), self.type_v.currentText())

    def set_mode(self, mode: KvMode) -> None:
        self._syncing = True  # one change for the pair, not one per box
        self.type_k.setCurrentText(mode.k.name)
        self._syncing = False
        self.type_v.setCurrentText(mode.v.name)

    def _on_mode_activated(self, index: int) -> None:
        data = self.mode_box.itemData(index)
        if data == AUTO:
            self.choose_auto()
        elif data == OTHER:
            self.more_button.setChecked(True)
        else:
            self.set_mode(KvMode.parse(str(data)))

    def _follow_types(self) -> None:
        """The mode box shows the pair the type boxes hold (Auto while it is the advice's)."""
        if self._syncing:
            return
        mode = self.mode()
        current = self.mode_box.currentData()
        if current == AUTO and self.advice and self.advice.choice:
            if self.advice.choice.mode == mode:
                return
        index = self.mode_box.findData(mode.label)
        if index < 0:  # a pair not listed: its types are under More
            index = self.mode_box.findData(OTHER)
        self.mode_box.setCurrentIndex(index)
