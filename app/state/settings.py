"""One typed, versioned settings object, stored as JSON in the data folder.

A file that cannot be used is not guessed at. Unreadable, cut short or from a newer version: it is
set aside as settings.json.bak-<time> and the defaults are used. Readable but with values of the
wrong type or out of range (GPU layers, threads, last model...): those fields alone are reset,
the original is kept the same way, and the repaired file is written. Either way the notice says
which it was.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.kv.kv_types import DEFAULT_KV_MODE, KV_TYPE_NAMES, KvMode
from app.platform.atomic_write import write_atomically
from app.platform.paths import settings_path
from app.platform.state_files import Damage, damage_notice, read_json_state, set_aside

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1
MAX_RECENT_MODELS = 10
MAX_THREADS = 4096
MAX_CONTEXT = 1 << 24  # far above any model's trained context; a bigger number is a typo
MAX_PATH_CHARS = 4096
# The context length a load uses unless the user chose another, and the one the Models page
# estimates fit for: one number, so both say the same about a model.
DEFAULT_CONTEXT = 8192
THEMES = ("light", "dark", "system")  # "system": follow the system's light or dark scheme


@dataclass(frozen=True)
class Settings:
    version: int = SETTINGS_VERSION
    # The default KV mode's two type names, as settings.json keeps them (kv_mode: the mode).
    type_k: str = DEFAULT_KV_MODE.k.name
    type_v: str = DEFAULT_KV_MODE.v.name
    n_ctx: int = DEFAULT_CONTEXT
    n_threads: int | None = None  # None: llama.cpp chooses
    n_gpu_layers: int = -1  # -1: all layers on the GPU when there is one
    last_model: str | None = None  # a path, or "starter"
    recent_models: tuple[str, ...] = field(default_factory=tuple)
    backend: str = "built-in"  # app.backends.store: the llama.cpp build the engine runs
    first_run_done: bool = False  # the first-run backend dialog (app/ui/first_run.py) was shown
    theme: str = "light"  # "light", "dark" or "system" (follow the system): app/ui/theme.py

    @property
    def kv_mode(self) -> KvMode:
        return KvMode.of(self.type_k, self.type_v)

    def with_recent_model(self, path: str) -> Settings:
        """A copy with `path` as the last model, first in the recent list."""
        recent = (path,) + tuple(p for p in self.recent_models if p != path)
        return replace(self, last_model=path, recent_models=recent[:MAX_RECENT_MODELS])


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    notice: str | None  # a sentence for the user when the file had to be reset or repaired


def _is_int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_path(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_PATH_CHARS and "\x00" not in value


def _is_path_list(value: object) -> bool:
    return isinstance(value, list) and len(value) <= MAX_RECENT_MODELS and all(map(_is_path, value))


# Each field the file may hold: its name in the user's words, and what a good value is.
_CHECKS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "type_k": ("K cache type", lambda v: v in KV_TYPE_NAMES),
    "type_v": ("V cache type", lambda v: v in KV_TYPE_NAMES),
    "n_ctx": ("context length", lambda v: _is_int(v, 1, MAX_CONTEXT)),
    "n_threads": ("threads", lambda v: v is None or _is_int(v, 1, MAX_THREADS)),
    "n_gpu_layers": ("GPU layers", lambda v: _is_int(v, -1, 1 << 20)),
    "last_model": ("last model", lambda v: v is None or _is_path(v)),
    "recent_models": ("recent models", _is_path_list),
    "backend": ("backend", lambda v: isinstance(v, str) and 0 < len(v) <= 200),
    "first_run_done": ("first-run flag", lambda v: isinstance(v, bool)),
    "theme": ("theme", lambda v: v in THEMES),
}


def _checked(raw: Mapping[str, object]) -> tuple[Settings, list[str]]:
    """The settings in `raw`, each bad field reset to its default; and the bad fields' names."""
    values: dict[str, Any] = {}  # each checked against its field by _CHECKS
    bad = []
    for f in fields(Settings):
        if f.name == "version" or f.name not in raw:
            continue
        label, good = _CHECKS[f.name]
        if good(raw[f.name]):
            values[f.name] = raw[f.name]
        else:
            bad.append(label)
    if "recent_models" in values:
        values["recent_models"] = tuple(values["recent_models"])
    return Settings(**values), bad


def load_settings(folder: Path) -> LoadedSettings:
    """Read settings.json from `folder`; defaults when it is missing. A damaged file is set aside
    (and a repaired one written) with a notice; this never raises for what the file holds."""
    path = settings_path(folder)
    read = read_json_state(path, SETTINGS_VERSION)
    if read.damage is None and read.value is None:
        return LoadedSettings(Settings(), None)
    if read.damage is None and isinstance(read.value, dict):
        settings, bad = _checked(read.value)
        if not bad:
            return LoadedSettings(settings, None)
        backup = set_aside(path)
        save_settings(folder, settings)
        log.info("settings: reset %s; the old file is kept as %s", ", ".join(bad), backup)
        return LoadedSettings(
            settings,
            f"Your settings file held a wrong value for {', '.join(bad)}; "
            f"{'that was' if len(bad) == 1 else 'those were'} reset to the default and the "
            f"old file was kept as {backup.name}.",
        )
    damage = read.damage or Damage.UNREADABLE  # a bare list is no settings file
    backup = set_aside(path)
    log.info("settings reset (the file was %s); old file kept as %s", damage.value, backup)
    return LoadedSettings(
        Settings(), damage_notice("settings", damage, backup, "the defaults are used")
    )


def save_settings(folder: Path, settings: Settings) -> None:
    """Write atomically so a crash never leaves half a file; readable by the user alone (it
    names the user's models and folders)."""
    data = asdict(settings)
    data["recent_models"] = list(settings.recent_models)
    write_atomically(settings_path(folder), json.dumps(data, indent=2), mode=0o600)


class SettingsFile:
    """The settings of one data folder: read once, every change written at once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        loaded = load_settings(folder)
        self.settings = loaded.settings
        self.notice = loaded.notice

    def update(self, **changes: object) -> Settings:
        # The keys are Settings' fields; replace() refuses any other at run time.
        self.settings = replace(self.settings, **changes)  # type: ignore[arg-type]
        save_settings(self.folder, self.settings)
        return self.settings

    def remember_model(self, ref: str) -> Settings:
        self.settings = self.settings.with_recent_model(ref)
        save_settings(self.folder, self.settings)
        return self.settings
