"""A long conversation read a page at a time, newest first (the chat view opens with one)."""

from __future__ import annotations

from pathlib import Path

from app.chats.store import ChatStore


def test_pages_walk_back_to_the_first_message_without_gaps(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chat.sqlite3")
    long_chat = store.create_conversation("Long")
    other = store.create_conversation("Other")
    for i in range(1, 251):
        store.add_message(long_chat.id, "user", f"message {i}")
        store.add_message(other.id, "user", f"other {i}")  # interleaved ids

    seen: list[str] = []
    page = store.messages_before(long_chat.id, None, 100)
    while page:
        assert [m.id for m in page] == sorted(m.id for m in page)  # oldest first
        seen = [m.content for m in page] + seen
        page = store.messages_before(long_chat.id, page[0].id, 100)

    assert seen == [f"message {i}" for i in range(1, 251)]
    assert store.messages_before(long_chat.id, None, 3)[-1].content == "message 250"
    store.close()
