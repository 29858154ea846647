"""Two KV Studio instances on one data folder: the first owns it (app/state/instance_lock.py), the
second runs too, says which process the first is, and neither spoils the other's conversations.

Before: both marked every 'streaming' reply as 'interrupted' at start, so a second window cut
off the first one's reply in progress, and nothing told the user a second instance was open.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.chats.records import STREAMING
from app.platform.paths import chat_db_path
from tests.cli_runner import ROOT
from tests.waits import HANG_GUARD_MS

AREA = "State files"
WRITES = 300

# One instance: takes the data folder's lock, opens the conversations as the app does, says so,
# then on "go" writes a streamed reply and WRITES messages as fast as it can.
_INSTANCE = """
import os, sys
from pathlib import Path
from app.chats.rescue import open_chats
from app.chats.records import STREAMING
from app.chats.streaming_reply import StreamingReply
from app.state.instance_lock import InstanceLock
folder = Path(sys.argv[1])
lock = InstanceLock(folder)
store = open_chats(folder / "conversations.sqlite3", other_pid=lock.other_pid).store
print("ready", lock.owned, lock.other_pid, flush=True)
sys.stdin.readline()
conv = store.create_conversation(f"from {os.getpid()}")
reply = StreamingReply(store, store.add_message(conv.id, "assistant", "", STREAMING).id, interval=0)
for i in range(int(sys.argv[2])):
    store.add_message(conv.id, "user", f"{os.getpid()} says {i}")
    reply.append(f" {i}")
reply.finish("done")
print("done", flush=True)
sys.stdin.readline()
"""


def _start(folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _INSTANCE, str(folder), str(WRITES)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_two_instances_write_at_once_and_neither_corrupts_the_other(
    tmp_path: Path, reliability
) -> None:
    first = _start(tmp_path)
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline().split() == ["ready", "True", "None"]
    second = _start(tmp_path)
    assert second.stdout is not None and second.stdin is not None
    assert second.stdout.readline().split() == ["ready", "False", str(first.pid)]
    for p in (first, second):
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in (first, second):
        assert p.stdout is not None and p.stdout.readline().strip() == "done"
        assert p.stdin is not None
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    with sqlite3.connect(chat_db_path(tmp_path)) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        per_chat = con.execute(
            "SELECT c.title, count(m.id) FROM conversations c JOIN messages m "
            "ON m.conversation_id = c.id WHERE m.role = 'user' GROUP BY c.id"
        ).fetchall()
        replies = con.execute(
            "SELECT content, status FROM messages WHERE role='assistant'"
        ).fetchall()
    assert sorted(per_chat) == sorted(
        [(f"from {first.pid}", WRITES), (f"from {second.pid}", WRITES)]
    )
    whole = "".join(f" {i}" for i in range(WRITES))
    assert replies == [(whole, "done"), (whole, "done")]
    reliability.record(
        AREA,
        "two instances writing at once (real processes)",
        f"{2 * WRITES} messages + 2 streamed replies, none lost, integrity_check ok",
    )


@pytest.mark.slow
def test_a_second_window_leaves_the_first_ones_reply_streaming_and_says_so(
    qtbot, tmp_path: Path, reliability
) -> None:
    from app.gui import build_app

    first = _start(tmp_path)
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline().split() == ["ready", "True", "None"]
    # The first instance's reply in progress, as its chat page leaves it mid-stream.
    with sqlite3.connect(chat_db_path(tmp_path)) as con:
        con.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('a', 0, 0)")
        con.execute(
            "INSERT INTO messages (conversation_id, role, content, created_at, updated_at, "
            "status) VALUES (1, 'assistant', 'half a rep', 0, 0, ?)",
            (STREAMING,),
        )
    try:
        parts = build_app(tmp_path)
        try:
            qtbot.waitUntil(lambda: parts.window.last_error_box is not None, timeout=HANG_GUARD_MS)
            notice = parts.window.last_error_box.text()
            assert f"Another KV Studio (process {first.pid}) is open" in notice
            assert parts.store.messages(1)[0].status == STREAMING
        finally:
            parts.window.close()
            parts.close()
    finally:
        first.stdin.close()
        first.wait(timeout=30)
    reliability.record(
        AREA, "a second window on the same data folder", "named the first; its reply kept streaming"
    )
