"""The Discover tab's tree of one Hub repo's GGUF files: a bold row per quantization, the
files under it with their sizes, a fit verdict cell per KV mode beside each file, and the decode
speed it would reach on this machine (with "Recommended here" on the quantization to take)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QStandardItem

from app.kv.fit import FITS, TIGHT, UNSUPPORTED, FitEstimate
from app.kv.kv_types import COMPARE_MODES
from app.load.fit_speed import (
    SLOW_TOKENS_PER_SECOND,
    Bandwidth,
    best_speed,
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
# The KV mode columns are named by their K/V types alone (their tooltip says "KV cache"): the
# tree keeps room for the file's name at 1024 px.
HEADERS = ("File", "Size") + tuple(m.label for m in COMPARE_MODES) + ("Speed",)
SIZE_COLUMN = 1  # hidden in a narrow window: the size is in the name's tooltip then
SPEED_COLUMN = len(HEADERS) - 1  # the fastest KV mode that fits: "about 20 tokens/s"
RECOMMENDED = "Recommended here"  # after the quantization recommended_file() picks


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
        for col, mode in enumerate(COMPARE_MODES, start=MODE_COLUMN0):
            self.setHeaderData(
                col,
                Qt.Orientation.Horizontal,
                f"The fit with the KV cache in {mode.label} (K type / V type)",
                Qt.ItemDataRole.ToolTipRole,
            )
        self.setHeaderData(
            SPEED_COLUMN,
            Qt.Orientation.Horizontal,
            "Decode speed on this machine (estimated), with the KV mode that fits best",
            Qt.ItemDataRole.ToolTipRole,
        )
        self.entries: dict[str, tuple[GgufEntry, QStandardItem]] = {}
        self._groups: dict[str, tuple[QStandardItem, str]] = {}  # first_file -> group, label
        self.recommended: str | None = None  # the first_file marked RECOMMENDED

    def clear_files(self) -> None:
        self.removeRows(0, self.rowCount())
        self.entries.clear()
        self._groups.clear()
        self.recommended = None

    def add_group(self, quant: str, entries: list[GgufEntry]) -> None:
        total = sum(e.total_size for e in entries)
        label = quant if len(entries) == 1 else f"{quant}  ({len(entries)} files)"
        group = [
            QStandardItem(label),
            QStandardItem(fmt.size(total) if len(entries) > 1 else ""),
        ]
        group += [QStandardItem() for _ in COMPARE_MODES] + [QStandardItem()]
        font = group[0].font()
        font.setBold(True)
        group[0].setFont(font)
        for item in group:
            item.setSelectable(False)
        for entry in entries:
            shown = entry.name[:-5] if entry.name.lower().endswith(".gguf") else entry.name
            name = shown + (f"  ({entry.n_parts} parts)" if entry.is_split else "")
            row = [QStandardItem(name), QStandardItem(fmt.size(entry.total_size))]
            row += [QStandardItem("estimating…") for _ in COMPARE_MODES] + [QStandardItem()]
            row[0].setData(entry, ENTRY_ROLE)
            row[0].setToolTip(f"{entry.first_file}: {fmt.size(entry.total_size)}")
            row[1].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            group[0].appendRow(row)
            self.entries[entry.first_file] = (entry, row[0])
            self._groups[entry.first_file] = (group[0], label)
        self.appendRow(group)

    def mode_items(self, first_file: str) -> list[QStandardItem]:
        _entry, row = self.entries[first_file]
        parent = row.parent()
        return [parent.child(row.row(), col) for col in range(MODE_COLUMN0, SPEED_COLUMN)]

    def speed_item(self, first_file: str) -> QStandardItem:
        _entry, row = self.entries[first_file]
        return row.parent().child(row.row(), SPEED_COLUMN)

    def mark_recommended(self, first_file: str | None) -> None:
        """Mark the quantization of `first_file` "Recommended here" (None: none), no other."""
        for name, mark in ((self.recommended, False), (first_file, True)):
            if name is None or name not in self._groups:
                continue
            group, label = self._groups[name]
            group.setText(f"{label}  · {RECOMMENDED}" if mark else label)
            group.setToolTip(
                f"{RECOMMENDED}: the largest quantization of this repo that fits and decodes at "
                f"{SLOW_TOKENS_PER_SECOND:.0f} tokens/s or more on this machine ({name})."
                if mark
                else ""
            )
        self.recommended = first_file

    def show_fit(
        self,
        first_file: str,
        fit: FitEstimate | None,
        text: str = "",
        bandwidth: Bandwidth | None = None,
    ) -> None:
        """A file's verdict per KV mode (a slow one says so) and its decode speed at
        `bandwidth`; with no `fit`, `text` in each verdict cell instead."""
        self.speed_item(first_file).setText("")
        self.speed_item(first_file).setToolTip("")
        if fit is not None and bandwidth is not None:
            speed = best_speed(fit, bandwidth)
            item = self.speed_item(first_file)
            if speed is None:  # no KV mode fits with room to spare
                item.setText("–")
            else:
                item.setText(f"slow: {speed.short()}" if speed.slow else speed.short())
                item.setToolTip(speed_sentence(fit, speed))
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
            item.setText(verdict_text(mode_fit, speed, compact=True))
            paint_verdict(item, mode_fit.verdict)
            if mode_fit.verdict == UNSUPPORTED:
                item.setToolTip(mode_fit.reason)
                continue
            lines = [
                f"KV {mode_fit.mode.label} at {fit.n_ctx:,} tokens: {fmt.size(mode_fit.kv_bytes)}; "
                f"weights {fmt.size(fit.weights_bytes)}; total {fmt.size(mode_fit.total_bytes)} "
                f"of {fmt.size(fit.budget.bytes)} {budget_text(fit.budget)}."
            ]
            if mode_fit.largest_n_ctx:  # the cell's number
                lines.insert(0, f"At most {fmt.tokens(mode_fit.largest_n_ctx)} fit.")
            if speed is not None:
                lines.append(speed_sentence(fit, speed))
            item.setToolTip("\n".join(lines))
