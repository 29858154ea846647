"""Damaged settings, model folders and download queue files: each kind is set aside with a notice
that names it, the app goes on with defaults (or only the bad fields reset), and every CLI command
starts. Before: random bytes in settings.json were called "from another version", wrongly typed
GPU layers / threads / last model were kept, and a damaged model folders or download queue file
was silently overwritten by the next save, losing the user's list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.damaged_files import check_state_files
from app.models.model_folders import ModelFolders
from app.state.settings import Settings, load_settings
from tests.cli_runner import kvstudio

AREA = "State files"
GOOD = {"version": 1, "n_ctx": 2048, "type_k": "f16", "n_threads": 4, "n_gpu_layers": 10}


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(512))


def _cut_short(path: Path) -> None:
    text = json.dumps(GOOD, indent=2)
    path.write_text(text[: len(text) // 2], encoding="utf-8")


def _newer(path: Path) -> None:
    path.write_text(json.dumps({**GOOD, "version": 2}), encoding="utf-8")


def _folder(path: Path) -> None:
    path.mkdir()


def _not_an_object(path: Path) -> None:
    path.write_text('"n_ctx=2048"', encoding="utf-8")


KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "random bytes": (_random_bytes, "was unreadable"),
    "cut short": (_cut_short, "was cut short"),
    "from a newer version": (_newer, "was from a newer version of KV Studio"),
    "a folder in its place": (_folder, "was unreadable"),
    "JSON but not an object": (_not_an_object, "was unreadable"),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_damaged_settings_file_is_set_aside_and_named(
    tmp_path: Path, kind: str, reliability
) -> None:
    damage, words = KINDS[kind]
    damage(tmp_path / "settings.json")
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings()
    (backup,) = tmp_path.glob("settings.json.bak-*")
    assert loaded.notice == (
        f"Your settings file {words}; it was kept as {backup.name} and the defaults are used."
    )
    assert "another version" not in loaded.notice
    assert not (tmp_path / "settings.json").exists()
    reliability.record(AREA, f"settings.json {kind}", f"set aside, notice says '{words}'")


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("n_gpu_layers", "all", "GPU layers"),
        ("n_gpu_layers", 2.5, "GPU layers"),
        ("n_gpu_layers", -7, "GPU layers"),
        ("n_threads", -4, "threads"),
        ("n_threads", True, "threads"),
        ("n_threads", "8", "threads"),
        ("last_model", 7, "last model"),
        ("last_model", "", "last model"),
        ("recent_models", "a.gguf", "recent models"),
        ("n_ctx", 0, "context length"),
        ("type_k", "q9_9", "K cache type"),
    ],
)
def test_a_wrongly_typed_setting_alone_is_reset(
    tmp_path: Path, field: str, value: object, label: str, reliability
) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({**GOOD, field: value}), encoding="utf-8")
    loaded = load_settings(tmp_path)
    assert getattr(loaded.settings, field) == getattr(Settings(), field)
    kept = {k: v for k, v in GOOD.items() if k != field}
    assert {k: getattr(loaded.settings, k) for k in kept} == kept  # the good ones stay
    (backup,) = tmp_path.glob("settings.json.bak-*")
    assert loaded.notice == (
        f"Your settings file held a wrong value for {label}; that was reset to the default "
        f"and the old file was kept as {backup.name}."
    )
    assert json.loads(backup.read_text(encoding="utf-8"))[field] == value
    again = load_settings(tmp_path)  # the repaired file was written: no notice next time
    assert again.notice is None and again.settings == loaded.settings
    reliability.record(AREA, f"settings {field} = {value!r}", f"{label} reset, the rest kept")


def test_several_wrong_settings_are_named_together(tmp_path: Path) -> None:
    bad = {**GOOD, "n_gpu_layers": "max", "n_threads": 0, "last_model": ["x"]}
    (tmp_path / "settings.json").write_text(json.dumps(bad), encoding="utf-8")
    notice = load_settings(tmp_path).notice
    assert notice is not None
    assert notice.startswith(
        "Your settings file held a wrong value for threads, GPU layers, last model; those were"
    )


def test_a_damaged_model_folders_file_is_kept_not_overwritten(tmp_path: Path) -> None:
    folders = ModelFolders(tmp_path)
    (tmp_path / "model_folders.json").write_text('{"version": 1, "folders": ["/mine"', "utf-8")
    assert folders.read().folders == ()
    (backup,) = tmp_path.glob("model_folders.json.bak-*")
    folders.add_folder(tmp_path / "new")
    assert backup.read_text(encoding="utf-8").startswith('{"version": 1, "folders": ["/mine"')
    assert folders.read().folders == ((tmp_path / "new").resolve(),)


def test_check_state_files_names_each_damaged_file(tmp_path: Path) -> None:
    _random_bytes(tmp_path / "settings.json")
    _cut_short(tmp_path / "model_folders.json")
    _newer(tmp_path / "downloads.json")
    notices = check_state_files(tmp_path)
    assert [n.split(";")[0] for n in notices] == [
        "Your settings file was unreadable",
        "Your model folders file was cut short",
        "Your download queue file was from a newer version of KV Studio",
    ]
    assert check_state_files(tmp_path) == []  # set aside once, then nothing to say


def test_every_cli_command_starts_with_damaged_state_files(tmp_path: Path, reliability) -> None:
    _random_bytes(tmp_path / "settings.json")
    _cut_short(tmp_path / "model_folders.json")
    _newer(tmp_path / "downloads.json")
    result = kvstudio("ls", env={"KVSTUDIO_DATA_DIR": str(tmp_path)}, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result
    lines = result.stderr.strip().splitlines()
    assert [line.split(";")[0] for line in lines] == [
        "kvstudio: Your settings file was unreadable",
        "kvstudio: Your model folders file was cut short",
        "kvstudio: Your download queue file was from a newer version of KV Studio",
    ]
    assert len(list(tmp_path.glob("*.bak-*"))) == 3
    reliability.record(
        AREA,
        "kvstudio ls with settings, model folders and download queue damaged",
        "ran (exit 0), one stderr line per file, all three kept aside",
    )
