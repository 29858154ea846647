"""A section that shows only its title until opened: the load dialog's Workers section, which
most loads never use, stays one line unless workers are set or the user opens it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLayout, QToolButton, QVBoxLayout, QWidget


class Collapsible(QWidget):
    """`Collapsible(title, body)`: a title button (Space or a click opens and closes it) and
    under it `body`, hidden while closed.

    Signals:
        opened_changed(bool): the section was opened (True) or closed (False).
    """

    opened_changed = Signal(bool)

    def __init__(self, title: str, body: QLayout, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setObjectName("sectionToggle")
        self.toggle.setText(title)
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setAutoRaise(True)
        self.toggle.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # reached by Tab
        self.toggle.setStyleSheet("font-weight: 600;")
        self.body = QWidget()
        self.body.setLayout(body)
        body.setContentsMargins(0, 0, 0, 0)
        self.body.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)
        self.toggle.toggled.connect(self._on_toggle_toggled)

    @property
    def opened(self) -> bool:
        return self.toggle.isChecked()

    def open(self) -> None:
        self.toggle.setChecked(True)

    def _on_toggle_toggled(self, opened: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.body.setVisible(opened)
        window = self.window()
        layout = window.layout()
        if opened and window is not self and layout is not None:
            # Wrapped text's height depends on the width: grow the window to show the whole
            # section at this width (never squeeze it).
            height = layout.totalHeightForWidth(window.width())
            if height > window.height():
                window.resize(window.width(), height)
        self.opened_changed.emit(opened)
