"""What an unfinished or failed download of a repo left on disk, which the library does not
list (it lists finished models only): partial files (`.incomplete`) and, in the HF cache,
blobs no snapshot links to (a download stopped between writing a file and linking it).

`kvstudio rm OWNER/REPO[:QUANT]` removes them when no finished model matches, so whatever a
failed download left can always be deleted. Links are never followed: a leftover is a plain
file inside the repo's own folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from app.models.hub.safe_paths import check_repo_id
from app.models.hub_env import repo_folder_name

PARTIAL_SUFFIX = ".incomplete"


def download_leftovers(repo_id: str, *, cache_dir: Path, folders: Iterable[Path]) -> list[Path]:
    """The leftovers of `repo_id` in the HF cache `cache_dir` and in `folders`/owner/name."""
    check_repo_id(repo_id)
    found = _cache_leftovers(cache_dir / repo_folder_name(repo_id))
    for folder in folders:
        found += _folder_leftovers(Path(folder) / repo_id)
    return found


def delete_leftovers(repo_id: str, paths: list[Path], *, cache_dir: Path) -> int:
    """Delete `paths` (from download_leftovers); returns their bytes. The repo's cache folder
    goes too when no blob or snapshot is left in it (a ref alone names nothing on disk)."""
    freed = 0
    for path in paths:
        try:
            freed += path.stat(follow_symlinks=False).st_size
            path.unlink()
        except FileNotFoundError:
            continue
    storage = cache_dir / repo_folder_name(repo_id)
    left = _files_under(storage / "blobs") + _files_under(storage / "snapshots")
    if storage.is_dir() and not storage.is_symlink() and not left:
        shutil.rmtree(storage, ignore_errors=True)  # rmtree removes links, never their targets
    return freed


def _cache_leftovers(storage: Path) -> list[Path]:
    blobs = storage / "blobs"
    if storage.is_symlink() or blobs.is_symlink() or not blobs.is_dir():
        return []
    linked = {os.path.realpath(p) for p in _files_under(storage / "snapshots")}
    return [
        blob
        for blob in sorted(blobs.iterdir())
        if _is_plain_file(blob)
        and (blob.name.endswith(PARTIAL_SUFFIX) or os.path.realpath(blob) not in linked)
    ]


def _folder_leftovers(repo_dir: Path) -> list[Path]:
    if repo_dir.is_symlink() or not repo_dir.is_dir():
        return []
    return [
        path
        for path in _files_under(repo_dir)
        if path.name.endswith(PARTIAL_SUFFIX) and _is_plain_file(path)
    ]


def _files_under(folder: Path) -> list[Path]:
    """Files and links under `folder`, without following linked folders (os.walk's default)."""
    return [Path(root) / name for root, _dirs, files in os.walk(folder) for name in files]


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()
