"""A message view closed while it still meant to scroll down (a conversation just opened,
a reply just appended) is let go quietly: the pending scroll dies with the view instead of
running on a deleted widget (which Qt reports as an error in its event loop)."""

from __future__ import annotations

from pathlib import Path

import shiboken6
from PySide6.QtWidgets import QApplication

from app.chats.store import ChatStore
from app.ui.chat.message_model import MessageListModel
from app.ui.chat.message_view import MessageView


def test_a_view_closed_before_its_pending_scroll_is_not_called_dead(qtbot, tmp_path: Path):
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation = store.create_conversation("Closed at once")
    store.add_message(conversation.id, "user", "Hello")
    model = MessageListModel()
    view = MessageView(model)
    view.resize(600, 400)
    view.show()
    # Opening the conversation schedules a scroll to its newest message for the next turn
    # of the event loop; the window closes before that turn comes.
    model.set_messages(store.messages_before(conversation.id, None, 10))
    shiboken6.delete(view)
    QApplication.processEvents()  # pytest-qt fails the test on an error raised in here
    assert model.rowCount() == 1
