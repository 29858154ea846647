"""Turn what a user typed (a .gguf path, `starter`, a library name or a Hub OWNER/REPO:QUANT)
into a checked model file.

`resolve_model` is the one place that does this for the CLI and the GUI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from app.models import starter
from app.models.gguf_read import check_gguf
from app.models.library import find_model, list_models
from app.platform.errors import BadInputError, ModelNotFoundError
from app.platform.safe_text import safe_text

STARTER_WORD = "starter"


def resolve_model(
    text: str,
    *,
    allow_pull: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> Path:
    """The GGUF file `text` names, validated (header and size). Raises
    ModelFileMissingError, NotAGgufError or TruncatedGgufError with one sentence.

    `text` is a path, `starter`, a library model's name (`kvstudio ls`), or a Hub model
    OWNER/REPO[:QUANT|FILE]: taken from the library when it is there, else downloaded
    (when `allow_pull`; `on_progress(done, total)` follows the download).
    """
    text = text.strip()
    if text.lower() == STARTER_WORD:
        path = starter.starter_path()
    else:
        path = Path(text).expanduser()
        if not _exists(path):
            path = _from_library_or_hub(text, allow_pull, on_progress) or path
    check_gguf(path)
    # Absolute, but symlinks kept: an HF cache snapshot link must not become blobs/<sha256>,
    # or llama.cpp cannot find a split model's other parts next to the first.
    return Path(os.path.abspath(path))


def _exists(path: Path) -> bool:
    """Whether `path` exists; a path the system cannot even look up (a name longer than the
    file system allows, a loop of links) is bad input in one sentence, not a crash."""
    try:
        return path.exists()
    except OSError as error:
        raise BadInputError(
            f"{safe_text(str(path), 200)} cannot be opened: {error.strerror or error}."
        ) from None


def _from_library_or_hub(
    text: str, allow_pull: bool, on_progress: Callable[[int, int], None] | None
) -> Path | None:
    """A library model named `text`, else the Hub model it names pulled into the cache;
    None when `text` is neither (the caller then reports a missing file)."""

    models = list_models()
    try:
        return find_model(text, models).path
    except ModelNotFoundError:
        pass
    looks_like_repo = (
        text.count("/") == 1 and not text.startswith(("/", ".", "~")) and not text.endswith(".gguf")
    )
    if not (allow_pull and looks_like_repo):
        return None

    # The Hub client (huggingface_hub, httpx: 0.3 s of imports) only when a repo is named:
    # every `kvstudio run` and engine start resolves a model, few of them pull one.
    from app.models.hub import download_entry, list_gguf_files, parse_model_spec

    repo_id, selector = parse_model_spec(text)
    entry = list_gguf_files(repo_id).pick(selector)
    return download_entry(entry, on_progress=on_progress)
