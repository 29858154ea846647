"""Which files on disk make one model: a GGUF that is a model (not a vision projector, and a
split model once, at its first part), a split model's parts and their size, and what makes
two paths one file."""

from __future__ import annotations

import os
from pathlib import Path

from app.models.gguf_names import split_info

FileIdentity = tuple[int, int] | str


def file_identity(path: Path) -> FileIdentity:
    """What makes two paths one model file: its device and inode, so a symlink, a hard link
    or the same folder reached twice (a link to it, a bind mount) is listed once; the
    resolved path when the file cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return st.st_dev, st.st_ino


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths are one model file (file_identity)."""
    return Path(a) == Path(b) or file_identity(a) == file_identity(b)


def is_model_file(name: str) -> bool:
    """Whether a file of this name is listed as a model (a split model at its part 1 only)."""
    lower = name.lower()
    if not lower.endswith(".gguf") or "mmproj" in lower:
        return False
    info = split_info(name)
    return info is None or info[1] == 1  # list a split model once, at part 1


def split_parts(path: Path) -> list[Path]:
    """Every part's path of the model at `path` (its first part), or just `path`."""
    info = split_info(path.name)
    if info is None:
        return [path]
    base, _, count = info
    return [path.with_name(f"{base}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def model_size(path: Path) -> int:
    """Bytes of a model's files: every part of a split model that is present."""
    return sum(p.stat().st_size for p in split_parts(path) if p.exists())
