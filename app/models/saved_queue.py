"""The download queue's file: the unfinished downloads, written atomically after every change
so a restart (after a quit or a kill) continues them, and read back. A damaged file is set
aside rather than overwritten by the next save: the user may want it back."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from app.models.hub import GgufEntry
from app.models.queue_file import QUEUE_STATE_FILE
from app.platform.atomic_write import write_atomically
from app.platform.state_files import Damage, damage_notice, read_json_state, set_aside

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedDownload:
    """One unfinished download as the file keeps it."""

    entry: GgufEntry
    folder: Path | None  # None: the Hugging Face cache
    resume: bool  # it was running (or waiting to): it continues at the next start


def save_queue(state_file: Path, downloads: list[SavedDownload]) -> None:
    """Write the downloads (atomically); a failure is logged, the queue goes on."""
    records = [
        {
            "entry": saved.entry.to_json(),
            "folder": str(saved.folder) if saved.folder else None,
            "resume": saved.resume,
        }
        for saved in downloads
    ]
    try:
        state_file.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(
            state_file,
            json.dumps({"version": QUEUE_STATE_FILE.version, "downloads": records}, indent=1),
        )
    except OSError:
        log.warning("could not save the download queue to %s", state_file, exc_info=True)


def read_saved_queue(state_file: Path) -> list[SavedDownload] | None:
    """The downloads saved in `state_file` (a record that cannot be read is skipped), or None
    when there is no file or it is damaged (then set aside, and the queue starts empty)."""
    if not state_file.exists():
        return None
    read = read_json_state(state_file, QUEUE_STATE_FILE.version)
    saved = read.value.get("downloads") if isinstance(read.value, dict) else None
    if read.damage is not None or not isinstance(saved, list):
        damage = read.damage or Damage.UNREADABLE
        try:
            backup = set_aside(state_file)
        except OSError:
            log.warning("download queue %s is %s; starting empty", state_file, damage.value)
            return None
        log.warning("%s", damage_notice("download queue", damage, backup, "the queue starts empty"))
        return None
    downloads = []
    for record in saved:
        download = _saved_download(record)
        if download is None:
            log.warning("skipping an unreadable saved download: %r", record)
        else:
            downloads.append(download)
    return downloads


def _saved_download(record: object) -> SavedDownload | None:
    if not isinstance(record, dict):
        return None
    try:
        entry = GgufEntry.from_json(record["entry"])
        folder = Path(record["folder"]) if record.get("folder") else None
    except (KeyError, TypeError, ValueError):
        return None
    return SavedDownload(entry, folder, bool(record.get("resume")))
