"""What the message view keeps and re-reads: older messages put in front are measured once
and the rows already there are not read again (a re-layout of thousands of rows must not
re-read thousands of messages); a streamed reply keeps one rendered document, not one per
published piece of text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from app.chats.records import STREAMING
from app.chats.store import ChatStore
from app.ui.chat.message_model import OLDER_BATCH, MessageListModel, MessageRole
from app.ui.chat.message_view import MessageView


class _CountingModel(MessageListModel):
    """The real model, counting how often a row's message is read."""

    message_reads = 0

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == MessageRole:
            self.message_reads += 1
        return super().data(index, role)


def _conversation(store: ChatStore, n: int) -> int:
    conversation = store.create_conversation("Long chat")
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        store.add_message(conversation.id, role, f"Message {i} with **Markdown** and `code`.")
    return conversation.id


def _view(qtbot, model: MessageListModel) -> MessageView:
    view = MessageView(model)
    # The width rows are measured at stays put (a scroll bar appearing would narrow it and
    # rightly have every row measured again).
    view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    return view


def test_older_messages_are_measured_once_and_the_others_not_read_again(qtbot, tmp_path: Path):
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation_id = _conversation(store, 3 * OLDER_BATCH)
    model = _CountingModel()
    view = _view(qtbot, model)
    model.set_messages(
        store.messages_before(conversation_id, None, OLDER_BATCH),
        lambda before_id, n: store.messages_before(conversation_id, before_id, n),
    )
    view.executeDelayedItemsLayout()

    model.message_reads = 0
    assert model.load_older() == OLDER_BATCH
    view.executeDelayedItemsLayout()  # every row laid out again, as QListView does
    assert model.message_reads == OLDER_BATCH  # the new rows, once each

    model.message_reads = 0
    view.scheduleDelayedItemsLayout()
    view.executeDelayedItemsLayout()
    assert model.message_reads == 0
    assert view.delegate.measurements == 2 * OLDER_BATCH


def test_a_streamed_reply_keeps_one_rendered_document(qtbot, tmp_path: Path):
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation_id = _conversation(store, 2)
    model = MessageListModel()
    view = _view(qtbot, model)
    model.set_messages(store.messages(conversation_id))
    reply = store.add_message(conversation_id, "assistant", "", status=STREAMING)
    model.append_message(reply)
    for i in range(20):
        model.append_text(reply.id, f"word {i} ")
        model.publish_pending()
        view.viewport().repaint()  # each published piece is drawn, as the user sees it
    assert model.text_of(reply.id).startswith("word 0 word 1")
    assert view.delegate.documents_held == 3


def test_a_conversation_left_behind_keeps_no_rendered_documents(qtbot, tmp_path: Path):
    # Issue 11, long sessions: each new chat left the one before's documents in the cache
    # (at most 300, their versions never shown again), and the window grew with every chat.
    store = ChatStore(tmp_path / "chat.sqlite3")
    first = _conversation(store, 40)
    second = _conversation(store, 2)
    model = MessageListModel()
    view = _view(qtbot, model)
    model.set_messages(store.messages(first))
    view.executeDelayedItemsLayout()
    view.viewport().repaint()
    assert view.delegate.documents_held > 2

    model.set_messages(store.messages(second))
    view.executeDelayedItemsLayout()
    view.viewport().repaint()
    assert view.delegate.documents_held == 2
    assert view.delegate.rows_measured == 2


def test_removed_messages_leave_no_rendered_documents(qtbot, tmp_path: Path):
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation_id = _conversation(store, 6)
    messages = store.messages(conversation_id)
    model = MessageListModel()
    view = _view(qtbot, model)
    model.set_messages(messages)
    view.executeDelayedItemsLayout()
    view.viewport().repaint()
    assert view.delegate.documents_held == 6

    model.remove_from(messages[2].id)  # edit and resend the third message
    assert view.delegate.documents_held == 2
    assert view.delegate.rows_measured == 2
