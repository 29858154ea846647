"""A damaged, newer, incomplete, misplaced or locked conversations file never stops the app.

Each kind of damage is made on a real SQLite file of 40 conversations and 1,000 messages, then the
real start (`build_app`, and `kvstudio` subprocesses) runs on it. Before this, every kind ended
the start in build_app's ChatStore(...) with a traceback and no window.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.chats.store import ChatStore
from app.platform.paths import chat_db_path
from tests.cli_runner import ROOT, kvstudio
from tests.waits import HANG_GUARD_MS

AREA = "State files"
CHATS, MESSAGES = 40, 25  # 1,000 messages of ~230 bytes: a file of 75 pages


@pytest.fixture(scope="module")
def full_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("full") / "conversations.sqlite3"
    store = ChatStore(path)
    for c in range(CHATS):
        conv = store.create_conversation(f"chat {c}")
        for m in range(MESSAGES):
            role = "user" if m % 2 == 0 else "assistant"
            store.add_message(conv.id, role, f"message {c}-{m} " + "x" * 200)
    store.close()  # the last connection checkpoints: everything is in the main file
    return path


def _cut_short(db: Path) -> None:
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size * 6 // 10)


def _scribbled(db: Path) -> None:
    with db.open("r+b") as f:
        f.seek(db.stat().st_size * 4 // 10)
        f.write(os.urandom(3 * 4096))


def _newer(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA user_version = 99")


def _table_missing(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE messages")


def _folder(db: Path) -> None:
    db.unlink()
    (db / "inside").mkdir(parents=True)


# kind -> (damage, words of the notice, least conversations / messages that must come back)
KINDS: dict[str, tuple[Callable[[Path], None], str, int, int]] = {
    "cut short at 60%": (_cut_short, "is cut short", CHATS, 500),
    "12 KiB scribbled at 40%": (_scribbled, "is damaged", CHATS, 900),
    "newer schema version": (_newer, "from a newer version", CHATS, CHATS * MESSAGES),
    "messages table missing": (_table_missing, "missing its messages table", CHATS, 0),
    "a folder in its place": (_folder, "is a folder", 0, 0),
}


def _data_folder(tmp_path: Path, full_db: Path, damage: Callable[[Path], None]) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    db = chat_db_path(folder)
    shutil.copy(full_db, db)
    damage(db)
    return folder


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_app_starts_on_a_damaged_conversations_file(
    qtbot, tmp_path: Path, full_db: Path, kind: str, reliability
) -> None:
    from app.gui import build_app

    damage, words, least_chats, least_messages = KINDS[kind]
    folder = _data_folder(tmp_path, full_db, damage)
    parts = build_app(folder)
    try:
        parts.window.show()
        qtbot.waitUntil(lambda: parts.window.last_error_box is not None, timeout=HANG_GUARD_MS)
        box = parts.window.last_error_box
        assert box is not None and box.isVisible()
        notice = box.text()
        assert notice.startswith("Your conversations file") and words in notice
        assert notice.count(". ") == 0 and notice.endswith(".")  # one sentence
        kept = [
            p
            for p in folder.glob("conversations.sqlite3.bak-*")
            if not p.name.endswith(("-wal", "-shm"))
        ]
        assert len(kept) == 1 and kept[0].name in notice
        chats = parts.store.conversations()
        messages = sum(len(parts.store.messages(c.id)) for c in chats)
        assert len(chats) >= least_chats and messages >= least_messages
        assert f"{len(chats):,} conversation" in notice and f"{messages:,} message" in notice
        # The fresh file works and is whole.
        parts.store.add_message(parts.store.create_conversation().id, "user", "hello again")
        check = sqlite3.connect(chat_db_path(folder)).execute("PRAGMA integrity_check")
        assert check.fetchone()[0] == "ok"
    finally:
        parts.window.close()
        parts.close()
    reliability.record(
        AREA,
        f"conversations file {kind}: rows recovered",
        (
            f"{len(chats)}/{CHATS} conversations, {messages:,}/{CHATS * MESSAGES:,} messages; "
            "the app started, the file kept aside"
        ),
    )


@pytest.mark.slow
def test_a_locked_conversations_file_is_left_alone_and_named(
    qtbot, tmp_path: Path, full_db: Path, reliability
) -> None:
    """Another KV Studio holds the file in exclusive mode (as `PRAGMA locking_mode=EXCLUSIVE`
    or a long write would): this window starts without the chats, says who holds them, and
    neither sets the file aside nor touches it; the other one goes on writing."""
    from app.gui import build_app

    folder = _data_folder(tmp_path, full_db, lambda _db: None)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "holding"
        parts = build_app(folder)
        try:
            qtbot.waitUntil(lambda: parts.window.last_error_box is not None, timeout=HANG_GUARD_MS)
            notice = parts.window.last_error_box.text()
            assert f"locked by another KV Studio (process {holder.pid})" in notice
            assert parts.store.conversations() == []
            assert not list(folder.glob("*.bak-*"))
        finally:
            parts.window.close()
            parts.close()
        holder.stdin.write("write\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "written"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    with sqlite3.connect(chat_db_path(folder)) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert count == CHATS * MESSAGES + 1  # the other's write after ours is there
    reliability.record(
        AREA,
        "conversations file locked by another instance",
        "started without it, named "
        "the other process, file untouched, the other's later write kept, integrity ok",
    )


# Another KV Studio that owns the data folder and holds its conversations file exclusively.
_HOLDER = """
import sqlite3, sys
from pathlib import Path
from app.state.instance_lock import InstanceLock
folder = Path(sys.argv[1])
lock = InstanceLock(folder)
db = sqlite3.connect(folder / "conversations.sqlite3", isolation_level=None)
db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("UPDATE conversations SET title = title")  # takes the lock, kept until exit
print("holding", flush=True)
sys.stdin.readline()
db.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at) "
           "VALUES (1, 'user', 'written while the other window was open', 0, 0)")
print("written", flush=True)
sys.stdin.readline()
"""


def test_cli_commands_start_on_a_damaged_conversations_file(
    tmp_path: Path, full_db: Path, reliability
) -> None:
    """`kvstudio ls` never opens the conversations file (no command does), so this held before;
    kept so it stays so. The file is left for the GUI to rescue with a notice."""
    folder = _data_folder(tmp_path, full_db, _scribbled)
    before = chat_db_path(folder).read_bytes()
    result = kvstudio("ls", env={"KVSTUDIO_DATA_DIR": str(folder)}, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result
    assert chat_db_path(folder).read_bytes() == before
    reliability.record(AREA, "kvstudio ls on a scribbled conversations file", "ran (exit 0)")


@pytest.mark.slow
def test_the_real_gui_process_starts_on_a_scribbled_file(
    tmp_path: Path, full_db: Path, reliability
) -> None:
    """`kvstudio gui` as a user starts it (offscreen): the window is drawn, the notice is in the
    app's log, the file is aside. Before: a traceback from ChatStore and exit 1, no window."""
    folder = _data_folder(tmp_path, full_db, _scribbled)
    shot = tmp_path / "window.png"
    result = kvstudio(
        "gui",
        "--screenshot",
        str(shot),
        env={"KVSTUDIO_DATA_DIR": str(folder), "QT_QPA_PLATFORM": "offscreen"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert shot.stat().st_size > 0
    assert "Traceback" not in result.stderr
    log = (folder / "logs" / "kvstudio.log").read_text(encoding="utf-8")
    assert "Your conversations file is damaged; it was kept as conversations.sqlite3.bak-" in log
    assert list(folder.glob("conversations.sqlite3.bak-*"))
    reliability.record(AREA, "kvstudio gui (a real process) on a scribbled file", "window shown")
