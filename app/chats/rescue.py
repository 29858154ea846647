"""Opening the conversations file whatever state it is in, so the app always starts.

Damaged (scribbled, cut short, a table missing, a folder in its place) or from a newer version:
the file is set aside as `conversations.sqlite3.bak-<time>` (with its -wal and -shm, which hold
committed rows too), a fresh one is started, and every row SQLite can still read is copied in:
each table is read forwards until the damage, backwards from the end until the damage, and the
ids in between one by one, so the pages after the damage are kept as well as those before it.
Locked by another program for longer than the busy timeout: nothing is wrong with the file, so
it is left alone and this window keeps its chats in memory, starting from a copy of the file's
rows when SQLite lets them be read (WAL), with the holder named where the system says. Each
case is one sentence.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from app.chats.chats_file import (
    BUSY_TIMEOUT_S,
    TABLE_COLUMNS,
    ChatsLockedError,
    ChatsUnusableError,
    readable_while_locked,
)
from app.chats.store import ChatStore
from app.platform.state_files import set_aside

log = logging.getLogger(__name__)

MAX_PROBES = 200_000  # ids tried one by one between the readable ends of a damaged table
ROLES = ("system", "user", "assistant")
# A row read from a damaged table, by column: its cells may hold anything SQLite can store
# (an integer, a float, text, bytes or NULL), so each is checked before it is copied.
SqlRow = dict[str, int | float | str | bytes | None]


@dataclass(frozen=True)
class Recovered:
    conversations: int
    messages: int


@dataclass(frozen=True)
class OpenedChats:
    """The store to use, and what the user must be told (None: nothing happened)."""

    store: ChatStore
    notice: str | None = None
    set_aside_as: Path | None = None  # where a damaged file went
    recovered: Recovered | None = None
    saved: bool = True  # False: kept in memory only (the file is locked by another program)


def open_chats(
    path: Path, other_pid: int | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S
) -> OpenedChats:
    """Open `path` or, when it cannot be used, what the module docstring says. `other_pid`: the
    other KV Studio on this data folder, if one runs (named in the locked notice)."""
    try:
        return OpenedChats(ChatStore(path, busy_timeout_s))
    except ChatsLockedError as error:
        who = f"another KV Studio (process {other_pid})" if other_pid else error.who
        if readable_while_locked(path, busy_timeout_s):  # shown as they are, never written
            shown = ChatStore(":memory:")
            copy_readable_rows(path, shown)
            return OpenedChats(
                shown,
                f"Your conversations are locked by {who}, so this window shows them but "
                "saves nothing new; close the other one and start again to change them.",
                saved=False,
            )
        return OpenedChats(
            ChatStore(":memory:"),
            f"Your conversations are locked by {who}, so this window starts without them and "
            "keeps nothing it is given; close the other one and start again to see them.",
            saved=False,
        )
    except ChatsUnusableError as error:
        backup = _set_aside_with_journal(path)
        store = ChatStore(path, busy_timeout_s)
        recovered = copy_readable_rows(backup, store)
        log.warning("conversations file %s; set aside as %s, %s", error.problem, backup, recovered)
        return OpenedChats(
            store,
            f"Your conversations file {error.problem}; it was kept as {backup.name} and "
            f"{_count(recovered.conversations, 'conversation')} with "
            f"{_count(recovered.messages, 'message')} were recovered into a fresh one.",
            set_aside_as=backup,
            recovered=recovered,
        )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _set_aside_with_journal(path: Path) -> Path:
    backup = set_aside(path)
    for suffix in ("-wal", "-shm"):
        # A WAL left at the old name would be replayed into the fresh file.
        journal = path.with_name(path.name + suffix)
        if journal.exists():
            os.replace(journal, backup.with_name(backup.name + suffix))
    return backup


def copy_readable_rows(damaged: Path, into: ChatStore) -> Recovered:
    """Copy every readable conversation and message of `damaged` into `into`, ids kept. A
    message whose conversation is lost goes into a 'Recovered chat' of the same id."""
    if not damaged.is_file():
        return Recovered(0, 0)
    source = _open_read_only(damaged)
    if source is None:
        return Recovered(0, 0)
    with contextlib.closing(source):
        conversations = _readable_rows(source, "conversations")
        messages = _readable_rows(source, "messages")
    db = into._db  # one transaction for the whole copy: fast, and all or nothing
    now = time.time()
    kept_conversations = 0
    kept_messages = 0
    db.execute("BEGIN")
    try:
        for conversation_id, row in conversations.items():
            if _insert_conversation(db, conversation_id, row, now):
                kept_conversations += 1
        known = {r[0] for r in db.execute("SELECT id FROM conversations")}
        for row in messages.values():
            cid = row.get("conversation_id")
            if not isinstance(cid, int):
                continue
            if cid not in known and _insert_conversation(db, cid, {}, now):
                known.add(cid)
                kept_conversations += 1
            if _insert_message(db, row, now):
                kept_messages += 1
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return Recovered(kept_conversations, kept_messages)


def _open_read_only(path: Path) -> sqlite3.Connection | None:
    for options in ("mode=ro", "immutable=1"):  # immutable: no -shm to map, WAL ignored
        try:
            db = sqlite3.connect(f"file:{quote(str(path))}?{options}", uri=True)
            # A file shorter than its header's page count is refused as corrupt unless the
            # schema is 'writable'; with it, SQLite reads the pages that are there.
            db.execute("PRAGMA writable_schema=ON")
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return db
        except sqlite3.DatabaseError:
            continue
    return None


def _readable_rows(db: sqlite3.Connection, table: str) -> dict[int, SqlRow]:
    """Rows of `table` that can be read, by id: forwards, backwards, then each id between."""
    try:
        have = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return {}
    columns = [c for c in TABLE_COLUMNS[table] if c in have]
    if "id" not in columns:
        return {}
    select = f"SELECT {', '.join(columns)} FROM {table}"
    rows: dict[int, SqlRow] = {}

    def take(sql: str, args: tuple[int, ...] = ()) -> None:
        with contextlib.suppress(sqlite3.DatabaseError):
            for values in db.execute(sql, args):
                row = dict(zip(columns, values, strict=True))
                if isinstance(row["id"], int):
                    rows.setdefault(row["id"], row)

    take(f"{select} ORDER BY rowid")
    take(f"{select} ORDER BY rowid DESC")
    highest = max([*rows, _sequence(db, table)], default=0)
    missing = (i for i in range(1, highest + 1) if i not in rows)
    for probes, rowid in enumerate(missing):
        if probes >= MAX_PROBES:
            break
        take(f"{select} WHERE rowid = ?", (rowid,))
    return rows


def _sequence(db: sqlite3.Connection, table: str) -> int:
    """The highest id AUTOINCREMENT ever gave in `table` (0 when unreadable)."""
    with contextlib.suppress(sqlite3.DatabaseError):
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        if row is not None and isinstance(row[0], int):
            return min(row[0], 1 << 31)
    return 0


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) else default


def _time(value: object, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and value == value else default


def _insert_conversation(db: sqlite3.Connection, cid: int, row: SqlRow, now: float) -> bool:
    model = row.get("model")
    try:
        db.execute(
            "INSERT INTO conversations (id, title, created_at, updated_at, system_prompt, "
            "sampling_json, model) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                _text(row.get("title"), f"Recovered chat {cid}"),
                _time(row.get("created_at"), now),
                _time(row.get("updated_at"), now),
                _text(row.get("system_prompt"), ""),
                _text(row.get("sampling_json"), "{}"),
                model if isinstance(model, str) else None,
            ),
        )
    except sqlite3.DatabaseError:
        return False
    return True


def _insert_message(db: sqlite3.Connection, row: SqlRow, now: float) -> bool:
    role, content = row.get("role"), row.get("content")
    if role not in ROLES or not isinstance(content, str):
        return False  # a scribbled cell: no message a user could read
    stats = {
        key: value if isinstance(value, (int, float)) else None
        for key in ("prompt_tokens", "generated_tokens", "tokens_per_second")
        for value in [row.get(key)]
    }
    try:
        db.execute(
            "INSERT INTO messages (id, conversation_id, role, content, created_at, updated_at, "
            "status, model, prompt_tokens, generated_tokens, tokens_per_second, "
            "time_to_first_token_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["id"],
                row["conversation_id"],
                role,
                content,
                _time(row.get("created_at"), now),
                _time(row.get("updated_at"), now),
                _text(row.get("status"), "done"),
                _text(row.get("model"), "") or None,
                stats["prompt_tokens"],
                stats["generated_tokens"],
                stats["tokens_per_second"],
                _time(row.get("time_to_first_token_s"), 0.0) or None,
            ),
        )
    except sqlite3.DatabaseError:
        return False
    return True
