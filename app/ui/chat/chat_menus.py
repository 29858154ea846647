"""The main window's File and Help menus for the chat: New chat, Export chat (Markdown,
JSON) and Quit; Keyboard shortcuts (F1 or ?), the sheet of app/ui/chat/shortcuts.py."""

from __future__ import annotations

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QMainWindow

from app.ui.chat.chat_page import ChatPage
from app.ui.chat.conversation_list import JSON, MARKDOWN
from app.ui.chat.shortcuts import ShortcutsSheet

NOTHING_TO_EXPORT = "Open a chat to export it: nothing is open."


class ChatMenus:
    def __init__(self, window: QMainWindow, page: ChatPage) -> None:
        self.window, self.page = window, page
        self.sheet: ShortcutsSheet | None = None
        file_menu = window.menuBar().addMenu("&File")
        # The page's own Ctrl+N (a second shortcut on the key would make both ambiguous).
        file_menu.addAction("New chat\tCtrl+N", page.new_chat)
        self.export_markdown = file_menu.addAction(
            "Export chat as Markdown…", QKeySequence("Ctrl+E"), lambda: self.export(MARKDOWN)
        )
        self.export_json = file_menu.addAction(
            "Export chat as JSON…", QKeySequence("Ctrl+Shift+E"), lambda: self.export(JSON)
        )
        file_menu.addSeparator()
        file_menu.addAction("Quit", QKeySequence.StandardKey.Quit, window.close)
        help_menu = window.menuBar().addMenu("&Help")
        self.shortcuts_action = help_menu.addAction(
            "Keyboard shortcuts",
            QKeySequence(QKeySequence.StandardKey.HelpContents),
            self.show_sheet,
        )
        QShortcut(QKeySequence("?"), window, self.show_sheet)

    def export(self, kind: str) -> None:
        conversation = self.page.session.conversation
        if conversation is None:
            self.page.bridge.info(NOTHING_TO_EXPORT)
            return
        self.page.conversations.ask_export(conversation.id, kind)

    def show_sheet(self) -> None:
        if self.sheet is None:
            self.sheet = ShortcutsSheet(self.window)
        self.sheet.show()
        self.sheet.raise_()
        self.sheet.activateWindow()
