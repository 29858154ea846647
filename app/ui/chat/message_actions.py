"""The buttons under each message: Copy and Edit under the user's, the version switcher
("‹ 2 / 3 ›"), Copy and Regenerate under a reply (and Continue under one cut at its token
limit). Always drawn, not only on hover, so a new
user sees what a message offers; laid out from the row's rect alone (no widgets per row), so a
conversation of 5,000 messages costs nothing more to lay out.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter

from app.chats.records import CUT, STREAMING, Message
from app.ui.chat.chat_colours import ChatColours

# What a button asks for (the page and the session handle them).
COPY, EDIT, REGENERATE, PREVIOUS, NEXT = "copy", "edit", "regenerate", "previous", "next"
CONTINUE = "continue"
VERSION = "version"  # the "2 / 3" between the arrows: shown, not clicked

_LABELS = {
    COPY: "Copy",
    EDIT: "Edit",
    REGENERATE: "Regenerate",
    CONTINUE: "Continue",
    PREVIOUS: "‹",
    NEXT: "›",
}
GAP = 6


@dataclass(frozen=True)
class ActionButton:
    name: str
    label: str
    rect: QRect
    enabled: bool = True


def row_height(font: QFont) -> int:
    """The height of the row of buttons under a message."""
    return QFontMetrics(font).height() + 12


def lay_out_buttons(
    message: Message, is_last_reply: bool, row: QRect, font: QFont
) -> tuple[ActionButton, ...]:
    """The buttons of `message` in `row` (under its bubble): a reply's from the left, the
    user's from the right, as their bubbles are aligned."""
    fm = QFontMetrics(font)
    height = row.height() - 6
    top = row.top() + 3
    specs: list[tuple[str, str, bool]] = []
    if message.role == "assistant":
        streaming = message.status == STREAMING
        if message.versions > 1:
            specs += [
                (PREVIOUS, _LABELS[PREVIOUS], not streaming and message.version > 1),
                (VERSION, f"{message.version} / {message.versions}", False),
                (NEXT, _LABELS[NEXT], not streaming and message.version < message.versions),
            ]
        if not streaming:
            specs.append((COPY, _LABELS[COPY], True))
            if is_last_reply and message.status == CUT:
                specs.append((CONTINUE, _LABELS[CONTINUE], True))
            if is_last_reply:
                specs.append((REGENERATE, _LABELS[REGENERATE], True))
    elif message.role == "user":
        specs = [(COPY, _LABELS[COPY], True), (EDIT, _LABELS[EDIT], True)]
    widths = [
        fm.horizontalAdvance(label) + (8 if name == VERSION else 18) for name, label, _ in specs
    ]
    x = (
        row.left()
        if message.role == "assistant"
        else row.right() + 1 - sum(widths) - GAP * (len(widths) - 1)
    )
    buttons = []
    for (name, label, enabled), width in zip(specs, widths, strict=True):
        buttons.append(ActionButton(name, label, QRect(x, top, width, height), enabled))
        x += width + GAP
    return tuple(buttons)


def paint_buttons(
    painter: QPainter, buttons: tuple[ActionButton, ...], font: QFont, colours: ChatColours
) -> None:
    """Draw `buttons` in the look's `colours` (the version number on the view itself)."""
    painter.save()
    painter.setFont(font)
    for button in buttons:
        if button.name != VERSION:
            painter.setPen(colours.button_border)
            painter.setBrush(colours.button)
            painter.drawRoundedRect(button.rect.adjusted(0, 0, -1, -1), 5, 5)
            painter.setPen(colours.button_text if button.enabled else colours.disabled)
        else:
            painter.setPen(colours.muted)
        painter.drawText(button.rect, Qt.AlignmentFlag.AlignCenter, button.label)
    painter.restore()


def button_at(buttons: tuple[ActionButton, ...], x: int, y: int) -> ActionButton | None:
    """The enabled button under the point, if any."""
    for button in buttons:
        if button.enabled and button.name != VERSION and button.rect.contains(x, y):
            return button
    return None
