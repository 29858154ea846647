"""Where a Hub file lands: the standard HF cache, or a folder the user picked.

HF cache (shared with every other tool):
    <cache>/models--owner--name/blobs/<sha256>                (the bytes)
    <cache>/models--owner--name/blobs/<sha256>.incomplete     (while downloading; kept to resume)
    <cache>/models--owner--name/snapshots/<commit>/<file>     (relative symlink to the blob)
    <cache>/models--owner--name/refs/<revision>               (the commit id)
A user-picked library folder:
    <folder>/owner/name/<file>   and   <file>.incomplete while downloading
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from app.models.hub.safe_paths import check_commit, check_repo_id, check_sha256, safe_join
from app.models.hub_env import repo_folder_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FilePlacement:
    """The partial file, where its bytes end up, and the path a user (or llama.cpp) opens."""

    incomplete: Path
    final: Path  # the blob in the cache, or the file itself in a folder
    visible: Path  # the snapshot link in the cache, or `final`


@dataclass(frozen=True)
class Destination:
    """Where one repo's files go: its folder in the HF cache, or <folder>/owner/name.

    Built once per download by `of`, which checks the repo id; every path of the download
    is then made from `root`, file names through safe_join."""

    root: Path  # <cache>/models--owner--name, or <folder>/owner/name
    in_cache: bool

    @classmethod
    def of(cls, repo_id: str, folder: Path | None, cache_dir: Path) -> Destination:
        check_repo_id(repo_id)
        if folder is not None:
            return cls(Path(folder) / repo_id, in_cache=False)
        return cls(Path(cache_dir) / repo_folder_name(repo_id), in_cache=True)

    @property
    def data_folder(self) -> Path:
        """Where the bytes are written (the free space that counts)."""
        return self.root / "blobs" if self.in_cache else self.root

    def incomplete(self, filename: str, sha256: str | None) -> Path | None:
        """The partial file a download of `filename` keeps between attempts (in the cache it
        is named by the sha256, so None when the Hub gave none: known only from the ETag)."""
        if not self.in_cache:
            return self.placement(filename).incomplete
        if not sha256:
            return None
        return safe_join(self.root, f"blobs/{check_sha256(sha256)}.incomplete")

    def placement(
        self, filename: str, sha256: str | None = None, commit: str | None = None
    ) -> FilePlacement:
        """In a folder: the file itself. In the cache: blobs/<sha256> and the snapshot link
        snapshots/<commit>/<filename> (both needed there)."""
        if not self.in_cache:
            final = safe_join(self.root, filename)
            return FilePlacement(final.with_name(final.name + ".incomplete"), final, final)
        # Through safe_join too: a blobs/ folder that is a link out of the repo's folder is
        # refused, as a link on the way to a file in a chosen folder is.
        blob = safe_join(self.root, f"blobs/{check_sha256(sha256 or '')}")
        pointer = safe_join(self.root, f"snapshots/{check_commit(commit)}/{filename}")
        return FilePlacement(blob.with_name(blob.name + ".incomplete"), blob, pointer)


def finish(
    placement: FilePlacement, *, cache_storage: Path | None, revision: str, commit: str | None
) -> Path:
    """Move the verified partial file into place.

    In the cache, also link the snapshot and write the ref.
    """
    placement.final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(placement.incomplete, placement.final)
    os.chmod(placement.final, 0o644)
    if cache_storage is not None:
        link_snapshot(placement)
        if commit and revision != commit:
            write_ref(cache_storage, revision, commit)
    return placement.visible


def link_snapshot(placement: FilePlacement) -> None:
    """snapshots/<commit>/<file> -> ../../blobs/<sha256> (relative, as huggingface_hub does)."""
    pointer = placement.visible
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(pointer):
        pointer.unlink()
    relative = os.path.relpath(placement.final, pointer.parent)
    try:
        os.symlink(relative, pointer)
    except OSError:
        # No symlinks (some Windows setups): huggingface_hub then keeps a copy;
        # a hard link is cheaper.
        try:
            os.link(placement.final, pointer)
        except OSError:
            import shutil

            shutil.copyfile(placement.final, pointer)


def write_ref(storage: Path, revision: str, commit: str) -> None:
    ref = safe_join(storage / "refs", revision)
    ref.parent.mkdir(parents=True, exist_ok=True)
    if not ref.exists() or ref.read_text().strip() != commit:
        ref.write_text(commit)


def read_ref(storage: Path, revision: str) -> str | None:
    try:
        return (storage / "refs" / revision).read_text().strip() or None
    except (OSError, ValueError):
        return None


def finish_existing(placement: FilePlacement, storage: Path, revision: str, commit: str) -> None:
    """The blob is already complete: make the snapshot link and the ref point at it."""
    if not placement.visible.exists():
        link_snapshot(placement)
    if revision != commit:
        write_ref(storage, revision, commit)
