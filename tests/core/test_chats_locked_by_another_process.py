"""The conversations file held by another program (a real second process in `BEGIN EXCLUSIVE` on
the real SQLite file): the app's store opens after the busy timeout, names the process, shows
the conversations when SQLite lets them be read, and changes nothing in the file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.chats.rescue import open_chats
from app.chats.store import ChatStore

# Holds the write lock until told, then writes one message of its own and lets go.
_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "delete":
    db.execute("PRAGMA journal_mode=DELETE")
db.execute("BEGIN EXCLUSIVE")
print("holding", flush=True)
sys.stdin.readline()
db.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at) "
           "VALUES (1, 'user', 'written by the other program', 0, 0)")
db.execute("COMMIT")
print("written", flush=True)
"""


def _chats(path: Path) -> None:
    store = ChatStore(path)
    first = store.create_conversation("Trip to Lisbon")
    store.add_message(first.id, "user", "Which tram goes to Belém?")
    store.add_message(first.id, "assistant", "Tram 15.")
    store.create_conversation("Sourdough")
    store.close()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_file_held_by_another_process_opens_named_and_untouched(journal, tmp_path) -> None:
    path = tmp_path / "conversations.sqlite3"
    _chats(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), journal],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "holding"
        opened = open_chats(path, busy_timeout_s=0.5)
        store = opened.store
        assert opened.notice is not None and not opened.saved
        program = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        assert opened.notice.startswith(
            f"Your conversations are locked by {program} (process {holder.pid}), so this window "
        ), opened.notice
        assert "\n" not in opened.notice
        titles = sorted(c.title for c in store.conversations())
        if journal == "wal":  # readers are let in: shown as they are
            assert "shows them but saves nothing new" in opened.notice
            assert titles == ["Sourdough", "Trip to Lisbon"]
            lisbon = next(c for c in store.conversations() if c.title == "Trip to Lisbon")
            assert [m.content for m in store.messages(lisbon.id)][-1] == "Tram 15."
        else:  # a rollback-journal writer keeps readers out
            assert "starts without them" in opened.notice and titles == []
        # What the app does at start, and what a user then does: no 'database is locked'.
        store.mark_interrupted()
        new = store.create_conversation("Typed while locked")
        store.add_message(new.id, "user", "kept in this window only")
        store.close()
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "written"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        titles = sorted(r[0] for r in db.execute("SELECT title FROM conversations"))
        contents = [r[0] for r in db.execute("SELECT content FROM messages ORDER BY id")]
    assert titles == ["Sourdough", "Trip to Lisbon"]  # nothing of ours written, nothing lost
    assert contents == [
        "Which tram goes to Belém?",
        "Tram 15.",
        "written by the other program",
    ]
    again = open_chats(path)  # the other let go: the file is used as usual
    assert again.notice is None and again.saved
    again.store.close()
