"""The conversations file (with SQLite's -wal and -shm beside it) and settings.json are the
user's alone: created 0600 whatever the umask lets others read, and an older file readable by
others is narrowed when it is opened or rewritten. Real SQLite, real files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.chats.store import ChatStore
from app.platform.paths import chat_db_path, settings_path
from app.state.settings import SettingsFile


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """The usual desktop umask (others may read what is created)."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_new_conversations_file_and_its_journal_are_0600(tmp_path: Path, open_umask) -> None:
    path = chat_db_path(tmp_path)
    store = ChatStore(path)
    conversation = store.create_conversation("private")
    store.add_message(conversation.id, "user", "only mine")
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]
    assert all(f.exists() for f in files)  # WAL mode: both journals are there while open
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    store.close()


def test_an_older_conversations_file_readable_by_others_is_narrowed(
    tmp_path: Path, open_umask
) -> None:
    path = chat_db_path(tmp_path)
    ChatStore(path).close()
    os.chmod(path, 0o644)
    store = ChatStore(path)
    assert mode(path) == 0o600
    assert [c.title for c in store.conversations()] == []  # still the same, usable file
    store.close()


def test_settings_json_is_0600_new_and_rewritten(tmp_path: Path, open_umask) -> None:
    settings = SettingsFile(tmp_path)
    settings.update(theme="dark")
    assert mode(settings_path(tmp_path)) == 0o600
    os.chmod(settings_path(tmp_path), 0o644)  # as an older version left it
    settings.update(theme="light")
    assert mode(settings_path(tmp_path)) == 0o600
    assert SettingsFile(tmp_path).settings.theme == "light"
