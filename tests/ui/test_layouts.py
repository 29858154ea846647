"""The main pages fit the window from 1024x640 to 1920x1080 (issue 12, point 4): the real app
(build_app), a repo with long file names shown from the test Hub on the Models page, then each
page checked by tests/ui/layout_checks.py: the window takes the size, no widget is squeezed
below its minimum size hint, and the page's primary actions are on screen in full."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

from app.platform import units
from app.ui.dashboard.page import DashboardPage
from app.ui.models.page import ModelsPage
from app.ui.models.repo_files_model import ENTRY_ROLE, HEADERS, SIZE_COLUMN
from tests.ui.layout_checks import LARGE, SMALL, layout_problems, show_at
from tests.waits import HANG_GUARD_MS

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

WAIT = HANG_GUARD_MS
REPO = "bartowski/Meta-Llama-3.1-8B-Instruct-abliterated-GGUF"
# Long names, as such repos have them: the quantization is at the end of each.
FILES = (
    "Meta-Llama-3.1-8B-Instruct-abliterated-Q4_K_M.gguf",
    "Meta-Llama-3.1-8B-Instruct-abliterated-IQ4_XS.gguf",
    "Meta-Llama-3.1-8B-Instruct-abliterated-Q8_0.gguf",
)
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["1024x640", "1920x1080"])


@pytest.fixture
def styled_app(chat_app):
    """chat_app in the look `kvstudio gui` shows (its theme's stylesheet and palette: padding
    and fonts change what fits), put back afterwards for the other tests of this process."""
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import ThemeController

    app = QApplication.instance()
    style, palette = app.styleSheet(), app.palette()
    chat_app.window.findChild(ThemeController).apply()
    yield chat_app
    app.setStyleSheet(style)
    app.setPalette(palette)


@pytest.fixture
def app_with_repo(qtbot, hub_env, styled_app, tiny_gguf):
    """The app with a repo of long file names listed and fit-checked on the Models page."""
    hub_env.add_repo(
        REPO,
        {name: tiny_gguf(f"{i}.gguf", n_layer=2 + i, seed=i) for i, name in enumerate(FILES)},
    )
    window = styled_app.window
    models = window.findChild(ModelsPage)
    window.show_page("Models")
    models.search("abliterated")
    qtbot.waitUntil(lambda: models.search_view.results.rowCount() == 1, timeout=WAIT)
    models.search_view.table.selectRow(0)
    qtbot.waitUntil(lambda: len(models.repo_view.entry_names()) == 3, timeout=WAIT)
    qtbot.waitUntil(lambda: not models.runner.is_busy(), timeout=WAIT)
    models.repo_view.select_entry(FILES[0])  # the detail table under the files, too
    return styled_app


@SIZES
def test_models_page_fits_with_a_repo_shown(qtbot, app_with_repo, size):
    window = app_with_repo.window
    models = window.findChild(ModelsPage)
    actions = [models.search_view.search_button, models.repo_view.download_button]
    assert layout_problems(window, size, actions) == []


def test_the_window_narrows_to_1024_after_a_long_repo_is_shown(qtbot, app_with_repo):
    window = app_with_repo.window
    # It could not go below 1142 px once a repo had been shown.
    assert window.minimumSizeHint().width() <= SMALL.width()
    assert window.minimumSizeHint().height() <= SMALL.height()


@SIZES
def test_file_names_keep_their_quantization_and_columns_their_names(qtbot, app_with_repo, size):
    window = app_with_repo.window
    show_at(window, size)
    tree = window.findChild(ModelsPage).repo_view.tree
    for index in _file_rows(tree):
        # What the view paints: the name as the delegate cuts it for the column's width.
        option = QStyleOptionViewItem()
        tree.initViewItemOption(option)
        option.rect = tree.visualRect(index)
        tree.itemDelegateForColumn(0).initStyleOption(option, index)
        quant = index.data().rsplit("-", 1)[-1]
        assert option.text.endswith(quant), (option.text, quant)
        assert option.fontMetrics.horizontalAdvance(option.text) <= option.rect.width()
    repo_view = window.findChild(ModelsPage).repo_view
    for header in (tree.header(), repo_view.detail.horizontalHeader()):
        metrics = QFontMetrics(header.font())
        margins = 2 * header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin)
        model = header.model()
        for col in range(model.columnCount()):
            if header.isSectionHidden(col):  # Size in a narrow window (the next test)
                continue
            title = model.headerData(col, Qt.Orientation.Horizontal)
            assert header.sectionSize(col) >= metrics.horizontalAdvance(title) + margins, title


@SIZES
def test_file_names_are_readable_in_the_narrowest_window(qtbot, app_with_repo, size):
    """At 1024x640 the File column showed 'Me…_M': the last column (Speed) took half the
    spare width. There the name keeps the width, 18 characters of it at least, and the Size
    column gives way (the size is in the name's tooltip and in the line under the list)."""
    window = app_with_repo.window
    show_at(window, size)
    tree = window.findChild(ModelsPage).repo_view.tree
    narrow = size == SMALL
    assert tree.isColumnHidden(SIZE_COLUMN) == narrow
    assert tree.columnWidth(0) > max(tree.columnWidth(c) for c in range(1, len(HEADERS)))
    for index in _file_rows(tree):
        option = QStyleOptionViewItem()
        tree.initViewItemOption(option)
        option.rect = tree.visualRect(index)
        tree.itemDelegateForColumn(0).initStyleOption(option, index)
        assert len(option.text.replace("…", "")) >= 18, option.text  # "Meta-Llama-3.…Q4_K_M"
        size_text = units.size(index.data(ENTRY_ROLE).total_size)
        assert size_text in index.data(Qt.ItemDataRole.ToolTipRole)


def _file_rows(tree):
    model = tree.model()
    for g in range(model.rowCount()):
        group = model.index(g, 0)
        for r in range(model.rowCount(group)):
            yield model.index(r, 0, group)


@SIZES
def test_chat_page_fits(qtbot, styled_app, size):
    window = styled_app.window
    window.show_page("Chat")
    assert layout_problems(window, size, [window.chat.send_button]) == []


@SIZES
def test_dashboard_page_fits(qtbot, styled_app, size):
    window = styled_app.window
    window.show_page("Dashboard")
    page = window.findChild(DashboardPage)
    actions = [page.source_box, page.open_button, page.save_button, page.compare.run_button]
    assert layout_problems(window, size, actions) == []


@SIZES
def test_recommended_chat_models_show_whole_names_sizes_and_verdicts(qtbot, styled_app, size):
    window = styled_app.window
    models = window.findChild(ModelsPage)
    window.show_page("Models")
    models.show_recommended()
    view = models.search_view
    qtbot.waitUntil(lambda: not models.runner.is_busy(), timeout=WAIT)
    show_at(window, size)
    table = view.recommended_table
    assert table.isVisible() and table.horizontalScrollBar().maximum() == 0
    metrics = QFontMetrics(table.font())
    margins = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1)
    model = table.model()
    for row in range(model.rowCount()):
        for col in range(model.columnCount()):
            text = model.index(row, col).data()
            assert table.columnWidth(col) >= metrics.horizontalAdvance(text) + margins, text


@SIZES
def test_downloads_and_my_models_tabs_fit(qtbot, app_with_repo, size):
    window = app_with_repo.window
    models = window.findChild(ModelsPage)
    models.tabs.setCurrentIndex(models.TAB_DOWNLOADS)
    view = models.downloads_view
    actions = [view.load_button, view.pause_button, view.resume_button, view.cancel_button]
    assert layout_problems(window, size, actions) == []
    models.tabs.setCurrentIndex(models.TAB_LIBRARY)
    lib = models.library_view
    actions = [lib.load_button, lib.delete_button, lib.refresh_button, lib.add_folder_button]
    assert layout_problems(window, size, actions) == []
