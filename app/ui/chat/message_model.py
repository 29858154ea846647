"""The messages of the open conversation as a QAbstractListModel.

Streamed text is buffered and published at most ~25 times a second as a dataChanged for
that one row, so a long conversation is never re-rendered for a token.

A long conversation is held from its newest messages back: it opens with one page, and
load_older() puts the batch before the first row in front when the view scrolls near the top,
so opening 5,000 messages measures and lays out a page of them, not all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
)

from app.chats.records import Message

log = logging.getLogger(__name__)

MessageRole = Qt.ItemDataRole.UserRole + 1  # the Message (frozen dataclass)
VersionRole = Qt.ItemDataRole.UserRole + 2  # bumps whenever the row's text or state changes
IsLastAssistantRole = Qt.ItemDataRole.UserRole + 3

PUBLISH_INTERVAL_MS = 40  # ~25 Hz: smooth to the eye, cheap for the layout
OLDER_BATCH = 200  # messages put in front per load_older(): a few screens of scrolling

# (the id of the oldest message held, how many) -> the messages before it, oldest first
OlderMessages = Callable[[int, int], list[Message]]


@dataclass
class _Row:
    message: Message
    version: int = 0


class MessageListModel(QAbstractListModel):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[_Row] = []
        self._versions = 0  # one counter for all rows: a (message id, version) never repeats
        self._row_of: dict[int, int] = {}  # message id -> row
        self._pending: dict[int, str] = {}  # message id -> text not yet published
        self._older: OlderMessages | None = None  # None: every message is held
        self._publish_timer = QTimer(self)
        self._publish_timer.setSingleShot(True)
        self._publish_timer.setInterval(PUBLISH_INTERVAL_MS)
        self._publish_timer.timeout.connect(self.publish_pending)

    # ---- Qt model API ---------------------------------------------------------------

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        row = self._rows[index.row()]
        if role == MessageRole:
            return row.message
        if role == VersionRole:
            return row.version
        if role == Qt.ItemDataRole.DisplayRole:
            return row.message.content
        if role == IsLastAssistantRole:
            return index.row() == len(self._rows) - 1 and row.message.role == "assistant"
        return None

    # ---- changes ----------------------------------------------------------------------

    def set_messages(self, messages: list[Message], older: OlderMessages | None = None) -> None:
        """Show `messages`; `older` reads the ones before them when there may be more."""
        self.beginResetModel()
        self._rows = [_Row(m, self._next_version()) for m in messages]
        self._row_of = {m.id: i for i, m in enumerate(messages)}
        self._pending.clear()
        self._older = older if messages else None
        self.endResetModel()

    @property
    def has_older(self) -> bool:
        """Whether messages before the first row may still be unread."""
        return self._older is not None

    def load_older(self) -> int:
        """Put the batch of messages before the first row in front; how many came."""
        if self._older is None:
            return 0
        batch = self._older(self._rows[0].message.id, OLDER_BATCH)
        if len(batch) < OLDER_BATCH:
            self._older = None  # the first message is in this batch
        if not batch:
            return 0
        self.beginInsertRows(QModelIndex(), 0, len(batch) - 1)
        self._rows[0:0] = [_Row(m, self._next_version()) for m in batch]
        self._row_of = {r.message.id: i for i, r in enumerate(self._rows)}
        self.endInsertRows()
        return len(batch)

    def append_message(self, message: Message) -> None:
        n = len(self._rows)
        previous_last = n - 1
        self.beginInsertRows(QModelIndex(), n, n)
        self._rows.append(_Row(message, self._next_version()))
        self._row_of[message.id] = n
        self.endInsertRows()
        if previous_last >= 0 and self._rows[previous_last].message.role == "assistant":
            self._bump(previous_last)  # it is no longer the last reply (no Regenerate link)

    def append_text(self, message_id: int, text: str) -> None:
        """Add streamed text to a message; published within PUBLISH_INTERVAL_MS."""
        if message_id not in self._row_of:
            return
        self._pending[message_id] = self._pending.get(message_id, "") + text
        if not self._publish_timer.isActive():
            self._publish_timer.start()

    def publish_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for message_id, text in pending.items():
            row = self._row_of.get(message_id)
            if row is None:
                continue
            message = self._rows[row].message
            self._rows[row].message = replace(message, content=message.content + text)
            self._bump(row)

    def update_message(self, message: Message) -> None:
        """Replace a row's message (final text, status and stats)."""
        self._pending.pop(message.id, None)
        row = self._row_of.get(message.id)
        if row is None:
            return
        self._rows[row].message = message
        self._bump(row)

    def remove_from(self, message_id: int) -> None:
        """Remove the message and every row after it."""
        row = self._row_of.get(message_id)
        if row is None:
            return
        self.beginRemoveRows(QModelIndex(), row, len(self._rows) - 1)
        for r in self._rows[row:]:
            self._row_of.pop(r.message.id, None)
            self._pending.pop(r.message.id, None)
        del self._rows[row:]
        self.endRemoveRows()
        if self._rows and self._rows[-1].message.role == "assistant":
            self._bump(len(self._rows) - 1)

    # ---- lookups ----------------------------------------------------------------------

    def message_at(self, row: int) -> Message:
        return self._rows[row].message

    def version_at(self, row: int) -> int:
        """The row's version: a new one whenever its text or state changes."""
        return self._rows[row].version

    def messages(self) -> list[Message]:
        return [r.message for r in self._rows]

    def row_of(self, message_id: int) -> int | None:
        return self._row_of.get(message_id)

    def text_of(self, message_id: int) -> str:
        """The text including what is not yet published."""
        row = self._row_of.get(message_id)
        if row is None:
            return ""
        return self._rows[row].message.content + self._pending.get(message_id, "")

    def _next_version(self) -> int:
        self._versions += 1
        return self._versions

    def _bump(self, row: int) -> None:
        self._rows[row].version = self._next_version()
        index = self.index(row)
        self.dataChanged.emit(index, index)
