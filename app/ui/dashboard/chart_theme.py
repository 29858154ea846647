"""The Dashboard's pyqtgraph charts in the shown look: pyqtgraph draws with its own pens
(grey #969696 numbers, 3:1 on white), not the app's palette or style sheet, so each chart is
painted again with the look's colours (app.ui.theme.TEXT_COLOURS) when it is made and whenever
the app's palette changes (a theme switch)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent

from app.ui.theme import text_colour


def paint_chart(plot: pg.PlotWidget) -> None:
    """Background, axes (lines, numbers, labels) and legend names in the shown look."""
    item = plot.getPlotItem()
    if item is None:  # Qt reports a palette change while pyqtgraph is still building it
        return
    plot.setBackground(text_colour("chart"))
    words = text_colour("axis")
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setPen(pg.mkPen(words))
        axis.setTextPen(pg.mkPen(words))
        if axis.labelText or axis.labelUnits:  # setLabel sets all of it: the same words again
            axis.setLabel(
                axis.labelText,
                units=axis.labelUnits or None,
                unitPrefix=axis.labelUnitPrefix or None,
                **(axis.labelStyle | {"color": words}),
            )
    legend = item.legend
    if legend is not None:
        legend.setLabelTextColor(text_colour("text"))
        for _sample, label in legend.items:
            label.setText(label.text, color=text_colour("text"))


def is_palette_change(event: QEvent) -> bool:
    return event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
