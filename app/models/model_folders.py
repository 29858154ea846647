"""The folders the library looks in besides the Hugging Face cache, and where downloads go.

One file in the app's data folder, read by the library, the GUI (My models, the Chat picker)
and the CLI (`kvstudio ls`, `pull --folder`) alike:

    model_folders.json  {"version": 1, "folders": [...], "download_folders": [...],
                         "download_to": "/path" or null}

`folders` are the user's own (files listed as they lie); `download_folders` hold
<folder>/owner/name/<file> as the app writes them, so their models keep their repo id;
`download_to` is where the Models page sends the next download (null: the HF cache).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from app.platform.atomic_write import write_atomically
from app.platform.paths import data_dir
from app.platform.state_files import StateFile, damage_notice, read_json_state, set_aside

log = logging.getLogger(__name__)

FOLDERS_STATE_FILE = StateFile(
    "model_folders.json", 1, "model folders", "no extra folders are listed"
)
FILE_NAME = FOLDERS_STATE_FILE.name
VERSION = FOLDERS_STATE_FILE.version
# Older releases kept these three lists apart (two of them in the GUI's folder only).
_LEGACY_DOWNLOAD_FOLDERS = "library_folders.json"
_LEGACY_DOWNLOAD_TO = "download_folder.json"
J = TypeVar("J", list[object], dict[str, object])  # what a JSON file holds, unchecked
_lock = threading.Lock()  # one writer at a time in this process; the file is replaced atomically


@dataclass(frozen=True)
class FolderChoices:
    folders: tuple[Path, ...] = ()
    download_folders: tuple[Path, ...] = ()
    download_to: Path | None = None


class ModelFolders:
    """The model folders kept in `data_folder` (the app's: `ModelFolders.of_app()`)."""

    def __init__(self, data_folder: Path) -> None:
        self.data_folder = Path(data_folder)
        self.path = self.data_folder / FILE_NAME

    @classmethod
    def of_app(cls) -> ModelFolders:
        return cls(data_dir())

    def read(self) -> FolderChoices:
        read = read_json_state(self.path, VERSION)
        if read.damage is not None:
            # Set aside, not overwritten by the next change: the user's folder list is in it.
            with contextlib.suppress(OSError):
                backup = set_aside(self.path)
                log.warning(
                    "%s", damage_notice("model folders", read.damage, backup, "none are listed")
                )
            return FolderChoices()
        raw = read.value
        if raw is None:
            return self._legacy([])
        if isinstance(raw, list):  # an older release's list of the user's folders
            return self._legacy(raw)
        if not isinstance(raw, dict):
            return FolderChoices()
        to = raw.get("download_to")
        return FolderChoices(
            _paths(raw.get("folders")),
            _paths(raw.get("download_folders")),
            Path(to) if isinstance(to, str) else None,
        )

    def add_folder(self, folder: Path) -> None:
        """A folder of the user's own GGUF files."""
        self._change(lambda c, f: replace(c, folders=_with(c.folders, f)), folder)

    def remove_folder(self, folder: Path) -> None:
        """Stop listing `folder` (the user's or a download folder); no file in it is touched.
        Were downloads going there, they go to the Hugging Face cache from now on."""

        def remove(c: FolderChoices, f: Path | None) -> FolderChoices:
            return FolderChoices(
                tuple(p for p in c.folders if p not in (f, folder)),
                tuple(p for p in c.download_folders if p not in (f, folder)),
                None if c.download_to in (f, folder) else c.download_to,
            )

        self._change(remove, folder)

    def add_download_folder(self, folder: Path) -> None:
        """A folder a download went to (<folder>/owner/name/<file>)."""
        self._change(lambda c, f: replace(c, download_folders=_with(c.download_folders, f)), folder)

    def choose_download_folder(self, folder: Path | None) -> None:
        """Where the Models page sends downloads from now on (None: the HF cache)."""

        def choose(c: FolderChoices, f: Path | None) -> FolderChoices:
            return replace(
                c,
                download_to=f,
                download_folders=_with(c.download_folders, f) if f else c.download_folders,
            )

        self._change(choose, folder)

    def _change(
        self, change: Callable[[FolderChoices, Path | None], FolderChoices], folder: Path | None
    ) -> None:
        resolved = Path(folder).expanduser().resolve() if folder is not None else None
        with _lock:
            choices = change(self.read(), resolved)
            data = {
                "version": VERSION,
                "folders": [str(p) for p in choices.folders],
                "download_folders": [str(p) for p in choices.download_folders],
                "download_to": str(choices.download_to) if choices.download_to else None,
            }
            self.data_folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, json.dumps(data, indent=1))

    def _legacy(self, user_folders: list[object]) -> FolderChoices:
        """What older releases kept: the user's folders (GUI), download folders (CLI, in
        ~/.local/share/kvstudio then) and the download destination (GUI)."""
        downloads: list[object] = []
        for place in (self.data_folder, Path.home() / ".local" / "share" / "kvstudio"):
            downloads += _read_json(place / _LEGACY_DOWNLOAD_FOLDERS, [])
        to = _read_json(self.data_folder / _LEGACY_DOWNLOAD_TO, {}).get("folder")
        return FolderChoices(
            _paths(user_folders), _paths(downloads), Path(to) if isinstance(to, str) else None
        )


def _read_json(path: Path, default: J) -> J:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default


def _paths(raw: object) -> tuple[Path, ...]:
    items = raw if isinstance(raw, list) else []
    return tuple(dict.fromkeys(Path(p) for p in items if isinstance(p, str)))


def _with(paths: tuple[Path, ...], folder: Path | None) -> tuple[Path, ...]:
    return paths if folder is None or folder in paths else (*paths, folder)
