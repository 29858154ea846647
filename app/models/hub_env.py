"""Hub settings read from the environment at call time (not at import time).

huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE once, when it is
first imported. The app (and its tests) may set them later, so every call here reads
them afresh and passes them to huggingface_hub explicitly.
"""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}


def hub_endpoint() -> str:
    """The Hub URL: $HF_ENDPOINT (a mirror or the test server) or huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/")


def hf_home() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(os.path.expanduser(os.environ.get("HF_HOME") or default))


def hub_cache_dir() -> Path:
    """The standard Hugging Face cache (models--owner--name/{blobs,snapshots,refs})."""
    chosen = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(os.path.expanduser(chosen)) if chosen else hf_home() / "hub"


def is_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def repo_folder_name(repo_id: str) -> str:
    """`owner/name` -> `models--owner--name` (the cache layout's folder)."""
    return "models--" + repo_id.replace("/", "--")
