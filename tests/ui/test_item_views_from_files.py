"""Item views showing a file's or the Hub's words show them cleaned, cut and literal: the
search results (repo ids), a repo's file tree, the download queue, My models, the chat model
picker's menu and the Backends page (a package's manifest). A name carrying escape codes, a
bidi override, `<b>`/`<img>` markup or 300 KB reaches no cell, menu entry or tooltip as such.

Before, each view drew what it was given: the escapes and override in the cell, a 300 KB
name in one row, and tooltips (which read rich text) rendered `<b>` bold and loaded `<img>`."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt

from app.backends.manifest import MANIFEST_NAME
from app.platform.probes import FreeMemory
from app.services.downloads import DownloadState
from tests.backends.package_edits import copy_package, repack, sign
from tests.gguf_factory import write_tiny_gguf
from tests.hostile_text import HOSTILE, HTML, LONG, assert_clean
from tests.waits import HANG_GUARD_MS

AREA = "Templates and text from files"
DISPLAY, TIP = Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole
SHOWN = "<b>bold<img src=x.png>?]0;pwned??[2J?[31m?evil?1m"  # HOSTILE, cleaned
WAIT = HANG_GUARD_MS


def _cells(model, role, column: int | None = None) -> list[str]:
    """Every string `model` gives its view for `role` (all columns, or one), tree rows too."""
    out: list[str] = []

    def walk(parent) -> None:
        for row in range(model.rowCount(parent)):
            for col in range(model.columnCount(parent)):
                index = model.index(row, col, parent)
                value = model.data(index, role)
                if isinstance(value, str) and (column is None or col == column):
                    out.append(value)
                if col == 0:
                    walk(index)

    from PySide6.QtCore import QModelIndex

    walk(QModelIndex())
    return out


def _assert_tooltips_literal(tips: list[str]) -> None:
    for tip in tips:
        assert_clean(tip, max_lines=40, max_chars=2100)
        assert "<b>bold" not in tip and "<img" not in tip  # escaped, so shown as written


def _wait_idle(qtbot, runner) -> None:
    if runner.is_busy():
        with qtbot.waitSignal(
            runner.busy_changed, timeout=WAIT, check_params_cb=lambda busy: not busy
        ):
            pass


def test_search_tree_downloads_and_my_models_show_hub_names_cleaned(
    qtbot, hub_env, tmp_path, reliability
):
    from app.ui.models.page import ModelsPage

    tiny = write_tiny_gguf(tmp_path / "t.gguf", n_layer=2)
    other = write_tiny_gguf(tmp_path / "u.gguf", n_layer=2, seed=7)
    repo = "acme/tiny"
    hub_env.add_repo(repo, {f"{HOSTILE}-Q8_0.gguf": tiny, f"{LONG}-Q4_0.gguf": other}, downloads=10)
    hub_env.add_repo(f"{HOSTILE}/{HOSTILE}", {"a-Q8_0.gguf": tiny}, downloads=5)
    hub_env.add_repo(f"acme/{LONG}", {"b-Q8_0.gguf": tiny}, downloads=1)
    data = tmp_path / "kvstudio-data"
    budget = FreeMemory(8 << 30, "system RAM", "test", False)
    page = ModelsPage(data, budget_fn=lambda: budget)
    qtbot.addWidget(page)
    page.resize(1280, 760)
    page.show()

    page.search_view.search()  # the empty query: every GGUF repo
    _wait_idle(qtbot, page.runner)
    results = page.search_view.results
    assert results.rowCount() == 3
    names = _cells(results, DISPLAY)
    for cell in names:
        assert_clean(cell, max_lines=1, max_chars=300)
    assert SHOWN in names  # the name and the author column, literally
    assert any(c.endswith("…") and c.startswith("NNN") for c in names)
    _assert_tooltips_literal(_cells(results, TIP))

    page.repo_view.open_repo(repo)
    _wait_idle(qtbot, page.runner)  # the listing, then each file's header read and fit
    tree = page.repo_view.model
    files = _cells(tree, DISPLAY, column=0)
    for cell in files:
        assert_clean(cell, max_lines=1, max_chars=300)
    assert f"{SHOWN}-Q8_0" in files and any(c.startswith("NNN") for c in files)
    _assert_tooltips_literal(_cells(tree, TIP))

    page.repo_view.select_entry(f"{HOSTILE}-Q8_0.gguf")
    ended = (DownloadState.FINISHED, DownloadState.FAILED)
    with qtbot.waitSignal(
        page.downloads.download_changed,
        timeout=WAIT,
        check_params_cb=lambda key: page.downloads.item(key).state in ended,
    ):
        qtbot.mouseClick(page.repo_view.download_button, Qt.MouseButton.LeftButton)
    queue = page.downloads_view.model
    # refused (a name no file may have), and the refusal quoting it is cleaned too
    assert _cells(queue, DISPLAY, column=0) == [f"{SHOWN}-Q8_0.gguf"]
    for cell in _cells(queue, DISPLAY):
        assert_clean(cell, max_lines=1, max_chars=300)
    _assert_tooltips_literal(_cells(queue, TIP))
    page.grab().save(str(tmp_path / "models_page.png"))
    page.shutdown()
    reliability.record(
        AREA,
        "GUI: search results, repo file tree and download queue with hostile and 300 KB Hub names",
        "every cell one line of at most 300 characters; tooltips escaped",
    )


def test_my_models_and_the_model_picker_show_a_hostile_file_name_cleaned(
    qtbot, tmp_path, monkeypatch, reliability
):
    from app.models.library import list_models
    from app.state.settings import Settings
    from app.ui.chat.model_picker import ModelPicker
    from app.ui.models.library_view import LibraryTableModel

    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "models"
    folder.mkdir()
    path = write_tiny_gguf(folder / f"{HOSTILE}&co.gguf")
    write_tiny_gguf(folder / ("L" * 250 + ".gguf"))  # near the file system's 255-byte limit
    library = LibraryTableModel()
    library.set_rows(list_models(extra_dirs=[folder], include_starter=False))
    assert library.rowCount() == 2
    cells = _cells(library, DISPLAY)
    for cell in cells:
        assert_clean(cell, max_lines=1, max_chars=300)
    assert f"{SHOWN}&co" in cells
    _assert_tooltips_literal(_cells(library, TIP))

    picker = ModelPicker(replace(Settings(), recent_models=(str(path),)))
    qtbot.addWidget(picker)
    picker.menu().aboutToShow.emit()
    entries = [a.text() for a in picker.menu().actions() if a.text()]
    assert f"{SHOWN}&&co" in entries  # '&' doubled: shown, not taken for a shortcut
    for entry in entries:
        assert_clean(entry, max_lines=1, max_chars=200)
    picker.show_model(str(path))
    assert_clean(picker.text(), max_lines=1, max_chars=200)
    _assert_tooltips_literal([picker.toolTip()])
    reliability.record(
        AREA,
        "GUI: My models and the model picker's menu with a hostile file name",
        f"one line of {len(SHOWN) + 3} characters, markup shown as written, controls as '?'",
    )


@pytest.mark.slow
def test_the_backends_page_shows_a_hostile_manifest_cleaned(
    qtbot, store, cpu_package, tmp_path, reliability
):
    from app.engine.backend_probe import probe
    from app.ui.backends_page import BackendsPage

    folder = copy_package(cpu_package, tmp_path)
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    manifest["summary"] = HOSTILE + LONG
    manifest["build"]["note"] = HOSTILE
    manifest["gpu_targets"] = [HOSTILE]
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    sign(folder)  # a package signed as it is: only its text is hostile
    store.add(repack(folder, tmp_path / "hostile.tar.gz"), probe)  # checked and loaded: real
    shutil.rmtree(folder)

    page = BackendsPage(store)
    qtbot.addWidget(page)
    page.show()
    page.table.selectRow(1)
    cells = [page.table.item(1, c).text() for c in range(page.table.columnCount())]
    for cell in cells:
        assert_clean(cell, max_lines=1, max_chars=300)
    assert cells[2] == SHOWN and cells[5].startswith(SHOWN) and cells[5].endswith("…")
    details = page.details.toPlainText()
    assert_clean(details, max_lines=30, max_chars=300)
    assert f"Note: {SHOWN}" in details and HTML in details
    reliability.record(
        AREA,
        "GUI: Backends page with a manifest whose summary is 300 KB with escapes",
        f"{len(details.splitlines())} detail lines, longest {max(map(len, details.splitlines()))}",
    )
