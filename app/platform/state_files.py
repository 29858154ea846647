"""The app's small JSON state files (settings, model folders, the download queue) when they are
damaged: read one, say what is wrong with it in the user's words, and set it aside.

A damaged file is never guessed at and never silently overwritten: it is renamed to
`<name>.bak-<time>` beside itself (kept for the user or a bug report), and the app goes on with
defaults. app/damaged_files.py runs this once at every start, GUI and CLI alike, so later
readers find a good file or none.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


class Damage(enum.Enum):
    """What is wrong with a state file, as the notice says it."""

    UNREADABLE = "unreadable"  # not text, not JSON, not the shape the app writes, a folder
    CUT_SHORT = "cut short"  # JSON that ends early: a write that never finished
    NEWER = "from a newer version of KV Studio"
    WRONG_VALUES = "holding values of the wrong type"


@dataclass(frozen=True)
class StateRead:
    """A state file's contents (None when missing or damaged) and what is wrong with it."""

    value: object
    damage: Damage | None


def read_json_state(path: Path, newest_version: int) -> StateRead:
    """Read `path` as a JSON object written by this app (`version` at most `newest_version`).
    A missing file is StateRead(None, None); the file itself is left where it is."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return StateRead(None, None)
    except OSError:  # a folder in its place, no permission
        return StateRead(None, Damage.UNREADABLE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return StateRead(None, Damage.UNREADABLE)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        # Truncated JSON fails at its very end; random bytes fail where they start.
        ended_early = text.strip() != "" and error.pos >= len(text.rstrip())
        return StateRead(None, Damage.CUT_SHORT if ended_early else Damage.UNREADABLE)
    if isinstance(value, list):
        return StateRead(value, None)  # an older release's bare list (model folders)
    if not isinstance(value, dict):
        return StateRead(None, Damage.UNREADABLE)
    version = value.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return StateRead(None, Damage.UNREADABLE)
    if version > newest_version:
        return StateRead(None, Damage.NEWER)
    return StateRead(value, None)


def set_aside(path: Path) -> Path:
    """Rename a damaged file (or folder) to `<name>.bak-<time>` beside it; returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while backup.exists() or backup.is_symlink():
        n += 1
        backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    os.replace(path, backup)
    return backup


def damage_notice(what: str, damage: Damage, backup: Path, outcome: str) -> str:
    """One sentence: 'Your settings file was unreadable; it was kept as X and the defaults are
    used.' `what`: the file in the user's words; `outcome`: what the app does instead."""
    return f"Your {what} file was {damage.value}; it was kept as {backup.name} and {outcome}."


@dataclass(frozen=True)
class StateFile:
    """One of the app's JSON state files, declared by the package that writes it."""

    name: str  # in the data folder
    version: int  # the newest version this app writes
    what: str  # the file in the user's words: "model folders"
    outcome: str  # what the app does without it: "no extra folders are listed"


def set_aside_damaged(folder: Path, files: Iterable[StateFile]) -> list[str]:
    """Set aside each of `files` in the data folder `folder` that is damaged; one notice each."""
    notices = []
    for file in files:
        path = folder / file.name
        read = read_json_state(path, file.version)
        if read.damage is not None:
            backup = set_aside(path)
            notices.append(damage_notice(file.what, read.damage, backup, file.outcome))
            log.info("%s set aside as %s (%s)", path, backup, read.damage.value)
    return notices
