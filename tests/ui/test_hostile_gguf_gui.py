"""The nastiest 100 hostile GGUFs through the GUI's open paths: the chat page's load (what the
model picker and Open GGUF file… call) refuses each with its one-line reason and never sends a
load to the engine; the library view lists a folder holding them with the good model beside
them, each bad one with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from tests.gguf_factory import write_tiny_gguf
from tests.hostile_gguf import Case, corpus, nastiest
from tests.waits import HANG_GUARD_MS

AREA = "Hostile GGUF files"


@pytest.fixture(scope="module")
def nasty_files(tmp_path_factory) -> list[tuple[Case, Path]]:
    folder = tmp_path_factory.mktemp("nasty")
    out = []
    for i, case in enumerate(nastiest(corpus(tmp_path_factory.mktemp("bases")))):
        path = folder / f"nasty-{i:03d}.gguf"
        path.write_bytes(case.data)
        out.append((case, path))
    return out


@pytest.mark.slow
def test_chat_page_refuses_each_before_the_engine(qtbot, chat_app, nasty_files, reliability):
    page = chat_app.window.chat
    started: list[object] = []
    chat_app.engine.loading_started.connect(started.append)
    errors: list[str] = []
    chat_app.bridge.error_reported.connect(errors.append)
    for case, path in nasty_files:
        with qtbot.waitSignal(page.model_resolve_failed, timeout=HANG_GUARD_MS) as blocker:
            page.load_model(str(path))  # what the load dialog's Load and My models' Load do
        message = blocker.args[0]
        assert message.startswith("Could not open the model: "), (case.name, message)
        assert "GGUF" in message and "\n" not in message, (case.name, message)
        box = chat_app.window.last_error_box
        if box is not None:
            box.accept()
    assert started == [] and chat_app.engine.last_options is None  # nothing reached llama.cpp
    assert len(errors) == len(nasty_files) and chat_app.window.isVisible()
    assert page.status.model_label.text() == "No model loaded"
    reliability.record(
        AREA,
        "GUI: the nastiest 100 opened from the chat page's model picker",
        "100 refused with their one-line reason; 0 loads sent to the engine",
    )


def test_library_view_lists_them_beside_a_good_model(qtbot, nasty_files, tmp_path, reliability):
    from app.models.library import list_models
    from app.models.model_folders import ModelFolders
    from app.services.tasks import TaskRunner
    from app.ui.models.library_view import LibraryView

    folder = tmp_path / "models"
    folder.mkdir()
    good = write_tiny_gguf(folder / "good-model.gguf", n_layer=2)
    for _case, path in nasty_files:
        (folder / path.name).write_bytes(path.read_bytes())

    def listing():
        return list_models(
            [folder],
            folders=ModelFolders(tmp_path / "data"),
            cache_dir=tmp_path / "hf",
            include_starter=False,
        )

    runner = TaskRunner()
    view = LibraryView(listing, lambda _m: None, lambda _p: None, runner)
    qtbot.addWidget(view)
    view.refresh()
    qtbot.waitUntil(lambda: view.model.rowCount() == 101, timeout=HANG_GUARD_MS)
    assert view.status_label.text() == "101 models."
    rows = view.model.rows()
    good_row = next(m for m in rows if m.path == good)
    assert good_row.error is None and good_row.architecture == "llama"
    for row, m in enumerate(rows):
        if m.path == good:
            continue
        tooltip = view.model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
        shown = QTextDocument()
        shown.setHtml(tooltip)  # tooltips are rich text: the view escapes what it puts in them
        assert m.error and "\n" not in m.error, m.path
        assert shown.toPlainText().endswith(m.error), m.path
    runner.wait()
    reliability.record(
        AREA,
        "GUI: a library folder holding the nastiest 100 and one good model",
        "101 rows; the good model listed with its facts, each bad one with its reason",
    )
