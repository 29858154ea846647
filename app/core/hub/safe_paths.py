"""Keep every file the Hub names inside its target folder.

A repo file name comes from a server: it may hold '..', be absolute, or a folder on the
way may be a symlink pointing elsewhere. Each of these raises UnsafePathError before a
byte is written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from app.core.errors import UnsafePathError

_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def check_repo_id(repo_id: str) -> str:
    if not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UnsafePathError(f"'{repo_id}' is not a valid Hub repository name (OWNER/NAME).")
    return repo_id


def check_relative_name(name: str) -> PurePosixPath:
    """A repo file name as a safe relative path, or UnsafePathError."""
    bad = (
        not name
        or "\x00" in name
        or "\\" in name
        or name.startswith("/")
        or re.match(r"^[A-Za-z]:", name) is not None
    )
    path = PurePosixPath(name)
    if bad or path.is_absolute() or any(part in ("..", ".", "") for part in name.split("/")):
        raise UnsafePathError(
            f"The Hub named a file '{name}', which would be written outside the model folder; "
            f"it was not downloaded."
        )
    return path


def check_commit(commit: str | None) -> str:
    if not commit or not _HEX40.match(commit):
        raise UnsafePathError(
            f"The Hub sent an invalid commit id {commit!r}; the download was stopped."
        )
    return commit


def check_sha256(sha: str) -> str:
    if not _HEX64.match(sha):
        raise UnsafePathError(f"The Hub sent an invalid sha256 {sha!r}; the download was stopped.")
    return sha


def safe_join(root: Path, name: str) -> Path:
    """root / name, refusing names that escape root, also through existing symlinks."""
    relative = check_relative_name(name)
    target = Path(root, *relative.parts)
    real_root = Path(os.path.realpath(root))
    # realpath follows any symlinked folder on the way; the result must stay under root.
    real_parent = Path(os.path.realpath(target.parent))
    if real_parent != real_root and real_root not in real_parent.parents:
        raise UnsafePathError(
            f"'{name}' would be written through a link that leaves {root}; it was not downloaded."
        )
    if target.is_symlink():
        real_target = Path(os.path.realpath(target))
        if real_root not in real_target.parents:
            raise UnsafePathError(f"'{name}' is a link that leaves {root}; it was not overwritten.")
    return target
