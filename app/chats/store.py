"""Conversations in SQLite (stdlib sqlite3, WAL): titles, messages, per-conversation
system prompt and sampling settings, and the reply being generated, saved as it streams
(app/chats/streaming_reply.py). The file's schema and its checks: app/chats/chats_file.py.

One ChatStore per thread (sqlite3 connections stay on the thread that made them).

Reply versions (schema 2): a regenerated reply keeps its message row and id; the row always
holds the version shown, `version` is its number and `versions` how many there are. The other
versions are copies in reply_versions, written when the reply is left (regenerated or switched
from), so every path that reads messages (pages, search, history, rescue) reads one row per reply.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from app.chats.chats_file import (
    BUSY_TIMEOUT_S,
    MESSAGE_COLUMNS,
    VERSION_COLUMNS,
    open_chats_file,
)
from app.chats.records import DONE, FAILED, INTERRUPTED, STREAMING, Conversation, Message


class ChatStore:
    """All conversation storage. Methods commit at once: nothing waits in memory.

    Opening checks the file (SQLite's quick_check, the schema version, the tables) and raises a
    ChatsUnusableError subclass rather than failing later, mid-session."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._db = open_chats_file(self.path, busy_timeout_s)

    def close(self) -> None:
        self._db.close()

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # ---- conversations ---------------------------------------------------------------

    def create_conversation(
        self,
        title: str = "New chat",
        system_prompt: str = "",
        sampling: dict[str, object] | None = None,
        model: str | None = None,
    ) -> Conversation:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO conversations (title, created_at, updated_at, system_prompt, "
            "sampling_json, model) VALUES (?, ?, ?, ?, ?, ?)",
            (title, now, now, system_prompt, json.dumps(sampling or {}), model),
        )
        return self.conversation(_row_id(cur))

    def conversation(self, conversation_id: int) -> Conversation:
        row = self._db.execute(
            "SELECT id, title, created_at, updated_at, system_prompt, sampling_json, model "
            "FROM conversations WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return _conversation(row)

    def conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; `search` matches the title or any message's text (case-insensitive)."""
        sql = (
            "SELECT id, title, created_at, updated_at, system_prompt, sampling_json, model "
            "FROM conversations"
        )
        args: tuple[str, ...] = ()
        if search.strip():
            pattern = "%" + _escape_like(search.strip()) + "%"
            sql += (
                " WHERE title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m "
                "WHERE m.conversation_id = conversations.id AND m.content LIKE ? ESCAPE '\\')"
            )
            args = (pattern, pattern)
        sql += " ORDER BY updated_at DESC, id DESC"
        return [_conversation(row) for row in self._db.execute(sql, args)]

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self._update_conversation(conversation_id, title=title.strip() or "Untitled")

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        self._update_conversation(conversation_id, system_prompt=system_prompt)

    def set_sampling(self, conversation_id: int, sampling: dict[str, object]) -> None:
        self._update_conversation(conversation_id, sampling_json=json.dumps(sampling))

    def set_model(self, conversation_id: int, model: str | None) -> None:
        self._update_conversation(conversation_id, model=model)

    def delete_conversation(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _update_conversation(self, conversation_id: int, **columns: str | None) -> None:
        sets = ", ".join(f"{name} = ?" for name in columns)
        self._db.execute(
            f"UPDATE conversations SET {sets}, updated_at = ? WHERE id = ?",
            (*columns.values(), time.time(), conversation_id),
        )

    # ---- messages --------------------------------------------------------------------

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        status: str = DONE,
        model: str | None = None,
    ) -> Message:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO messages (conversation_id, role, content, created_at, updated_at, "
            "status, model) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, role, content, now, now, status, model),
        )
        self._touch(conversation_id, now)
        return self.message(_row_id(cur))

    def message(self, message_id: int) -> Message:
        row = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise KeyError(message_id)
        return Message(*row)

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [Message(*row) for row in rows]

    def messages_before(
        self, conversation_id: int, before_id: int | None, limit: int
    ) -> list[Message]:
        """The `limit` newest messages older than `before_id` (None: the newest), oldest
        first: a page of a long conversation, read through the (conversation, id) index."""
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id < ? "
            "ORDER BY id DESC LIMIT ?",
            (conversation_id, before_id if before_id is not None else 2**63 - 1, limit),
        )
        return [Message(*row) for row in reversed(rows.fetchall())]

    def update_message(self, message_id: int, content: str, status: str | None = None) -> None:
        if status is None:
            self._db.execute(
                "UPDATE messages SET content = ?, updated_at = ? WHERE id = ?",
                (content, time.time(), message_id),
            )
        else:
            self._db.execute(
                "UPDATE messages SET content = ?, status = ?, updated_at = ? WHERE id = ?",
                (content, status, time.time(), message_id),
            )

    def finish_message(
        self,
        message_id: int,
        content: str,
        status: str,
        prompt_tokens: int | None = None,
        generated_tokens: int | None = None,
        tokens_per_second: float | None = None,
        time_to_first_token_s: float | None = None,
        error: str = "",
    ) -> Message:
        self._db.execute(
            "UPDATE messages SET content = ?, status = ?, updated_at = ?, prompt_tokens = ?, "
            "generated_tokens = ?, tokens_per_second = ?, time_to_first_token_s = ?, error = ? "
            "WHERE id = ?",
            (
                content,
                status,
                time.time(),
                prompt_tokens,
                generated_tokens,
                tokens_per_second,
                time_to_first_token_s,
                error,
                message_id,
            ),
        )
        return self.message(message_id)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> None:
        """Delete `message_id` and every later message of the conversation (edit, regenerate)."""
        self._db.execute(
            "DELETE FROM messages WHERE conversation_id = ? AND id >= ?",
            (conversation_id, message_id),
        )
        self._touch(conversation_id, time.time())

    def mark_interrupted(self) -> int:
        """Replies left 'streaming' by a crash become 'interrupted'; returns how many."""
        cur = self._db.execute(
            "UPDATE messages SET status = ? WHERE status = ?", (INTERRUPTED, STREAMING)
        )
        return cur.rowcount

    # ---- reply versions ----------------------------------------------------------------

    def start_new_version(self, message_id: int, model: str | None) -> Message:
        """Keep the reply's shown version and make its row an empty, streaming new one (the
        last). A failed reply without text is replaced rather than kept as a version."""
        current = self.message(message_id)
        number = current.versions + 1
        with self._transaction():
            if current.status == FAILED and not current.content and current.version == number - 1:
                number = current.version
            else:
                self._keep_shown_version(current)
            now = time.time()
            self._db.execute(
                "UPDATE messages SET content = '', status = ?, model = ?, created_at = ?, "
                "updated_at = ?, prompt_tokens = NULL, generated_tokens = NULL, "
                "tokens_per_second = NULL, time_to_first_token_s = NULL, version = ?, "
                "versions = ?, error = '' WHERE id = ?",
                (STREAMING, model, now, now, number, number, message_id),
            )
        return self.message(message_id)

    def show_version(self, message_id: int, number: int) -> Message:
        """Make version `number` of a reply the one its row holds (and the history uses)."""
        current = self.message(message_id)
        if number == current.version:
            return current
        row = self._db.execute(
            f"SELECT {VERSION_COLUMNS} FROM reply_versions WHERE message_id = ? AND number = ?",
            (message_id, number),
        ).fetchone()
        if row is None:
            raise KeyError((message_id, number))
        with self._transaction():
            self._keep_shown_version(current)
            sets = ", ".join(f"{c.strip()} = ?" for c in VERSION_COLUMNS.split(","))
            self._db.execute(
                f"UPDATE messages SET {sets}, version = ?, error = '' WHERE id = ?",
                (*row, number, message_id),
            )
        return self.message(message_id)

    def reply_versions(self, message_id: int) -> list[Message]:
        """Every version of a reply, first to last (the shown one as its row holds it)."""
        current = self.message(message_id)
        rows = self._db.execute(
            f"SELECT number, {VERSION_COLUMNS} FROM reply_versions WHERE message_id = ? "
            "ORDER BY number",
            (message_id,),
        ).fetchall()
        kept = {
            number: replace(
                current,
                content=content,
                created_at=created,
                updated_at=created,
                status=status,
                model=model,
                prompt_tokens=prompt,
                generated_tokens=generated,
                tokens_per_second=speed,
                time_to_first_token_s=first,
                version=number,
            )
            for number, content, created, status, model, prompt, generated, speed, first in rows
        }
        kept[current.version] = current
        return [kept[n] for n in sorted(kept)]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _keep_shown_version(self, message: Message) -> None:
        self._db.execute(
            f"INSERT OR REPLACE INTO reply_versions (message_id, number, {VERSION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message.id,
                message.version,
                message.content,
                message.created_at,
                message.status,
                message.model,
                message.prompt_tokens,
                message.generated_tokens,
                message.tokens_per_second,
                message.time_to_first_token_s,
            ),
        )

    def _touch(self, conversation_id: int, now: float) -> None:
        self._db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)
        )


def _row_id(cur: sqlite3.Cursor) -> int:
    assert cur.lastrowid is not None  # set by every INSERT
    return int(cur.lastrowid)


def _conversation(row: tuple[int, str, float, float, str, str, str | None]) -> Conversation:
    cid, title, created, updated, system_prompt, sampling_json, model = row
    try:
        sampling = json.loads(sampling_json)
    except ValueError:
        sampling = {}
    return Conversation(cid, title, created, updated, system_prompt, sampling, model)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
