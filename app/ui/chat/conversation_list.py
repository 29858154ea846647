"""The conversations sidebar: new chat, search box, list with rename, export and delete."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from PySide6.QtCore import QPoint, QStandardPaths, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.export import conversation_json, conversation_markdown, write_export
from app.chats.records import Conversation
from app.chats.store import ChatStore
from app.ui.plain_text import literal_text

log = logging.getLogger(__name__)

MARKDOWN, JSON = "md", "json"
_FILTERS = {MARKDOWN: "Markdown (*.md)", JSON: "JSON (*.json)"}


class ConversationList(QWidget):
    """Signals:
    conversation_selected(int): the user picked a conversation.
    new_requested(): the New chat button.
    rename_requested(int, str): rename to the given title.
    delete_requested(int): deletion confirmed by the user.
    conversation_exported(str): a conversation was written to this file.
    """

    conversation_selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    conversation_exported = Signal(str)

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationList")
        self._store = store
        self._current: int | None = None
        self.new_button = QPushButton("+  New chat")
        self.new_button.setObjectName("newChatButton")
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search chats")
        self.search_box.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setObjectName("conversationItems")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setWordWrap(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 12, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search_box)
        layout.addWidget(self.list, 1)
        self._search_timer = QTimer(self, singleShot=True, interval=150)
        self._search_timer.timeout.connect(self.refresh)
        self.search_box.textChanged.connect(lambda _t: self._search_timer.start())
        self.new_button.clicked.connect(self.new_requested)
        self.list.itemClicked.connect(self._on_list_clicked)
        self.list.itemDoubleClicked.connect(
            lambda item: self.ask_rename(item.data(Qt.ItemDataRole.UserRole))
        )
        self.list.customContextMenuRequested.connect(self._on_list_menu)

    def refresh(self, current: int | None = None) -> None:
        if current is not None:
            self._current = current
        self.list.blockSignals(True)
        self.list.clear()
        for conversation in self._store.conversations(self.search_box.text()):
            item = QListWidgetItem(conversation.title)
            item.setData(Qt.ItemDataRole.UserRole, conversation.id)
            item.setToolTip(conversation.title)
            self.list.addItem(item)
            if conversation.id == self._current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def _on_list_clicked(self, item: QListWidgetItem) -> None:
        self._current = item.data(Qt.ItemDataRole.UserRole)
        self.conversation_selected.emit(self._current)

    def _on_list_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        self.menu_for(item.data(Qt.ItemDataRole.UserRole)).exec(
            self.list.viewport().mapToGlobal(pos)
        )

    def menu_for(self, conversation_id: int) -> QMenu:
        """The conversation's menu (right click on it in the list)."""
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.ask_rename(conversation_id))
        menu.addAction("Export as Markdown…", lambda: self.ask_export(conversation_id, MARKDOWN))
        menu.addAction("Export as JSON…", lambda: self.ask_export(conversation_id, JSON))
        menu.addSeparator()
        menu.addAction("Delete…", lambda: self.ask_delete(conversation_id))
        return menu

    def ask_export(self, conversation_id: int, kind: str) -> None:
        """Ask where, then write the conversation there as Markdown or JSON."""
        conversation = self._store.conversation(conversation_id)
        folder = QStandardPaths.writableLocation(
            QStandardPaths.StandardLocation.DocumentsLocation
        ) or str(Path.home())
        suggested = str(Path(folder) / f"{_file_name(conversation.title)}.{kind}")
        chosen, _filter = QFileDialog.getSaveFileName(
            self, "Export chat", suggested, _FILTERS[kind]
        )
        if not chosen:
            return
        path = Path(chosen)
        if not path.suffix:
            path = path.with_suffix(f".{kind}")
        messages = self._store.messages(conversation_id)
        text = (
            conversation_markdown(conversation, messages)
            if kind == MARKDOWN
            else conversation_json(conversation, messages, self._store.reply_versions)
        )
        try:
            write_export(path, text)
        except OSError as error:
            log.warning("export to %s failed: %s", path, error)
            box = QMessageBox(QMessageBox.Icon.Warning, "Export chat", "", parent=self)
            box.setTextFormat(Qt.TextFormat.PlainText)  # the path is the user's, shown as is
            box.setText(f"The chat could not be written to {path}: {error.strerror or error}.")
            box.exec()
            return
        log.info("exported conversation %d to %s", conversation_id, path)
        self.conversation_exported.emit(str(path))

    def ask_rename(self, conversation_id: int) -> None:
        conversation: Conversation = self._store.conversation(conversation_id)
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=conversation.title)
        if ok and title.strip():
            self.rename_requested.emit(conversation_id, title.strip())

    def ask_delete(self, conversation_id: int) -> None:
        conversation = self._store.conversation(conversation_id)
        answer = QMessageBox.question(
            self,
            "Delete chat",
            literal_text(  # a title is the first message's text, which may look like HTML
                f"Delete “{conversation.title}” and all its messages? This cannot be undone."
            ),
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_requested.emit(conversation_id)


def _file_name(title: str) -> str:
    """A file name from a chat's title: no path separators or characters Windows refuses."""
    name = re.sub(r'[\\/:*?"<>|\x00-\x1f]+', " ", title)
    return " ".join(name.split())[:80].strip(" .") or "chat"
