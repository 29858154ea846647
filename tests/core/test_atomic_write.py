"""State files are replaced whole: the old bytes or the new, the file's permissions kept, a secret
never readable by others, and no temp file left when the write fails."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.platform.atomic_write import write_atomically


def test_the_new_text_replaces_the_old_and_no_temp_file_stays(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("old")
    write_atomically(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_a_secret_is_never_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "token"
    old = os.umask(0)  # the most permissive umask a user could have
    try:
        write_atomically(path, "hf_secret", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_rewritten_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "model_folders.json"
    path.write_text("[]")
    path.chmod(0o640)
    write_atomically(path, "[1]")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "\udcff")  # a lone surrogate cannot be written as UTF-8
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
