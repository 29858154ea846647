"""The chat's keyboard shortcuts: installed on the page from one list, which the Help menu's
sheet (F1 or ?) shows, so what the sheet says is what the keys do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)


@dataclass(frozen=True)
class Shortcut:
    keys: str  # as the sheet shows them
    does: str


SHEET: tuple[Shortcut, ...] = (
    Shortcut("Enter", "Send the message (Shift+Enter: a new line)"),
    Shortcut("Esc", "Stop the reply being written; cancel editing a message"),
    Shortcut("Enter, Ctrl+Enter", "Resend the message being edited (Shift+Enter: a new line)"),
    Shortcut("Ctrl+N", "New chat"),
    Shortcut("Ctrl+F", "Search the chats"),
    Shortcut("Ctrl+.", "Stop the reply being written"),
    Shortcut("Tab, Shift+Tab", "The next or previous message, and each button under it"),
    Shortcut("Up, Down", "The message before or after (once a message has the focus)"),
    Shortcut("Enter, Space", "Press the button that has the focus (Copy, Edit, ...)"),
    Shortcut("Ctrl+Enter", "Continue the text (a base model's text box)"),
    Shortcut("Ctrl+Tab, Esc", "Leave the text box (Shift: back the other way)"),
    Shortcut("Ctrl+E, Ctrl+Shift+E", "Export the chat as Markdown, as JSON"),
    Shortcut("F1, ?", "This list"),
)


def install(
    page: QWidget,
    stop: Callable[[], None],
    new_chat: Callable[[], None],
    search: Callable[[], None],
) -> None:
    """The page's shortcuts: New chat, Search, Stop."""
    QShortcut(QKeySequence.StandardKey.New, page, new_chat)
    QShortcut(QKeySequence.StandardKey.Find, page, search)
    QShortcut(QKeySequence("Ctrl+."), page, stop)


def on_escape(area: QWidget, handler: Callable[[], None]) -> None:
    """Esc anywhere in `area` (the chat, its input included) calls `handler`."""
    escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), area, handler)
    escape.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)


def chain_focus(*widgets: QWidget) -> None:
    """Tab goes through `widgets` in this order."""
    for first, second in zip(widgets, widgets[1:], strict=False):
        QWidget.setTabOrder(first, second)


class ShortcutsSheet(QDialog):
    """The list of shortcuts (Help, Keyboard shortcuts)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.table = QTableWidget(len(SHEET), 2)
        self.table.setObjectName("shortcutsTable")
        self.table.setHorizontalHeaderLabels(["Keys", "What they do"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for row, shortcut in enumerate(SHEET):
            self.table.setItem(row, 0, QTableWidgetItem(shortcut.keys))
            self.table.setItem(row, 1, QTableWidgetItem(shortcut.does))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(620, 440)
