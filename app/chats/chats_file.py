"""The conversations file itself: its schema and the migrations between versions, and opening
it with the checks that refuse a damaged file, or one from a newer KV Studio, at once (as a
ChatsUnusableError, which app/chats/rescue.py acts on) rather than failing mid-session.

The schema version lives in PRAGMA user_version; _MIGRATIONS[i] upgrades i -> i+1.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from app.platform.file_locks import write_lock_holder

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

# A Message's fields in order, as its row is read.
MESSAGE_COLUMNS = (
    "id, conversation_id, role, content, created_at, updated_at, status, model, "
    "prompt_tokens, generated_tokens, tokens_per_second, time_to_first_token_s, "
    "version, versions, error"
)
# What a version keeps of its message row (the columns reply_versions copies).
VERSION_COLUMNS = (
    "content, created_at, status, model, prompt_tokens, generated_tokens, tokens_per_second, "
    "time_to_first_token_s"
)
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
    "messages": tuple(c.strip() for c in MESSAGE_COLUMNS.split(",")),
}
BUSY_TIMEOUT_S = 2.0  # every write is one short statement; another instance's waits this long


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
    """Another process holds a lock longer than the busy timeout: nothing is wrong with it.
    `holder`: (pid, program name) of the process holding it, where the system says."""

    def __init__(self, path: Path, holder: tuple[int, str] | None) -> None:
        who = f"{holder[1]} (process {holder[0]})" if holder else "another program"
        super().__init__(path, f"is locked by {who}")
        self.holder = holder
        self.who = who


def open_chats_file(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection to the conversations file at `path`, checked (SQLite's quick_check, the
    schema version, the tables) and migrated to SCHEMA_VERSION; a ChatsUnusableError
    subclass when it cannot be used as it is."""
    if path.exists() and not path.is_file():
        raise DamagedChatsError(path, "is a folder, not a file")
    _private(path)
    # WAL: another instance's readers never wait; writers wait up to the busy timeout.
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_s)
    try:
        _check_and_migrate(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _private(path: Path) -> None:
    """Conversations are the user's alone: a new file is created 0600 (SQLite gives its -wal
    and -shm files the database's permissions), an existing one readable by others is
    narrowed to 0600 with them."""
    if str(path) == ":memory:":
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for file in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
            with contextlib.suppress(OSError):  # not there, or another user's: left as it is
                if file.stat().st_mode & 0o077:
                    os.chmod(file, 0o600)
    except OSError:
        return  # a read-only folder: sqlite3 says so in its own words
    else:
        os.close(fd)


def _check_and_migrate(db: sqlite3.Connection, path: Path) -> None:
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against a killed process in WAL mode (only power loss can lose).
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        check = db.execute("PRAGMA quick_check(1)").fetchone()[0]
        if check != "ok":
            raise DamagedChatsError(path, damage_kind(path))
        _migrate(db, path)
        _check_tables(db, path)
        # Readers see a file another process is writing in (WAL), so the checks above pass
        # and the first write (at start: marking cut-off replies) failed with 'database is
        # locked'; waits up to the busy timeout for the other to let go.
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            journals = [path.with_name(path.name + suffix) for suffix in ("-shm", "-wal")]
            raise ChatsLockedError(path, write_lock_holder(path, *journals)) from error
        raise
    except sqlite3.DatabaseError as error:  # not a database, malformed
        raise DamagedChatsError(path, damage_kind(path)) from error


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerChatsError(path, "is from a newer version of KV Studio")
    for step in range(version, SCHEMA_VERSION):
        log.info("chat store: migrating schema %d -> %d", step, step + 1)
        try:
            db.executescript(
                f"BEGIN; {_MIGRATIONS[step]} PRAGMA user_version = {step + 1}; COMMIT;"
            )
        except sqlite3.OperationalError as error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            missing = str(error).removeprefix("no such table: ")
            if missing in TABLE_COLUMNS:  # an old file without it: rescued, not a crash
                raise DamagedChatsError(path, f"is missing its {missing} table") from error
            raise


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    for table, columns in TABLE_COLUMNS.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not have:
            raise DamagedChatsError(path, f"is missing its {table} table")
        if not set(columns) <= have:
            raise DamagedChatsError(path, f"has a damaged {table} table")


def readable_while_locked(path: Path, busy_timeout_s: float) -> bool:
    """Whether the rows of `path` can be read now, as committed, while another process
    holds its write lock (WAL lets readers in; a rollback-journal writer does not)."""
    try:
        db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=busy_timeout_s)
    except sqlite3.Error:
        return False
    try:
        db.execute("SELECT count(*) FROM conversations").fetchone()
        return True
    except sqlite3.Error:
        return False
    finally:
        db.close()


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
