"""The Discover tab's tree of one Hub repo's GGUF files: a bold row per quantization, the
files under it with their sizes, and a fit verdict cell per KV mode beside each file."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QStandardItem

from app.kv.fit import FITS, TIGHT, UNSUPPORTED, FitEstimate
from app.kv.kv_types import COMPARE_MODES
from app.load.fit_speed import (
    SLOW_TOKENS_PER_SECOND,
    Bandwidth,
    estimate_speed,
    speed_sentence,
)
from app.models.hub import GgufEntry
from app.platform import units as fmt
from app.ui.models.verdicts import budget_text, paint_verdict, verdict_text
from app.ui.plain_text import PlainItemModel

ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1  # a file row's GgufEntry, on its first cell
MODE_COLUMN0 = 2  # first KV-mode column in the tree
# "File": the files sit under a bold row per quantization.
HEADERS = ("File", "Size") + tuple(f"KV {m.label}" for m in COMPARE_MODES)
RECOMMENDED = "Recommended here"  # after the name of the file recommended_file() picks


def quant_tail(index: QModelIndex | QPersistentModelIndex) -> str:
    """The end of a file row's name from its quantization on ('IQ4_XS', 'Q4_K_M  (2 parts)')."""
    entry = index.data(ENTRY_ROLE)
    text = str(index.data() or "")
    if not isinstance(entry, GgufEntry) or not entry.quantization:
        return ""
    at = text.upper().rfind(entry.quantization.upper())
    return text[at:] if at >= 0 else ""


class RepoFilesModel(PlainItemModel):
    """`add_group(quantization, entries)` per quantization; `show_fit(first_file, fit)` as
    each estimate arrives. `entries`: first_file -> (its GgufEntry, its row's first item)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(0, len(HEADERS), parent)  # plain text items: the Hub's file names
        self.setHorizontalHeaderLabels(list(HEADERS))
        self.entries: dict[str, tuple[GgufEntry, QStandardItem]] = {}
        self._names: dict[str, str] = {}  # first_file -> its row's name, without a mark
        self.recommended: str | None = None  # the first_file marked RECOMMENDED

    def clear_files(self) -> None:
        self.removeRows(0, self.rowCount())
        self.entries.clear()
        self._names.clear()
        self.recommended = None

    def add_group(self, quant: str, entries: list[GgufEntry]) -> None:
        total = sum(e.total_size for e in entries)
        label = quant if len(entries) == 1 else f"{quant}  ({len(entries)} files)"
        group = [
            QStandardItem(label),
            QStandardItem(fmt.size(total) if len(entries) > 1 else ""),
        ]
        group += [QStandardItem() for _ in COMPARE_MODES]
        font = group[0].font()
        font.setBold(True)
        group[0].setFont(font)
        for item in group:
            item.setSelectable(False)
        for entry in entries:
            shown = entry.name[:-5] if entry.name.lower().endswith(".gguf") else entry.name
            name = shown + (f"  ({entry.n_parts} parts)" if entry.is_split else "")
            row = [QStandardItem(name), QStandardItem(fmt.size(entry.total_size))]
            row += [QStandardItem("estimating…") for _ in COMPARE_MODES]
            row[0].setData(entry, ENTRY_ROLE)
            row[0].setToolTip(entry.first_file)
            row[1].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            group[0].appendRow(row)
            self.entries[entry.first_file] = (entry, row[0])
            self._names[entry.first_file] = name
        self.appendRow(group)

    def mode_items(self, first_file: str) -> list[QStandardItem]:
        _entry, row = self.entries[first_file]
        parent = row.parent()
        return [parent.child(row.row(), col) for col in range(MODE_COLUMN0, len(HEADERS))]

    def mark_recommended(self, first_file: str | None) -> None:
        """Mark `first_file`'s row "Recommended here" (None: no row), and no other."""
        if first_file == self.recommended:
            return
        for name, mark in ((self.recommended, False), (first_file, True)):
            if name is None or name not in self.entries:
                continue
            item = self.entries[name][1]
            item.setText(f"{self._names[name]}  · {RECOMMENDED}" if mark else self._names[name])
            font = item.font()
            font.setBold(mark)
            item.setFont(font)
            item.setToolTip(
                f"{name}\n{RECOMMENDED}: the largest quantization of this repo that fits and "
                f"decodes at {SLOW_TOKENS_PER_SECOND:.0f} tokens/s or more on this machine."
                if mark
                else name
            )
        self.recommended = first_file

    def show_fit(
        self,
        first_file: str,
        fit: FitEstimate | None,
        text: str = "",
        bandwidth: Bandwidth | None = None,
    ) -> None:
        """A file's verdict per KV mode, with its decode speed at `bandwidth` where it loads;
        with no `fit`, `text` in each cell instead."""
        for i, item in enumerate(self.mode_items(first_file)):
            if fit is None:
                item.setText(text)
                item.setBackground(QBrush())
                item.setForeground(QBrush())
                continue
            mode_fit = fit.modes[i]
            speed = None
            if bandwidth is not None and mode_fit.verdict in (FITS, TIGHT):  # it would load
                speed = estimate_speed(fit.weights_bytes, mode_fit.kv_bytes, bandwidth)
            item.setText(verdict_text(mode_fit, speed))
            paint_verdict(item, mode_fit.verdict)
            if mode_fit.verdict == UNSUPPORTED:
                item.setToolTip(mode_fit.reason)
                continue
            item.setToolTip(
                f"KV {mode_fit.mode.label} at {fit.n_ctx:,} tokens: {fmt.size(mode_fit.kv_bytes)}; "
                f"weights {fmt.size(fit.weights_bytes)}; total {fmt.size(mode_fit.total_bytes)} "
                f"of {fmt.size(fit.budget.bytes)} {budget_text(fit.budget)}."
                + (f"\n{speed_sentence(fit, speed)}" if speed is not None else "")
            )
