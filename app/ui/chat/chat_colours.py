"""The colours the chat paints its messages in, for the look a palette shows (light or dark):
read from the theme's tables (app/ui/theme_colours.py: TEXT_COLOURS, CHAT_COLOURS), so a
bubble is never a white block on the dark page and its words keep 4.5:1 in both looks.

    colours = chat_colours(option.palette)   # in a delegate's paint()
    painter.setBrush(colours.reply_bubble)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from PySide6.QtGui import QColor, QPalette

from app.ui.theme_colours import CHAT_COLOURS, TEXT_COLOURS, scheme_of


@dataclass(frozen=True)
class ChatColours:
    scheme: str  # "light" or "dark"
    text: QColor  # a message's words
    muted: QColor  # the model's name, a reply's numbers, the "2 / 3" between the arrows
    error: QColor  # why a reply failed
    button_text: QColor  # Copy, Edit, Regenerate...
    disabled: QColor  # a button that does nothing now (WCAG asks no contrast of those)
    view: QColor
    user_bubble: QColor
    user_border: QColor
    reply_bubble: QColor
    reply_border: QColor
    accent: QColor
    button: QColor
    button_border: QColor
    code: QColor
    code_border: QColor
    code_style: str  # the pygments style the code is coloured in


@cache
def colours_for(scheme: str) -> ChatColours:
    words, surfaces = TEXT_COLOURS[scheme], CHAT_COLOURS[scheme]
    return ChatColours(
        scheme=scheme,
        text=QColor(words["text"]),
        muted=QColor(words["hint"]),
        error=QColor(words["error"]),
        button_text=QColor(words["quality"]),
        disabled=QColor(surfaces["disabled"]),
        view=QColor(surfaces["view"]),
        user_bubble=QColor(surfaces["user_bubble"]),
        user_border=QColor(surfaces["user_border"]),
        reply_bubble=QColor(surfaces["reply_bubble"]),
        reply_border=QColor(surfaces["reply_border"]),
        accent=QColor(surfaces["accent"]),
        button=QColor(surfaces["button"]),
        button_border=QColor(surfaces["button_border"]),
        code=QColor(surfaces["code"]),
        code_border=QColor(surfaces["code_border"]),
        code_style=surfaces["code_style"],
    )


def chat_colours(palette: QPalette) -> ChatColours:
    """The chat's colours for the look `palette` shows."""
    return colours_for(scheme_of(palette))
