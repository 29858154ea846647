"""Showing text from a file or the Hub in widgets: always as plain text.

QLabel, QMessageBox and tooltips guess: text that looks like HTML is rendered as HTML, so a
model named `<img src=...>` would load an image and `<b>` would restyle the window. Labels
that may show such text are set to plain text; tooltips (which have no such switch) get
their text escaped."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.core.safe_text import safe_text


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
