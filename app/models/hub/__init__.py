"""The Hugging Face Hub: search, repo files, remote GGUF headers, downloads, tokens.

Public API (no Qt; every call reads HF_ENDPOINT / HF_TOKEN / HF_HUB_OFFLINE / HF_HUB_CACHE
at call time):

    search_models(query, *, sort="downloads"|"likes"|"last_modified", limit=50)
        -> list[RepoSummary]
    list_gguf_files(repo_id, *, revision="main") -> RepoFiles
        (.entries, .by_quantization(), .pick(sel))
    parse_model_spec("owner/name:Q4_K_M") -> ("owner/name", "Q4_K_M")
    fetch_remote_header(repo_id, filename) -> GgufHeader        (range reads, a few MiB; cached)
    clear_header_cache()
    download_entry(entry, *, folder=None, control=None, on_progress=None) -> Path
    bytes_on_disk(entry, folder=None) / partial_paths(entry, folder=None)
    save_token(token) / load_token() / delete_token() / describe_token()
"""

from __future__ import annotations

from huggingface_hub import constants as _hf_constants

from app.models.gguf_names import parse_quantization, split_info
from app.models.hub.client import (
    SORT_KEYS,
    GgufEntry,
    RemoteFile,
    RepoFiles,
    RepoSummary,
    list_gguf_files,
    list_repo_files,
    parse_model_spec,
    search_models,
)
from app.models.hub.downloader import (
    DownloadCancelled,
    DownloadControl,
    DownloadPaused,
    bytes_on_disk,
    download_entry,
    partial_paths,
)
from app.models.hub.remote_header import clear_header_cache, fetch_remote_header
from app.models.hub.tokens import delete_token, describe_token, load_token, save_token, token_path

__all__ = [
    "SORT_KEYS",
    "DownloadCancelled",
    "DownloadControl",
    "DownloadPaused",
    "GgufEntry",
    "RemoteFile",
    "RepoFiles",
    "RepoSummary",
    "bytes_on_disk",
    "clear_header_cache",
    "delete_token",
    "describe_token",
    "download_entry",
    "fetch_remote_header",
    "list_gguf_files",
    "list_repo_files",
    "load_token",
    "parse_model_spec",
    "parse_quantization",
    "partial_paths",
    "save_token",
    "search_models",
    "split_info",
    "token_path",
]

# huggingface_hub's telemetry (its own word) is off: with it on, the first request of a process
# also fetches <endpoint>/api/agent-harnesses to name an AI agent in the User-Agent, a request
# the user did not ask for (issue 10: no telemetry). Set on the module, which is read at each
# request, so it holds whatever imported huggingface_hub first.
_hf_constants.HF_HUB_DISABLE_TELEMETRY = True
