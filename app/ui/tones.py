"""Words in a tone that each look's style sheet colours (assets/style.qss, style-dark.qss): a
warning box, an error or refusal sentence. A fixed colour or palette(mid) in a widget's own
style sheet stays as it was written whatever the look (a light box in a dark window, or grey
text at 2:1 on the light one); a tone is coloured by the look shown, and again when it changes.

    set_tone(label, WARNING)   # QLabel[tone="warning"]: the look's warning box
    set_tone(label, ERROR)     # QLabel[tone="error"]: the look's error colour
    set_tone(label, "")        # the look's plain text again
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

WARNING, ERROR = "warning", "error"


def set_tone(widget: QWidget, tone: str) -> None:
    """Show `widget` in `tone` (WARNING, ERROR, or "" for none) from now on."""
    if (widget.property("tone") or "") != tone:
        widget.setProperty("tone", tone)
        widget.style().unpolish(widget)  # the style sheet's selectors read the property anew
        widget.style().polish(widget)
