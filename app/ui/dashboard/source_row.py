"""The row over the Dashboard's charts: which recording is shown (the live engine, the Compare
run, or an opened file) and one line of that recording's memory: now, its peak and what
measured it, and the whole device (system RAM on a CPU)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QWidget

from app.platform import units as fmt
from app.platform.recording import MemoryPoint
from app.ui.dashboard.compare_control import peak_measure

SOURCES = ("live", "compare", "file")
SOURCE_LABELS = ("Live engine", "Compare run", "Opened recording")
MIB_UP_TO = 4 * 1024**3  # bytes: a figure below it is written in MiB, as the chart's axis is


def memory_text(n: int | None) -> str:
    """A memory figure of the line: MiB below 4 GiB, GiB from there; '-' when unknown."""
    if n is None:
        return "-"
    return fmt.size(n, 0, unit="MiB") if n < MIB_UP_TO else fmt.gib(n)


def whole_name(probe_name: str) -> str:
    """What the whole figure is: the machine's RAM where memory is read with psutil (the CPU
    backend, or a GPU probe that fell back), else the GPU the probe reads."""
    return "system RAM" if probe_name == "psutil" else "device"


def stats_text(points: Sequence[MemoryPoint], live: bool, probe_name: str) -> str:
    """The line (rich text) for a recording's `points`; `live`: the points are still coming."""
    if not points:
        return "no samples yet"
    now = points[-1]
    peak_point = max(points, key=lambda p: p.used_bytes)
    whole = (
        f" &middot; {whole_name(probe_name)} {memory_text(now.device_used_bytes)} used "
        f"of {memory_text(now.total_bytes)}"
        if now.total_bytes
        else ""
    )
    label = "now" if live else "at the end"
    _short, measure = peak_measure(probe_name, peak_point.process_bytes is not None)
    return (
        f"{label} <b>{memory_text(now.used_bytes)}</b> &middot; "
        f"peak <b>{memory_text(peak_point.used_bytes)}</b> ({measure}, whole recording){whole}"
    )


class SourceRow(QWidget):
    """Signals:
    source_chosen(str): the user picked a source in the box (one of SOURCES).
    """

    source_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.box = QComboBox()
        self.box.addItems(SOURCE_LABELS)
        self.stats = QLabel("")
        self.stats.setTextFormat(Qt.TextFormat.RichText)
        # Text that changes twice a second must not change the label's size hint: a new size
        # re-lays the page out and repaints both charts (measured: 50-100 ms stalls).
        self.stats.setFixedHeight(self.stats.fontMetrics().lineSpacing() + 6)
        self.stats.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Show"))
        row.addWidget(self.box)
        row.addSpacing(12)
        row.addWidget(self.stats, 1)
        self.box.currentIndexChanged.connect(self._on_box_index_changed)

    def show_source(self, source: str) -> None:
        """Select `source` in the box (no signal when it already is)."""
        index = SOURCES.index(source)
        if self.box.currentIndex() != index:
            self.box.setCurrentIndex(index)

    def show_stats(self, points: Sequence[MemoryPoint], live: bool, probe_name: str) -> None:
        self.stats.setText(stats_text(points, live, probe_name))

    def _on_box_index_changed(self, index: int) -> None:
        self.source_chosen.emit(SOURCES[index])
