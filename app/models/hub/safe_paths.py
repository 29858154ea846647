"""Keep every file the Hub names inside its target folder.

A repo file name comes from a server: it may hold '..', be absolute, use look-alikes of '/'
and '.', be longer than a disk allows, or a folder on the way may be a symlink pointing
elsewhere. Each of these raises UnsafePathError before a byte is written.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from app.platform.errors import UnsafePathError

_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def check_repo_id(repo_id: str) -> str:
    if not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UnsafePathError(f"'{repo_id}' is not a valid Hub repository name (OWNER/NAME).")
    return repo_id


# The longest name one folder entry may have on common disks (ext4, NTFS, APFS: 255), less
# the '.incomplete' a download in a folder adds while it runs.
MAX_NAME_BYTES = 255 - len(".incomplete")
# Characters that look like '/', '\\' or '.' (or become them when Windows converts a name to
# its ANSI code page, the "best fit" mapping): a name holding one is refused, since what the
# user reads is not where the file goes.
_LOOK_ALIKES = frozenset(
    "\u2215\u2044\u29f8\u29f5\u29f9\u2216\ufe68\uff0f\uff3c"  # slashes and backslashes
    "\u2024\u2025\u2026\uff0e\ufe52\u3002\uff61"  # dots
)


def _shown(name: str) -> str:
    """A hostile name as a message can show it: escaped (no control codes) and cut."""
    text = name.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 80 else text[:60] + "…" + text[-12:]


def check_relative_name(name: str) -> PurePosixPath:
    """A repo file name as a safe relative path, or UnsafePathError."""
    parts = name.split("/")
    bad = (
        not name
        or "\\" in name
        or ":" in name  # a drive ('C:') or an NTFS stream ('x.gguf:hidden')
        or any(unicodedata.category(c).startswith("C") for c in name)  # NUL, ESC, bidi marks
        or any(_looks_like_a_separator(c) for c in name)
        or any(part.strip(".") == "" for part in parts)  # '', '.', '..', '...'
    )
    if bad or PurePosixPath(name).is_absolute():
        raise UnsafePathError(
            f"The Hub named a file '{_shown(name)}', which would be written outside the model "
            f"folder; it was not downloaded."
        )
    longest = max(parts, key=lambda part: len(part.encode("utf-8")))
    if len(longest.encode("utf-8")) > MAX_NAME_BYTES:
        raise UnsafePathError(
            f"The Hub named a file '{_shown(name)}' whose name is {len(longest)} characters "
            f"long, more than a disk allows ({MAX_NAME_BYTES}); it was not downloaded."
        )
    return PurePosixPath(name)


def _looks_like_a_separator(char: str) -> bool:
    """A look-alike of '/', '\\' or '.', or a character that becomes one of those (or ':') when
    a filesystem or a tool folds compatibility forms (NFKC: fullwidth '／', '․' -> '.')."""
    if char in _LOOK_ALIKES:
        return True
    folded = unicodedata.normalize("NFKC", char)
    return folded != char and any(c in "/\\.:" for c in folded)


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
