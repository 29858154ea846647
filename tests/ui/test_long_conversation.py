"""A 5,000-message conversation in the real chat page: it opens at its newest messages having
rendered one page of them, and scrolling up a page at a time moves the text by exactly a page
(older messages come in front without a jump) until message 1 is at the top."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QAbstractSlider

from app.chats.store import ChatStore
from app.ui.chat.message_view import MessageView
from app.ui.chat.session import OPEN_PAGE
from tests.waits import HANG_GUARD_MS

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

N_MESSAGES = 5000
_REPLY = "A reply with **Markdown**, `code` and a list:\n\n- one\n- two\n"


def _fill(store: ChatStore) -> int:
    conversation = store.create_conversation("Five thousand messages")
    for i in range(1, N_MESSAGES + 1):
        user = i % 2 == 1
        text = f"message {i}: a question?" if user else f"message {i}. {_REPLY}"
        store.add_message(conversation.id, "user" if user else "assistant", text)
    store.create_conversation("A newer, empty chat")
    return conversation.id


def _content_at(view: MessageView, y: int) -> str:
    return view.model().data(view.indexAt(QPoint(view.viewport().width() // 2, y)))


def test_5000_messages_open_at_the_newest_and_scroll_up_to_the_first(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    long_id = _fill(chat_app.store)
    page.conversations.refresh()
    items = page.conversations.list
    item = next(
        items.item(r)
        for r in range(items.count())
        if items.item(r).data(Qt.ItemDataRole.UserRole) == long_id
    )
    view = page.view
    bar = view.verticalScrollBar()
    with qtbot.waitSignal(
        bar.valueChanged, check_params_cb=lambda v: v == bar.maximum() > 0, timeout=HANG_GUARD_MS
    ):
        qtbot.mouseClick(
            items.viewport(), Qt.MouseButton.LeftButton, pos=items.visualItemRect(item).center()
        )

    bottom = view.viewport().height() - 2
    assert _content_at(view, bottom).startswith(f"message {N_MESSAGES}.")
    assert len(view.delegate.documents_built) <= OPEN_PAGE  # one page rendered, not 5,000

    steps = 0
    while bar.value() > 0:
        top_row = view.indexAt(QPoint(view.viewport().width() // 2, 0)).row()
        top_id = view.model().message_at(top_row).id
        top_y = view.visualRect(view.model().index(top_row)).top()
        moved = min(bar.pageStep(), bar.value())
        bar.triggerAction(QAbstractSlider.SliderAction.SliderPageStepSub)
        steps += 1
        row_now = view.model().row_of(top_id)
        assert row_now is not None
        # Exactly a page lower: the rows put in front while scrolling did not move the text.
        assert view.visualRect(view.model().index(row_now)).top() == top_y + moved

    assert _content_at(view, 0) == "message 1: a question?"
    assert view.model().rowCount() == N_MESSAGES and not view.model().has_older
    assert steps > N_MESSAGES // 20  # it really scrolled through them all, a page at a time

    # Opened again from the top, where scrolling loads older messages: one page again.
    built = sum(view.delegate.documents_built.values())
    with qtbot.waitSignal(
        bar.valueChanged, check_params_cb=lambda v: v == bar.maximum() > 0, timeout=HANG_GUARD_MS
    ):
        page.open_conversation(long_id)
    assert sum(view.delegate.documents_built.values()) - built <= OPEN_PAGE
    assert _content_at(view, bottom).startswith(f"message {N_MESSAGES}.")
