"""Where KV Studio keeps its files (conversations, settings, model folders, the download queue).

One data folder for the GUI and the CLI: the folder Qt's QStandardPaths.AppDataLocation
names for this app, worked out here without Qt (nothing below app/services imports it), so a folder
added in the window is one `kvstudio ls` lists too. KVSTUDIO_DATA_DIR points everything
elsewhere (tests, scripts).

Beside it a cache folder (Qt's CacheLocation) for what the app can work out again, so deleting
it costs only time: KVSTUDIO_CACHE_DIR, else a `cache` folder inside KVSTUDIO_DATA_DIR when that
is set (a script's data stays in one place), else the platform's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA_DIR_ENV = "KVSTUDIO_DATA_DIR"
CACHE_DIR_ENV = "KVSTUDIO_CACHE_DIR"
ORGANIZATION = "KVStudio"  # what the GUI gives QApplication; Qt's folder names come from them
APP_NAME = "KV Studio"


def default_data_dir() -> Path:
    """QStandardPaths.AppDataLocation for this organization and app name, per platform."""
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / ORGANIZATION / APP_NAME


def data_dir() -> Path:
    """The data folder, created if missing: $KVSTUDIO_DATA_DIR, else default_data_dir()."""
    chosen = os.environ.get(DATA_DIR_ENV)
    path = Path(chosen) if chosen else default_data_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_cache_dir() -> Path:
    """QStandardPaths.CacheLocation for this organization and app name, per platform."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / ORGANIZATION / APP_NAME / "cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / ORGANIZATION / APP_NAME
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / ORGANIZATION / APP_NAME


def cache_dir() -> Path:
    """The cache folder (not created here: its readers and writers treat a missing one as
    empty): $KVSTUDIO_CACHE_DIR, else $KVSTUDIO_DATA_DIR/cache, else default_cache_dir()."""
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return Path(chosen)
    data = os.environ.get(DATA_DIR_ENV)
    return Path(data) / "cache" if data else default_cache_dir()


def chat_db_path(folder: Path) -> Path:
    return folder / "conversations.sqlite3"


def settings_path(folder: Path) -> Path:
    return folder / "settings.json"
