"""One list of model folders for the whole app: a folder added on My models is a folder of
the Chat picker and of `kvstudio ls` too, and the GUI and the CLI read the same data folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import QFileDialog

from tests.gguf_factory import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[2]
WAIT = HANG_GUARD_MS


def _models_page(window):
    from app.ui.models.page import ModelsPage

    pages = [window.pages.widget(i) for i in range(window.pages.count())]
    return next(p for p in pages if isinstance(p, ModelsPage))


@pytest.mark.slow
def test_a_folder_added_on_my_models_is_in_the_chat_picker_and_kvstudio_ls(
    qtbot, chat_app, tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "my-models"
    folder.mkdir()
    model = write_tiny_gguf(folder / "mine-Q8_0.gguf", seed=7)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))

    library = _models_page(chat_app.window).library_view
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(folder))
    library.add_folder_button.click()
    qtbot.waitUntil(lambda: library.select_path(str(model)), timeout=WAIT)

    picker = chat_app.window.chat.picker
    picker.menu().aboutToShow.emit()
    assert "mine-Q8_0" in [action.text() for action in picker.menu().actions()]

    listed = subprocess.run(
        [sys.executable, "-m", "app", "ls", "--json"],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert str(model) in [m["path"] for m in json.loads(listed.stdout)]


def test_the_cli_and_the_gui_share_one_data_folder(qtbot, tmp_path, monkeypatch) -> None:
    """Without KVSTUDIO_DATA_DIR the CLI's data folder is the one Qt gives the GUI."""
    from PySide6.QtCore import QCoreApplication, QStandardPaths

    from app.platform.paths import APP_NAME, ORGANIZATION, data_dir

    monkeypatch.delenv("KVSTUDIO_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    app = QCoreApplication.instance()
    names = app.applicationName(), app.organizationName()
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(ORGANIZATION)
    try:
        qt = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    finally:
        app.setApplicationName(names[0])
        app.setOrganizationName(names[1])
    assert data_dir() == Path(qt)
