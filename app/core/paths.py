"""Where KV Studio keeps its files (conversations, settings).

app/core never imports Qt, so the GUI resolves QStandardPaths.AppDataLocation and
passes it in; tests and scripts point everything elsewhere with KVSTUDIO_DATA_DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "KVSTUDIO_DATA_DIR"


def data_dir(default: str | Path | None = None) -> Path:
    """The data folder, created if missing.

    Order: $KVSTUDIO_DATA_DIR, then `default` (the GUI passes QStandardPaths'
    AppDataLocation), then ~/.local/share/kvstudio.
    """
    chosen = os.environ.get(DATA_DIR_ENV) or default
    path = Path(chosen) if chosen else Path.home() / ".local" / "share" / "kvstudio"
    path.mkdir(parents=True, exist_ok=True)
    return path


def chat_db_path(folder: Path) -> Path:
    return folder / "conversations.sqlite3"


def settings_path(folder: Path) -> Path:
    return folder / "settings.json"
