"""Conversations in SQLite (stdlib sqlite3, WAL): titles, messages, per-conversation
system prompt and sampling settings, and the reply being generated, saved as it streams.

One ChatStore per thread (sqlite3 connections stay on the thread that made them).
The schema version lives in PRAGMA user_version; _MIGRATIONS[i] upgrades i -> i+1.

Reply versions (schema 2): a regenerated reply keeps its message row and id; the row always
holds the version shown, `version` is its number and `versions` how many there are. The other
versions are copies in reply_versions, written when the reply is left (regenerated or switched
from), so every path that reads messages (pages, search, history, rescue) reads one row per reply.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_MIGRATIONS = (
    """
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
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: views cache rows by id
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
    """,
    """
    ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE messages ADD COLUMN versions INTEGER NOT NULL DEFAULT 1;
    CREATE TABLE reply_versions (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,  -- 1-based, as the message shows it ("2 / 3")
        content TEXT NOT NULL,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        model TEXT,
        prompt_tokens INTEGER,
        generated_tokens INTEGER,
        tokens_per_second REAL,
        time_to_first_token_s REAL,
        PRIMARY KEY (message_id, number)
    );
    """,
    # Why a reply failed, one sentence shown in the conversation (schema 3).
    "ALTER TABLE messages ADD COLUMN error TEXT NOT NULL DEFAULT '';",
)
SCHEMA_VERSION = len(_MIGRATIONS)

# Message.status values.
DONE, STREAMING, STOPPED, FAILED, INTERRUPTED = (
    "done",
    "streaming",
    "stopped",
    "failed",
    "interrupted",
)


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    system_prompt: str
    sampling: dict[str, Any]  # SamplingSettings fields; missing keys mean the defaults
    model: str | None


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "system" | "user" | "assistant"
    content: str
    created_at: float
    updated_at: float
    status: str = DONE
    model: str | None = None
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    tokens_per_second: float | None = None
    time_to_first_token_s: float | None = None
    version: int = 1  # which of the reply's versions this is, 1-based
    versions: int = 1  # how many versions the reply has (regenerating adds one)
    error: str = ""  # a failed reply: why, in one sentence


_MESSAGE_COLUMNS = (
    "id, conversation_id, role, content, created_at, updated_at, status, model, "
    "prompt_tokens, generated_tokens, tokens_per_second, time_to_first_token_s, "
    "version, versions, error"
)
# What a version keeps of its message row (the columns reply_versions copies).
_VERSION_COLUMNS = (
    "content, created_at, status, model, prompt_tokens, generated_tokens, tokens_per_second, "
    "time_to_first_token_s"
)


class ChatsUnusableError(Exception):
    """The conversations file cannot be used as it is (app/chats/rescue.py decides what
    then). `problem`: what is wrong, in words that finish 'Your conversations file ...'."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.problem = problem


class DamagedChatsError(ChatsUnusableError):
    """Damaged, cut short, a table missing, or not a file at all: safe to set aside."""


class NewerChatsError(ChatsUnusableError):
    """Written by a newer KV Studio (a schema version this one does not know)."""


class ChatsLockedError(ChatsUnusableError):
    """Another process holds a lock longer than the busy timeout: nothing is wrong with it."""


# The columns each table must have for this version's queries (a newer schema may add more).
TABLE_COLUMNS = {
    "conversations": (
        "id",
        "title",
        "created_at",
        "updated_at",
        "system_prompt",
        "sampling_json",
        "model",
    ),
    "messages": tuple(c.strip() for c in _MESSAGE_COLUMNS.split(",")),
}
BUSY_TIMEOUT_S = 2.0  # every write is one short statement; another instance's waits this long


class ChatStore:
    """All conversation storage. Methods commit at once: nothing waits in memory.

    Opening checks the file (SQLite's quick_check, the schema version, the tables) and raises a
    ChatsUnusableError subclass rather than failing later, mid-session."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise DamagedChatsError(self.path, "is a folder, not a file")
        # WAL: another instance's readers never wait; writers wait up to the busy timeout.
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_s)
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process in WAL mode (only power loss can lose).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            check = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if check != "ok":
                raise DamagedChatsError(self.path, damage_kind(self.path))
            self._migrate()
            self._check_tables()
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise ChatsLockedError(self.path, "is locked by another program") from error
            raise
        except sqlite3.DatabaseError as error:  # not a database, malformed
            raise DamagedChatsError(self.path, damage_kind(self.path)) from error

    def close(self) -> None:
        self._db.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise NewerChatsError(self.path, "is from a newer version of KV Studio")
        for step in range(version, SCHEMA_VERSION):
            log.info("chat store: migrating schema %d -> %d", step, step + 1)
            try:
                self._db.executescript(
                    f"BEGIN; {_MIGRATIONS[step]} PRAGMA user_version = {step + 1}; COMMIT;"
                )
            except sqlite3.OperationalError as error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                missing = str(error).removeprefix("no such table: ")
                if missing in TABLE_COLUMNS:  # an old file without it: rescued, not a crash
                    raise DamagedChatsError(self.path, f"is missing its {missing} table") from error
                raise

    def _check_tables(self) -> None:
        for table, columns in TABLE_COLUMNS.items():
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if not have:
                raise DamagedChatsError(self.path, f"is missing its {table} table")
            if not set(columns) <= have:
                raise DamagedChatsError(self.path, f"has a damaged {table} table")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # ---- conversations ---------------------------------------------------------------

    def create_conversation(
        self,
        title: str = "New chat",
        system_prompt: str = "",
        sampling: dict[str, Any] | None = None,
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
        args: tuple[Any, ...] = ()
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

    def set_sampling(self, conversation_id: int, sampling: dict[str, Any]) -> None:
        self._update_conversation(conversation_id, sampling_json=json.dumps(sampling))

    def set_model(self, conversation_id: int, model: str | None) -> None:
        self._update_conversation(conversation_id, model=model)

    def delete_conversation(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _update_conversation(self, conversation_id: int, **columns: Any) -> None:
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
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise KeyError(message_id)
        return Message(*row)

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [Message(*row) for row in rows]

    def messages_before(
        self, conversation_id: int, before_id: int | None, limit: int
    ) -> list[Message]:
        """The `limit` newest messages older than `before_id` (None: the newest), oldest
        first: a page of a long conversation, read through the (conversation, id) index."""
        rows = self._db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id < ? "
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
            f"SELECT {_VERSION_COLUMNS} FROM reply_versions WHERE message_id = ? AND number = ?",
            (message_id, number),
        ).fetchone()
        if row is None:
            raise KeyError((message_id, number))
        with self._transaction():
            self._keep_shown_version(current)
            sets = ", ".join(f"{c.strip()} = ?" for c in _VERSION_COLUMNS.split(","))
            self._db.execute(
                f"UPDATE messages SET {sets}, version = ?, error = '' WHERE id = ?",
                (*row, number, message_id),
            )
        return self.message(message_id)

    def reply_versions(self, message_id: int) -> list[Message]:
        """Every version of a reply, first to last (the shown one as its row holds it)."""
        current = self.message(message_id)
        rows = self._db.execute(
            f"SELECT number, {_VERSION_COLUMNS} FROM reply_versions WHERE message_id = ? "
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
            f"INSERT OR REPLACE INTO reply_versions (message_id, number, {_VERSION_COLUMNS}) "
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


class StreamingReply:
    """The reply being generated: text accumulates in memory and is written to its
    message row at most every `interval` seconds (and on flush/finish), so a kill loses
    at most `interval` seconds of text. Call flush() from a timer when tokens may pause.
    """

    def __init__(
        self,
        store: ChatStore,
        message_id: int,
        text: str = "",
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.message_id = message_id
        self.text = text
        self._interval = interval
        self._clock = clock
        self._written = len(text)
        self._last_write = clock()

    def append(self, piece: str) -> None:
        self.text += piece
        if self._clock() - self._last_write >= self._interval:
            self.flush()

    def flush(self) -> None:
        if len(self.text) != self._written:
            self._store.update_message(self.message_id, self.text)
            self._written = len(self.text)
            # Committed: a crash from here on keeps this much (`kvstudio -v` shows it).
            log.debug("saved %d characters of reply %d", self._written, self.message_id)
        self._last_write = self._clock()

    def finish(self, status: str, **stats: Any) -> Message:
        return self._store.finish_message(self.message_id, self.text, status, **stats)


def damage_kind(path: Path) -> str:
    """'is cut short' when the file is shorter than its header says, else 'is damaged'."""
    try:
        with path.open("rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError:
        return "is damaged"
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "is cut short" if len(header) < 100 else "is damaged"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if page_size and (size % page_size or size < pages * page_size):
        return "is cut short"
    return "is damaged"


def _row_id(cur: sqlite3.Cursor) -> int:
    assert cur.lastrowid is not None  # set by every INSERT
    return int(cur.lastrowid)


def _conversation(row: tuple[Any, ...]) -> Conversation:
    cid, title, created, updated, system_prompt, sampling_json, model = row
    try:
        sampling = json.loads(sampling_json)
    except ValueError:
        sampling = {}
    return Conversation(cid, title, created, updated, system_prompt, sampling, model)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
