"""The Models page's calls into app/core (Hub client, remote headers, downloader, library).

One small module, so the widgets see plain callables and the core's API is adapted in
one place. Everything here blocks; the page runs it on worker threads.
"""

from __future__ import annotations

import logging

from app.core.hub import (
    RepoFiles,
    RepoSummary,
    list_gguf_files,
    search_models,
)

log = logging.getLogger(__name__)


def search(query: str, sort: str) -> list[RepoSummary]:
    return search_models(query, sort=sort)  # type: ignore[arg-type]


def list_repo(repo_id: str) -> RepoFiles:
    return list_gguf_files(repo_id)


def forget_headers() -> None:
    """Drop cached remote headers (a new token may open files that failed before)."""
    from app.core.hub.remote_header import clear_header_cache

    clear_header_cache()
