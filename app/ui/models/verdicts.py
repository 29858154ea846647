"""How a fit verdict looks wherever the Models page shows one: colours, text, the budget."""

from __future__ import annotations

from PySide6.QtGui import QBrush, QColor, QPalette, QStandardItem
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QTableWidgetItem

from app.kv.fit import FITS, NO_FIT, TIGHT, UNSUPPORTED, ModeFit
from app.load.fit_speed import SpeedEstimate
from app.platform import units as fmt
from app.platform.probes import FreeMemory
from app.ui.theme_colours import DARK, scheme_of

# Background / text colours per verdict: readable on light and dark palettes.
VERDICT_COLOURS = {
    FITS: (QColor("#d7f5dd"), QColor("#11602a")),
    TIGHT: (QColor("#fff1c7"), QColor("#7a5300")),
    NO_FIT: (QColor("#fbd9d7"), QColor("#8c1d18")),
    UNSUPPORTED: (QColor("#eceef2"), QColor("#5b6170")),
}
# The same in the dark look, where a box of the light ones glares (the load dialog's fit line).
DARK_VERDICT_COLOURS = {
    FITS: (QColor("#173d2a"), QColor("#7ee2a8")),
    TIGHT: (QColor("#3d3112"), QColor("#f5d06f")),
    NO_FIT: (QColor("#4a1f1d"), QColor("#f4a09a")),
    UNSUPPORTED: (QColor("#2a2e36"), QColor("#aeb6c2")),
}


# A verdict's light colours -> its dark ones (the cells are painted in the light ones).
_IN_THE_DARK = {VERDICT_COLOURS[v][0].rgb(): DARK_VERDICT_COLOURS[v] for v in VERDICT_COLOURS}


def paint_verdict(item: QStandardItem | QTableWidgetItem, verdict: str) -> None:
    background, foreground = VERDICT_COLOURS[verdict]
    item.setBackground(QBrush(background))
    item.setForeground(QBrush(foreground))


class VerdictDelegate(QStyledItemDelegate):
    """Keeps a verdict cell's colours on a selected row (the name column shows the selection),
    in the shades of the look shown: in the dark one, the dark verdict colours."""

    def initStyleOption(self, option, index) -> None:
        super().initStyleOption(option, index)
        option.state &= ~QStyle.StateFlag.State_Selected
        dark = _IN_THE_DARK.get(option.backgroundBrush.color().rgb())
        if dark is not None and scheme_of(option.palette) == DARK:
            option.backgroundBrush = QBrush(dark[0])
            option.palette.setColor(QPalette.ColorRole.Text, dark[1])


def verdict_text(fit: ModeFit, speed: SpeedEstimate | None = None, compact: bool = False) -> str:
    """'fits · max 32K' ('fits · 32K' `compact`, for a column beside others whose tooltip
    says what the number is), or for a file that fits but decodes under
    SLOW_TOKENS_PER_SECOND at `speed` 'fits, slow: about 3.1 tokens/s' ('fits, slow'
    `compact`: the file tree's Speed column and the cell's tooltip say how slow, and the
    longer words left its File column no width at all)."""
    if speed is not None and speed.slow:
        return f"{fit.verdict}, slow" if compact else f"{fit.verdict}, slow: {speed.describe()}"
    if not fit.largest_n_ctx:
        return fit.verdict
    return f"{fit.verdict} · {'' if compact else 'max '}{fmt.tokens_short(fit.largest_n_ctx)}"


def budget_text(budget: FreeMemory) -> str:
    """'free VRAM (NVIDIA H200)' or 'free system RAM'."""
    return f"free VRAM ({budget.device})" if budget.on_gpu else f"free {budget.device}"
