"""The words under a reply (its numbers and what became of it), a message's header (who wrote
it, the model's short name), and the keyboard's focus ring: small pieces of the delegate's
painting."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen

from app.chats.records import CUT, DONE, FAILED, INTERRUPTED, STOPPED, STREAMING, Message
from app.ui.chat.chat_colours import ChatColours


def footer_text(message: Message) -> str:
    parts = []
    if message.generated_tokens:
        parts.append(f"{message.generated_tokens} tokens")
    if message.tokens_per_second:
        parts.append(f"{message.tokens_per_second:.1f} tok/s")
    if message.time_to_first_token_s:
        parts.append(f"{message.time_to_first_token_s:.2f} s to first token")
    status = {
        STOPPED: "stopped",
        FAILED: "failed",
        INTERRUPTED: "interrupted",
        STREAMING: "generating…",
    }.get(message.status)
    if status:
        parts.append(status)
    if message.status == CUT:  # first, so a narrow window never elides it
        parts.insert(0, "Cut at the token limit: Continue goes on")
    return "  ·  ".join(parts) if message.status != DONE or parts else ""


def short_model(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.removesuffix(".gguf")


def paint_footer(
    painter: QPainter, rect: QRect, message: Message, font: QFont, colour: QColor
) -> None:
    """A reply's footer text in `rect`, elided to its width."""
    footer = footer_text(message)
    if not footer:
        return
    painter.save()
    painter.setFont(font)
    painter.setPen(colour)
    elided = QFontMetrics(font).elidedText(footer, Qt.TextElideMode.ElideRight, rect.width())
    painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, elided)
    painter.restore()


def paint_header(
    painter: QPainter,
    rect: QRect,
    message: Message,
    editing: bool,
    fonts: tuple[QFont, QFont],
    colours: ChatColours,
) -> None:
    """ "You" or "Assistant" (and the model's short name) above the bubble, on the view;
    `fonts`: the header's and the small one."""
    header_font, small_font = fonts
    painter.setFont(header_font)
    painter.setPen(colours.text)
    name = ("Editing: you" if editing else "You") if message.role == "user" else "Assistant"
    if message.role == "assistant" and message.model:
        name += "  "
    align = Qt.AlignmentFlag.AlignVCenter | (
        Qt.AlignmentFlag.AlignRight if message.role == "user" else Qt.AlignmentFlag.AlignLeft
    )
    painter.drawText(rect, align, name)
    if message.role == "assistant" and message.model:
        painter.setFont(small_font)
        painter.setPen(colours.muted)
        offset = QFontMetrics(header_font).horizontalAdvance(name)
        painter.drawText(
            rect.adjusted(offset, 0, 0, 0),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
            short_model(message.model),
        )


def paint_ring(painter: QPainter, rect: QRect, colour: QColor) -> None:
    """The keyboard's focus ring around `rect`."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(QPen(colour, 2.0))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawRoundedRect(rect.adjusted(-2, -2, 2, 2), 6, 6)
    painter.restore()
