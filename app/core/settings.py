"""One typed, versioned settings object, stored as JSON in the data folder.

A file from a newer (or unknown) version of the app is not guessed at: it is copied
aside as settings.json.bak-<time> and the defaults are used, with a notice for the user.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.core.kv_types import KV_TYPES
from app.core.paths import settings_path

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1
MAX_RECENT_MODELS = 10


@dataclass(frozen=True)
class Settings:
    version: int = SETTINGS_VERSION
    type_k: str = "q8_0"  # default KV mode: int8 K, fp16 V
    type_v: str = "f16"
    n_ctx: int = 4096
    n_threads: int | None = None  # None: llama.cpp chooses
    n_gpu_layers: int = -1  # -1: all layers on the GPU when there is one
    last_model: str | None = None  # a path, or "starter"
    recent_models: tuple[str, ...] = field(default_factory=tuple)
    backend: str = "built-in"  # app.core.backends: the llama.cpp build the engine runs
    first_run_done: bool = False  # the first-run backend dialog (app/ui/first_run.py) was shown

    def with_recent_model(self, path: str) -> Settings:
        """A copy with `path` as the last model, first in the recent list."""
        recent = (path,) + tuple(p for p in self.recent_models if p != path)
        return replace(self, last_model=path, recent_models=recent[:MAX_RECENT_MODELS])


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    notice: str | None  # a sentence for the user when the file had to be reset


def _validated(raw: dict[str, Any]) -> Settings:
    known = {f.name for f in fields(Settings)}
    values = {k: v for k, v in raw.items() if k in known}
    if "recent_models" in values:
        values["recent_models"] = tuple(str(p) for p in values["recent_models"])
    settings = Settings(**values)
    if settings.type_k not in KV_TYPES or settings.type_v not in KV_TYPES:
        raise ValueError(f"unknown KV types {settings.type_k}/{settings.type_v}")
    if not isinstance(settings.n_ctx, int) or settings.n_ctx <= 0:
        raise ValueError(f"bad n_ctx {settings.n_ctx!r}")
    if not isinstance(settings.backend, str) or not settings.backend:
        raise ValueError(f"bad backend {settings.backend!r}")
    if not isinstance(settings.first_run_done, bool):
        raise ValueError(f"bad first_run_done {settings.first_run_done!r}")
    return settings


def load_settings(folder: Path) -> LoadedSettings:
    """Read settings.json from `folder`; defaults when it is missing."""
    path = settings_path(folder)
    if not path.exists():
        return LoadedSettings(Settings(), None)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("version") != SETTINGS_VERSION:
            version = raw.get("version") if isinstance(raw, dict) else None
            raise ValueError(f"settings version {version!r}, this app reads {SETTINGS_VERSION}")
        return LoadedSettings(_validated(raw), None)
    except (ValueError, TypeError, OSError) as error:
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, backup)
        log.warning("settings reset (%s); old file kept as %s", error, backup)
        return LoadedSettings(
            Settings(),
            f"Your settings were from another version of KV Studio; they were reset "
            f"and the old file was kept as {backup.name}.",
        )


def save_settings(folder: Path, settings: Settings) -> None:
    """Write atomically (temp file + rename) so a crash never leaves half a file."""
    path = settings_path(folder)
    tmp = path.with_name(path.name + ".tmp")
    data = asdict(settings)
    data["recent_models"] = list(settings.recent_models)
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)


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
