"""The comparison's bar charts as a dashboard widget; the drawing itself is
app/services/compare_chart.py, shared with `kvstudio bench --plot`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.services.compare_chart import MODE_COLORS, ChartLook, paint_compare, render_compare_png
from app.ui.theme_colours import TEXT_COLOURS, scheme_of

__all__ = ["MODE_COLORS", "CompareBarChart"]


class CompareBarChart(QWidget):
    """The comparison's bar charts as a widget; `set_rows(rows)` redraws."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[Mapping[str, object]] = []  # CompareResult.rows(), or a saved run's
        self.title = ""
        self.setMinimumHeight(220)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_rows(self, rows: Sequence[Mapping[str, object]], title: str = "") -> None:
        self.rows = list(rows)
        self.title = title
        self.update()

    def paintEvent(self, _event: object) -> None:
        painter = QPainter(self)
        try:
            paint_compare(painter, QRectF(self.rect()), self.rows, self.title, self.look())
        finally:
            painter.end()

    def look(self) -> ChartLook:
        """The chart's colours in the look shown (its palette: a theme switch repaints it)."""
        words = TEXT_COLOURS[scheme_of(self.palette())]
        return ChartLook(*(QColor(words[name]) for name in ("chart", "text", "axis", "grid")))

    def save_png(self, path: str | Path) -> Path:
        return render_compare_png(
            self.rows, path, self.title, QSize(max(1000, self.width()), max(360, self.height()))
        )
