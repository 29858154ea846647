"""Text contrast on a rendered page, as WCAG 2 measures it: (L1 + 0.05) / (L2 + 0.05) of the
relative luminances of the text's colour and the background it is drawn on; AA asks 4.5:1 for
body text. The text colour is the widget's own (its palette's foreground role, which Qt's
style-sheet engine sets from a `color:` rule, or an item's or chart item's colour, or a colour
named in a rich-text label's HTML); the background is what was really painted there: the most
common colour of the widget's pixels in a grab of its window (text covers a small share of
them), so a parent's style-sheet background counts.

    problems = contrast_problems(page)   # ["QLabel 'Memory': 1.3:1 (#111827 on #16181d)", ...]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, QPoint, QRect
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QStyleOptionViewItem,
    QTabBar,
    QTableWidget,
    QTextEdit,
    QWidget,
)

AA = 4.5
_HTML_COLOUR = re.compile(r"color\s*:\s*(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b")


def luminance(colour: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(colour.redF())
        + 0.7152 * channel(colour.greenF())
        + 0.0722 * channel(colour.blueF())
    )


def contrast(a: QColor, b: QColor) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def painted_background(image: QImage, rect: QRect) -> QColor:
    """The most common colour of `rect` in `image` (every 2nd pixel each way)."""
    ratio = image.devicePixelRatio()
    counts: Counter[int] = Counter()
    bounds = rect.intersected(QRect(0, 0, int(image.width() / ratio), int(image.height() / ratio)))
    for y in range(bounds.top(), bounds.bottom() + 1, 2):
        for x in range(bounds.left(), bounds.right() + 1, 2):
            counts[image.pixel(int(x * ratio), int(y * ratio)) & 0xFFFFFF] += 1
    if not counts:
        return QColor("#000000")
    return QColor(counts.most_common(1)[0][0])


def painted_text(image: QImage, rect: QRect, background: QColor) -> QColor:
    """The colour inside `rect` that differs most from `background` (a glyph's solid core)."""
    ratio = image.devicePixelRatio()
    best, best_ratio = background, 1.0
    for y in range(rect.top(), rect.bottom() + 1):
        for x in range(rect.left(), rect.right() + 1):
            colour = QColor(image.pixel(int(x * ratio), int(y * ratio)))
            if (value := contrast(colour, background)) > best_ratio:
                best, best_ratio = colour, value
    return best


def _text_of(widget: QWidget) -> str:
    for getter in ("text", "title", "currentText", "toPlainText"):
        method = getattr(widget, getter, None)
        if callable(method):
            value = method()
            if isinstance(value, str):
                return value
    return ""


def _foreground(widget: QWidget) -> QColor:
    role = widget.foregroundRole()
    if isinstance(widget, (QLineEdit, QAbstractSpinBox, QPlainTextEdit, QTextEdit)):
        role = QPalette.ColorRole.Text
    return widget.palette().color(QPalette.ColorGroup.Active, role)


def _on_screen(widget: QWidget) -> bool:
    """Shown and not scrolled out of sight: the grab holds the pixels painted under it (a
    widget below a scroll area's fold is checked with the area scrolled to it)."""
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def _checked_widgets(root: QWidget) -> Iterator[QWidget]:
    kinds = (QLabel, QAbstractButton, QLineEdit, QAbstractSpinBox, QComboBox, QGroupBox)
    for widget in root.findChildren(QWidget):
        if isinstance(widget, kinds) and _on_screen(widget) and widget.isEnabled():
            if widget.width() > 2 and widget.height() > 2 and _text_of(widget).strip():
                yield widget


def _rect_in_window(widget: QWidget) -> QRect:
    top_left = widget.mapTo(widget.window(), QPoint(0, 0))
    return QRect(top_left, widget.size())


def _describe(widget: QWidget, text: str) -> str:
    words = re.sub(r"<[^>]+>", "", text).strip().replace("\n", " ")[:40]
    name = widget.objectName()
    return f"{type(widget).__name__}{'#' + name if name else ''} '{words}'"


def contrast_problems(root: QWidget, minimum: float = AA) -> list[str]:
    """Every text under `root` (visible, enabled) whose contrast is below `minimum`."""
    image = root.window().grab().toImage()
    problems: list[str] = []

    def check(what: str, text_colour: QColor, background: QColor) -> None:
        ratio = contrast(text_colour, background)
        if ratio < minimum:
            problems.append(f"{what}: {ratio:.1f}:1 ({text_colour.name()} on {background.name()})")

    for widget in _checked_widgets(root):
        text = _text_of(widget)
        rect = _rect_in_window(widget)
        if isinstance(widget, QGroupBox):  # the title sits on the group's top edge
            rect = QRect(rect.left(), rect.top(), rect.width(), widget.fontMetrics().height())
        background = painted_background(image, rect)
        what = _describe(widget, text)
        foreground = _foreground(widget)
        if isinstance(widget, QPushButton) and widget.isDefault():
            # Drawn from the style sheet's QPushButton:default rule, which Qt does not put in
            # the palette: the painted text is the pixel that stands out most inside it.
            foreground = painted_text(image, rect.adjusted(4, 4, -4, -4), background)
        check(what, foreground, background)
        if isinstance(widget, QLabel):
            for colour in _HTML_COLOUR.findall(text):
                check(f"{what} (its {colour} text)", QColor(colour), background)
    for table in root.findChildren(QTableWidget):
        if _on_screen(table):
            problems += _table_problems(table, image, check)
    for bar in root.findChildren(QTabBar):
        if _on_screen(bar):
            for i in range(bar.count()):
                rect = bar.tabRect(i).translated(bar.mapTo(bar.window(), QPoint(0, 0)))
                colour = bar.tabTextColor(i)
                if not colour.isValid():
                    colour = bar.palette().color(QPalette.ColorRole.WindowText)
                check(f"tab '{bar.tabText(i)}'", colour, painted_background(image, rect))
    for plot in root.findChildren(pg.PlotWidget):
        if _on_screen(plot):
            background = painted_background(image, _rect_in_window(plot))
            for what, colour in chart_text_colours(plot):
                check(
                    f"chart {plot.objectName() or type(plot).__name__} {what}", colour, background
                )
    return problems


# A text on a background lighter than this (relative luminance) in the dark look sits on a
# box left in the light look's colours: a glare in a dark window, whatever its own contrast.
# The dark look's brightest backgrounds (its blue buttons, #2f6fdb) are at 0.17.
DARK_LOOK_BRIGHTEST = 0.4


def light_boxes(root: QWidget) -> list[str]:
    """In the dark look: every text under `root` (as contrast_problems finds them) painted
    on a light background."""
    image = root.window().grab().toImage()
    found = []
    for widget in _checked_widgets(root):
        background = painted_background(image, _rect_in_window(widget))
        if luminance(background) > DARK_LOOK_BRIGHTEST:
            what = _describe(widget, _text_of(widget))
            found.append(f"{what}: on {background.name()}, a light box in the dark look")
    return found


def _table_problems(table: QTableWidget, image: QImage, check) -> list[str]:  # type: ignore[no-untyped-def]
    header: QHeaderView = table.horizontalHeader()
    if header.isVisible():
        rect = _rect_in_window(header)
        colour = header.palette().color(QPalette.ColorRole.ButtonText)
        check(f"{_describe(table, '')} header", colour, painted_background(image, rect))
    viewport = table.viewport()
    for row in range(min(table.rowCount(), 5)):
        for column in range(table.columnCount()):
            item = table.item(row, column)
            if item is None or not item.text():
                continue
            cell = table.visualItemRect(item).translated(
                viewport.mapTo(table.window(), QPoint(0, 0))
            )
            colour = _cell_text_colour(table, table.indexFromItem(item))
            check(f"table cell '{item.text()[:20]}'", colour, painted_background(image, cell))
    return []


def _cell_text_colour(table: QTableWidget, index: QModelIndex) -> QColor:
    """The colour the cell's delegate draws its text in: the item's own colour, the table's
    (selected or not), or what a delegate puts in its place (the verdict cells' dark shades)."""
    option = QStyleOptionViewItem()
    table.initViewItemOption(option)
    if table.selectionModel().isSelected(index):  # as the view paints it
        option.state |= QStyle.StateFlag.State_Selected
    delegate = table.itemDelegateForColumn(index.column()) or table.itemDelegate()
    delegate.initStyleOption(option, index)  # type: ignore[attr-defined]
    selected = bool(option.state & QStyle.StateFlag.State_Selected)
    role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
    return option.palette.color(role)


def chart_text_colours(plot: pg.PlotWidget) -> list[tuple[str, QColor]]:
    """The colours pyqtgraph draws a plot's words and numbers in: each shown axis's tick
    numbers and label, the title, the legend's names and text items such as marker labels."""
    item = plot.getPlotItem()
    colours: list[tuple[str, QColor]] = []
    for name in ("left", "bottom", "right", "top"):
        axis = item.getAxis(name)
        if axis.isVisible() and axis.style.get("showValues", True):
            colours.append((f"{name} axis numbers", axis.textPen().color()))
            if axis.label.isVisible() and axis.label.toPlainText().strip():
                styled = axis.labelStyle.get("color")  # pyqtgraph writes it into the HTML
                colour = QColor(styled) if styled else axis.label.defaultTextColor()
                colours.append((f"{name} axis label", colour))
    if item.titleLabel.isVisible() and item.titleLabel.text:
        colours.append(("title", item.titleLabel.item.defaultTextColor()))
    legend = item.legend
    if legend is not None and legend.isVisible():
        for _sample, label in legend.items:
            styled = label.opts.get("color")
            colour = pg.mkColor(styled) if styled else label.item.defaultTextColor()
            colours.append((f"legend '{label.text}'", colour))
    for child in item.vb.addedItems:
        for label in _line_labels(child):
            colours.append((f"marker '{label.toPlainText()[:20]}'", pg.mkColor(label.color)))
    return colours


def _line_labels(item: object) -> list[pg.TextItem]:
    label = getattr(item, "label", None)
    if isinstance(label, pg.TextItem) and label.isVisible() and label.toPlainText().strip():
        return [label]
    return []
