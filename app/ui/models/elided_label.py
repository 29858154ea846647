"""Text that gives up width gracefully instead of holding the window wide: a one-line label
elided in the middle (a repo id keeps its owner and its end), and a delegate that elides a
file name but keeps its quantization."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.ui.plain_text import plain_label, plain_tooltip

Index = QModelIndex | QPersistentModelIndex
MIN_CHARS = 12  # how much of the text the label still shows at its narrowest


class ElidedLabel(QLabel):
    """A plain-text QLabel whose minimum width is a few characters; when it is narrower than
    its text it paints the text elided and the tooltip carries it whole. text() stays whole."""

    def __init__(
        self,
        text: str = "",
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        plain_label(self)
        self._mode = mode
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(plain_tooltip(text))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        narrowest = self.fontMetrics().averageCharWidth() * MIN_CHARS
        return QSize(min(hint.width(), narrowest), hint.height())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), self._mode, rect.width())
        if shown == self.text():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), shown)


def elide_keeping_end(text: str, keep: str, metrics: QFontMetrics, width: int) -> str:
    """`text` cut to `width` pixels with its start elided and its end `keep` intact
    ('Meta-Llama-3.1-8B-…-IQ4_XS', or only '…IQ4_XS' when narrower); plain middle elision
    when `keep` does not end it or does not fit."""
    if metrics.horizontalAdvance(text) <= width:
        return text
    if keep and text.endswith(keep):
        room = width - metrics.horizontalAdvance(keep)
        if room > metrics.horizontalAdvance("M…"):
            head = metrics.elidedText(text[: -len(keep)], Qt.TextElideMode.ElideRight, room)
            return head + keep
        if room >= metrics.horizontalAdvance("…"):
            return "…" + keep  # no room for the name: the quantization tells files apart
    return metrics.elidedText(text, Qt.TextElideMode.ElideMiddle, width)


class KeepEndDelegate(QStyledItemDelegate):
    """Elides a cell's text but keeps the end that `keep_fn(index)` names (a file's
    quantization and what follows it), so 'Q4_K_M' and 'Q4_K_S' stay apart when narrow."""

    def __init__(self, keep_fn: Callable[[Index], str], parent: QObject | None = None):
        super().__init__(parent)
        self._keep_fn = keep_fn

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:  # noqa: N802
        super().initStyleOption(option, index)
        if not option.text:
            return
        # The width the style will draw the text in (less its margins), as it computes it.
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, widget)
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, widget) + 1
        width = rect.width() - 2 * margin
        if width > 0:
            option.text = elide_keeping_end(
                option.text, self._keep_fn(index), option.fontMetrics, width
            )
