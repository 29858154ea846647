"""Why a reply failed is kept with it (schema 3): the conversation shows the reason after a
restart, and a new version of the reply starts without it."""

from __future__ import annotations

import sqlite3

from app.chats.records import DONE, FAILED, STREAMING
from app.chats.store import ChatStore


def test_the_reason_a_reply_failed_survives_reopening(tmp_path) -> None:
    path = tmp_path / "c.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "Hi")
    reply = store.add_message(chat.id, "assistant", "", status=STREAMING)
    reason = "No model is loaded: load a model first."
    assert store.finish_message(reply.id, "", FAILED, error=reason).error == reason
    store.close()

    again = ChatStore(path)
    assert (again.message(reply.id).status, again.message(reply.id).error) == (FAILED, reason)
    fresh = again.start_new_version(reply.id, None)
    assert (fresh.status, fresh.error) == (STREAMING, "")
    assert again.finish_message(reply.id, "Hello", DONE).error == ""


def test_a_schema_2_file_gets_the_column_and_keeps_its_messages(tmp_path) -> None:
    path = tmp_path / "c.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "Kept")
    store.close()
    db = sqlite3.connect(path)  # as version 2 left it: no error column
    db.execute("ALTER TABLE messages DROP COLUMN error")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()

    store = ChatStore(path)
    assert store.schema_version == 3
    assert [(m.content, m.error) for m in store.messages(chat.id)] == [("Kept", "")]
