"""Showing text from a file or the Hub in widgets: always as plain text.

QLabel, QMessageBox and tooltips guess: text that looks like HTML is rendered as HTML, so a
model named `<img src=...>` would load an image and `<b>` would restyle the window. Labels
that may show such text are set to plain text; tooltips (which have no such switch) get
their text escaped. Item views draw their text plainly but draw control characters and
megabytes too: their models hand out text through `shown`."""

from __future__ import annotations

import html

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QLabel, QPlainTextEdit

from app.platform.safe_text import safe_text

CELL_LIMIT = 300  # characters in one cell: a long path's worth, never a 300 KB "name"


def typed_text(edit: QPlainTextEdit) -> str:
    """`edit`'s text as typed, pasted or generated into it. toPlainText() also swaps a no-break
    space (U+00A0) for a plain one, so the model was sent text it did not write (other tokens,
    and a continuation whose prompt no longer matched the cache). The raw text keeps it; its
    block and line separators (Enter, and Shift+Enter's U+2028) become newlines as before."""
    return edit.document().toRawText().replace("\u2029", "\n").replace("\u2028", "\n")


def plain_label(label: QLabel) -> QLabel:
    """`label`, set never to read its text as HTML."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_tooltip(text: str, limit: int = 2000) -> str:
    """A tooltip showing `text` literally (cleaned and cut like any text from a file)."""
    if not text:
        return ""
    escaped = html.escape(safe_text(text, limit, keep_newlines=True))
    return f"<p style='white-space:pre-wrap'>{escaped}</p>"


def literal_text(text: str, limit: int = 2000) -> str:
    """For a static QMessageBox.question/information call, which has no plain-text switch: rich
    text that shows `text` literally (cleaned, cut, every tag escaped)."""
    escaped = html.escape(safe_text(text, limit, keep_newlines=True)).replace("\n", "<br>")
    return f"<qt>{escaped}</qt>"


def shown(value: object, role: int) -> object:
    """What an item model's data() gives its view for `role`: text cleaned and cut for a
    cell, escaped for a tooltip; anything else as it is. Every model whose rows carry a
    file's or the Hub's words answers through this, at its one data()."""
    if isinstance(value, str):
        if role == Qt.ItemDataRole.DisplayRole:
            return safe_text(value, CELL_LIMIT)
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(value)
    return value


class PlainItemModel(QStandardItemModel):
    """A QStandardItemModel whose items' text and tooltips are given out through `shown`."""

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        return shown(super().data(index, role), role)
