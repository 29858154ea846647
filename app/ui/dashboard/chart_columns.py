"""The Dashboard's two charts under their titles: side by side on a wide page, so both are
on screen at 1024x640, and stacked on a narrow one."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QBoxLayout, QLabel, QVBoxLayout, QWidget

SIDE_BY_SIDE_MIN_WIDTH = 760  # px of page: below it the two charts stack


def section_title(title: str) -> QLabel:
    """A title over a part of the Dashboard (a chart, the Compare section)."""
    label = QLabel(title)
    label.setObjectName("sectionTitle")  # its look, light or dark: assets/style*.qss
    return label


class ChartColumns(QBoxLayout):
    """One column per (title, chart); `fit_width(page_width)` on each resize of the page."""

    def __init__(self, charts: Sequence[tuple[str, QWidget]]) -> None:
        super().__init__(QBoxLayout.Direction.LeftToRight)
        self.setSpacing(16)
        for title, chart in charts:
            column = QVBoxLayout()
            column.setSpacing(2)
            column.addWidget(section_title(title))
            column.addWidget(chart, 1)
            self.addLayout(column, 1)

    def fit_width(self, page_width: int) -> None:
        wide = page_width >= SIDE_BY_SIDE_MIN_WIDTH
        direction = QBoxLayout.Direction.LeftToRight if wide else QBoxLayout.Direction.TopToBottom
        if self.direction() != direction:
            self.setDirection(direction)
