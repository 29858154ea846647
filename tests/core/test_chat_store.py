"""ChatStore on real SQLite files in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.chats.chats_file import NewerChatsError
from app.chats.records import DONE, INTERRUPTED, STREAMING
from app.chats.store import ChatStore
from app.chats.streaming_reply import StreamingReply
from app.state.settings import Settings, load_settings, save_settings


@pytest.fixture
def store(tmp_path: Path) -> ChatStore:
    s = ChatStore(tmp_path / "chat.sqlite3")
    yield s
    s.close()


def test_schema_is_versioned_and_wal(store: ChatStore) -> None:
    assert store.schema_version == 3  # 2: reply versions, 3: why a reply failed
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(NewerChatsError, match="newer version of KV Studio"):
        ChatStore(tmp_path / "x.sqlite3")


def test_create_rename_delete(store: ChatStore) -> None:
    a = store.create_conversation("First")
    b = store.create_conversation(
        "Second", system_prompt="Be brief.", sampling={"temperature": 0.2}
    )
    assert [c.title for c in store.conversations()] == ["Second", "First"]
    store.rename_conversation(a.id, "Renamed")
    assert store.conversation(a.id).title == "Renamed"
    assert store.conversation(b.id).system_prompt == "Be brief."
    assert store.conversation(b.id).sampling == {"temperature": 0.2}
    store.add_message(a.id, "user", "hello")
    store.delete_conversation(a.id)
    assert [c.id for c in store.conversations()] == [b.id]
    assert store.messages(a.id) == []  # cascaded


def test_settings_per_conversation(store: ChatStore) -> None:
    c = store.create_conversation()
    store.set_system_prompt(c.id, "You are a pirate.")
    store.set_sampling(c.id, {"top_k": 10, "stop": ["\n\n"]})
    store.set_model(c.id, "/models/x.gguf")
    got = store.conversation(c.id)
    assert (got.system_prompt, got.sampling, got.model) == (
        "You are a pirate.",
        {"top_k": 10, "stop": ["\n\n"]},
        "/models/x.gguf",
    )


def test_search_title_and_text(store: ChatStore) -> None:
    a = store.create_conversation("Rust questions")
    b = store.create_conversation("Cooking")
    store.add_message(b.id, "user", "How long do I boil an egg?")
    store.add_message(a.id, "user", "100% of 50_50")
    assert [c.id for c in store.conversations("rust")] == [a.id]
    assert [c.id for c in store.conversations("EGG")] == [b.id]
    assert [c.id for c in store.conversations("0%")] == [a.id]  # % is literal
    assert store.conversations("nothing like this") == []


def test_messages_and_stats(store: ChatStore) -> None:
    c = store.create_conversation()
    u = store.add_message(c.id, "user", "Hi")
    r = store.add_message(c.id, "assistant", "", status=STREAMING, model="m.gguf")
    done = store.finish_message(
        r.id,
        "Hello!",
        DONE,
        prompt_tokens=5,
        generated_tokens=3,
        tokens_per_second=21.5,
        time_to_first_token_s=0.1,
    )
    assert [m.id for m in store.messages(c.id)] == [u.id, r.id]
    assert (done.content, done.status, done.generated_tokens, done.tokens_per_second) == (
        "Hello!",
        DONE,
        3,
        21.5,
    )


def test_delete_from_truncates_later_messages(store: ChatStore) -> None:
    c = store.create_conversation()
    ids = [
        store.add_message(c.id, role, str(i)).id
        for i, role in enumerate(["user", "assistant", "user", "assistant"])
    ]
    store.delete_messages_from(c.id, ids[2])
    assert [m.id for m in store.messages(c.id)] == ids[:2]


def test_streaming_reply_is_throttled(store: ChatStore) -> None:
    c = store.create_conversation()
    m = store.add_message(c.id, "assistant", "", status=STREAMING)
    now = [0.0]
    reply = StreamingReply(store, m.id, interval=0.5, clock=lambda: now[0])
    reply.append("a")
    assert store.message(m.id).content == ""  # not yet due
    now[0] = 0.6
    reply.append("b")
    assert store.message(m.id).content == "ab"
    reply.append("c")
    reply.flush()
    assert store.message(m.id).content == "abc"
    assert reply.finish(DONE).status == DONE


def test_interrupted_replies_are_marked(store: ChatStore) -> None:
    c = store.create_conversation()
    m = store.add_message(c.id, "assistant", "half", status=STREAMING)
    assert store.mark_interrupted() == 1
    assert store.message(m.id).status == INTERRUPTED


_WRITER = r"""
import json, sys, time
from app.chats.records import STREAMING
from app.chats.store import ChatStore
from app.chats.streaming_reply import StreamingReply
store = ChatStore(sys.argv[1])
c = store.create_conversation("kill test")
m = store.add_message(c.id, "assistant", "", status=STREAMING)
print(json.dumps({"message_id": m.id}), flush=True)
reply = StreamingReply(store, m.id, interval=0.5)
i = 0
while True:
    reply.append(f"tok{i} ")
    i += 1
    print(json.dumps({"t": time.time(), "len": len(reply.text)}), flush=True)
    time.sleep(0.02)
"""


@pytest.mark.slow
def test_partial_reply_survives_a_kill(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    message_id = json.loads(proc.stdout.readline())["message_id"]
    progress = []
    for line in proc.stdout:  # stream for ~2.3 s, then kill without warning
        progress.append(json.loads(line))
        if progress[-1]["t"] - progress[0]["t"] > 2.3:
            break
    os.kill(proc.pid, signal.SIGKILL)
    killed_at = time.time()
    progress += [json.loads(line) for line in proc.stdout]
    proc.wait()
    store = ChatStore(db)
    saved = store.message(message_id).content
    store.close()
    expected_full = "".join(f"tok{i} " for i in range(len(progress)))
    assert expected_full.startswith(saved)
    # Everything streamed more than a second before the kill is on disk.
    must_have = max(p["len"] for p in progress if p["t"] <= killed_at - 1.0)
    assert len(saved) >= must_have > 0


def test_settings_roundtrip_and_reset(tmp_path: Path) -> None:
    assert load_settings(tmp_path).settings == Settings()
    s = (
        Settings(n_ctx=2048, type_k="f16")
        .with_recent_model("/m/a.gguf")
        .with_recent_model("/m/b.gguf")
    )
    save_settings(tmp_path, s)
    loaded = load_settings(tmp_path)
    assert loaded.settings == s and loaded.notice is None
    assert loaded.settings.recent_models == ("/m/b.gguf", "/m/a.gguf")
    (tmp_path / "settings.json").write_text(json.dumps({"version": 7, "n_ctx": 1}))
    reset = load_settings(tmp_path)
    assert reset.settings == Settings()
    assert reset.notice and "from a newer version" in reset.notice
    assert list(tmp_path.glob("settings.json.bak-*"))
    assert not (tmp_path / "settings.json").exists()


def test_settings_with_bad_values_reset(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"version": 1, "type_k": "q9_9"}))
    assert load_settings(tmp_path).notice


def test_message_ids_are_never_reused(store: ChatStore) -> None:
    c = store.create_conversation()
    first = store.add_message(c.id, "assistant", "old reply")
    store.delete_messages_from(c.id, first.id)
    assert store.add_message(c.id, "assistant", "new reply").id != first.id
