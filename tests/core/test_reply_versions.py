"""Reply versions in the real SQLite store: regenerate keeps the earlier text, switching
changes what the conversation holds, and a file written by the previous schema opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.chats.chats_file import DamagedChatsError
from app.chats.records import DONE, FAILED, STREAMING
from app.chats.store import ChatStore

# The schema KV Studio wrote before reply versions (user_version 1), as it was.
SCHEMA_1 = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    sampling_json TEXT NOT NULL DEFAULT '{}',
    model TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'done',
    model TEXT,
    prompt_tokens INTEGER,
    generated_tokens INTEGER,
    tokens_per_second REAL,
    time_to_first_token_s REAL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
PRAGMA user_version = 1;
"""


def _reply(store: ChatStore, message_id: int, text: str) -> None:
    store.finish_message(message_id, text, DONE, generated_tokens=len(text.split()))


def test_a_file_of_the_previous_schema_opens_with_its_messages(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_1)
    old.execute(
        "INSERT INTO conversations (title, created_at, updated_at) VALUES ('Old chat', 1.0, 2.0)"
    )
    old.execute(
        "INSERT INTO messages (conversation_id, role, content, created_at, updated_at) "
        "VALUES (1, 'user', 'Hello from before', 1.0, 1.0), "
        "(1, 'assistant', 'An old reply', 2.0, 2.0)"
    )
    old.commit()
    old.close()

    store = ChatStore(path)
    assert store.schema_version == 3  # versions (2), then why a reply failed (3)
    messages = store.messages(1)
    assert [(m.role, m.content, m.version, m.versions) for m in messages] == [
        ("user", "Hello from before", 1, 1),
        ("assistant", "An old reply", 1, 1),
    ]
    # The migrated file takes new versions like a fresh one.
    store.start_new_version(messages[1].id, "m.gguf")
    _reply(store, messages[1].id, "A new reply")
    assert [m.content for m in store.reply_versions(messages[1].id)] == [
        "An old reply",
        "A new reply",
    ]
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_an_old_file_without_its_messages_table_is_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_1)
    old.execute("DROP TABLE messages")
    old.close()
    with pytest.raises(DamagedChatsError, match="missing its messages table"):
        ChatStore(path)


def test_versions_are_kept_switched_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "chat.sqlite3"
    store = ChatStore(path)
    conversation = store.create_conversation()
    store.add_message(conversation.id, "user", "Name a colour")
    reply = store.add_message(conversation.id, "assistant", "", status=STREAMING)
    _reply(store, reply.id, "Red")
    streaming = store.start_new_version(reply.id, "other.gguf")
    assert (streaming.content, streaming.status, streaming.version, streaming.versions) == (
        "",
        STREAMING,
        2,
        2,
    )
    _reply(store, reply.id, "Blue")
    store.start_new_version(reply.id, "other.gguf")
    _reply(store, reply.id, "Green")

    first = store.show_version(reply.id, 1)
    assert (first.content, first.version, first.versions, first.id) == ("Red", 1, 3, reply.id)
    assert store.messages(conversation.id)[-1].content == "Red"  # what the history reads
    store.close()

    again = ChatStore(path)
    shown = again.messages(conversation.id)[-1]
    assert (shown.content, shown.version, shown.versions) == ("Red", 1, 3)
    assert [(m.content, m.version) for m in again.reply_versions(reply.id)] == [
        ("Red", 1),
        ("Blue", 2),
        ("Green", 3),
    ]
    assert again.show_version(reply.id, 3).content == "Green"
    # Edit-and-resend deletes the reply, and its versions with it.
    again.delete_messages_from(conversation.id, reply.id)
    assert again._db.execute("SELECT COUNT(*) FROM reply_versions").fetchone()[0] == 0
    again.close()


def test_a_failed_empty_reply_is_replaced_not_kept(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation = store.create_conversation()
    reply = store.add_message(conversation.id, "assistant", "", status=STREAMING)
    store.finish_message(reply.id, "", FAILED)
    again = store.start_new_version(reply.id, None)
    assert (again.version, again.versions) == (1, 1)
    store.close()
