"""The colours of each look (light, dark) that no style sheet reaches: words in rich text and
charts, and the chat's painted messages. Apart from app/ui/theme.py, which puts a look on the
app, so that the pages painting with these colours need not import the window's modules.

    colour = TEXT_COLOURS[scheme_of(widget.palette())]["error"]
"""

from __future__ import annotations

from PySide6.QtGui import QPalette

LIGHT, DARK = "light", "dark"

# Colours of words drawn where no style sheet reaches (rich text, charts), per look; each is
# at least 4.5:1 on that look's page and chart backgrounds (tests/ui/test_contrast.py).
TEXT_COLOURS = {
    LIGHT: {
        "text": "#1f2328",
        "hint": "#4b5563",
        "good": "#0f7a5f",
        "error": "#b91c1c",
        "load": "#8e44ad",
        "prompt": "#b45309",
        "generation": "#0f7a5f",
        "quality": "#1d4ed8",
        "mode": "#4b5563",
        "axis": "#4b5563",
        "chart": "#ffffff",
        "grid": "#e5e7eb",  # lines, not words
    },
    DARK: {
        "text": "#e3e6eb",
        "hint": "#9aa3b2",
        "good": "#3ccf9f",
        "error": "#f08a80",
        "load": "#c39bd3",
        "prompt": "#f5a25d",
        "generation": "#3ccf9f",
        "quality": "#7aa7f5",
        "mode": "#aeb6c2",
        "axis": "#aeb6c2",
        "chart": "#1f2229",
        "grid": "#3a404c",
    },
}


# The chat's surfaces, which its message delegate paints itself (no style sheet reaches
# them): the view, the bubbles, the buttons under them and the code blocks, with the pygments
# style its code is coloured in. Words on them take TEXT_COLOURS' "text", "hint", "error" and
# "quality" (links and buttons); tests/ui/test_chat_contrast.py checks the painted pixels.
CHAT_COLOURS = {
    LIGHT: {
        "view": "#f6f7f9",  # style.qss's QListView#messageView
        "user_bubble": "#dce7fd",
        "user_border": "#c7d7f7",
        "reply_bubble": "#ffffff",
        "reply_border": "#e3e6eb",
        "accent": "#2f6fdb",  # the message being edited, the keyboard's ring
        "button": "#ffffff",
        "button_border": "#d6dbe3",
        "disabled": "#b8bec8",
        "code": "#f6f8fa",
        "code_border": "#d9dee5",
        "code_style": "default",
    },
    DARK: {
        "view": "#16181d",  # style-dark.qss's QListView#messageView
        "user_bubble": "#1d3557",
        "user_border": "#2c4a75",
        "reply_bubble": "#1f2229",
        "reply_border": "#30353f",
        "accent": "#5b8def",
        "button": "#262a33",
        "button_border": "#3a404c",
        "disabled": "#6b7280",
        "code": "#14171c",
        "code_border": "#353b46",
        "code_style": "github-dark",
    },
}


def scheme_of(palette: QPalette) -> str:
    """ "dark" when `palette`'s window colour is dark, else "light"."""
    return DARK if palette.color(QPalette.ColorRole.Window).lightness() < 128 else LIGHT


__all__ = ["CHAT_COLOURS", "DARK", "LIGHT", "TEXT_COLOURS", "scheme_of"]
