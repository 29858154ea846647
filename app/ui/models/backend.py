"""The Models page's calls into app/core (Hub client, remote headers, downloader, library).

One small module, so the widgets see plain callables and the core's API is adapted in
one place. Everything here blocks; the page runs it on worker threads.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from app.core import library
from app.core.gguf_header import GgufHeader
from app.core.hub import (
    GgufEntry,
    RepoFiles,
    RepoSummary,
    download_entry,
    fetch_remote_header,
    list_gguf_files,
    partial_paths,
    search_models,
)
from app.core.hub.transfer import DownloadControl

log = logging.getLogger(__name__)

USER_FOLDERS_FILE = "model_folders.json"
DOWNLOAD_FOLDER_FILE = "download_folder.json"


def search(query: str, sort: str) -> list[RepoSummary]:
    return search_models(query, sort=sort)  # type: ignore[arg-type]


def list_repo(repo_id: str) -> RepoFiles:
    return list_gguf_files(repo_id)


def entry_header(entry: GgufEntry) -> GgufHeader:
    """The header of the entry's first file, from a few MiB of range reads."""
    return fetch_remote_header(entry.repo_id, entry.first_file)


def forget_headers() -> None:
    """Drop cached remote headers (a new token may open files that failed before)."""
    from app.core.hub.remote_header import clear_header_cache

    clear_header_cache()


def download(
    entry: GgufEntry, folder: Path | None, control: DownloadControl, progress: Callable[[int], None]
) -> Path:
    """Download every part of `entry` into `folder` (None: the HF cache); part 1's path."""
    return download_entry(
        entry, folder=folder, control=control, on_progress=lambda done, _total: progress(done)
    )


def partial_bytes(entry: GgufEntry, folder: Path | None) -> int:
    """Bytes already on disk in the entry's partial files (what a resume starts from)."""
    total = 0
    for path in partial_paths(entry, folder=folder):
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def discard_partials(entry: GgufEntry, folder: Path | None) -> None:
    for path in partial_paths(entry, folder=folder):
        path.unlink(missing_ok=True)


# ---- the library and the folders the user added --------------------------------------------

_user_folders_file: Path | None = None


def set_data_dir(folder: Path | None) -> None:
    """Where the list of folders the user added is kept (None: not kept)."""
    global _user_folders_file
    _user_folders_file = Path(folder) / USER_FOLDERS_FILE if folder else None


def user_folders() -> list[Path]:
    if _user_folders_file is None:
        return []
    try:
        raw = json.loads(_user_folders_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [Path(p) for p in raw if isinstance(p, str)]


def add_folder(folder: Path) -> None:
    folders = user_folders()
    folder = Path(folder).expanduser().resolve()
    if folder in folders or _user_folders_file is None:
        return
    _user_folders_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = _user_folders_file.with_name(_user_folders_file.name + ".tmp")
    tmp.write_text(json.dumps([str(p) for p in folders + [folder]], indent=1), encoding="utf-8")
    os.replace(tmp, _user_folders_file)


def list_library() -> list[library.LibraryModel]:
    return library.list_models(extra_dirs=user_folders())


def delete_model(model: library.LibraryModel) -> None:
    library.delete_model(model)


def chosen_download_folder() -> Path | None:
    """The folder the user last chose for downloads (None: the Hugging Face cache)."""
    if _user_folders_file is None:
        return None
    try:
        raw = json.loads((_user_folders_file.parent / DOWNLOAD_FOLDER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    folder = raw.get("folder") if isinstance(raw, dict) else None
    return Path(folder) if isinstance(folder, str) else None


def choose_download_folder(folder: Path | None) -> None:
    if _user_folders_file is None:
        return
    path = _user_folders_file.parent / DOWNLOAD_FOLDER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"folder": str(folder) if folder else None}), encoding="utf-8")
    os.replace(tmp, path)


def download_folders() -> list[Path]:
    """Folders downloads went to before (the core library remembers them)."""
    return library.library_folders()
