"""The Models page's calls into app/core (Hub client, remote headers, downloader, library).

One small module, so the widgets see plain callables and the core's API is adapted in
one place. Everything here blocks; the page runs it on worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

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
