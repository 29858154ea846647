"""Fixtures for the chat window tests: a fresh data folder per test (KVSTUDIO_DATA_DIR),
the real app wiring (build_app), and the real engine with the starter model."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_threads import ENGINE_THREADS
from tests.waits import HANG_GUARD_MS

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

LOAD_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 180_000  # 2 shared CPU cores: a few tokens can take a while


@pytest.fixture(autouse=True)
def _closed_windows_end_with_their_test(qapp) -> Iterator[None]:
    """Delete the main windows a test closed, once it ends. PySide keeps a window alive through
    the connections of its signals to its own methods and lambdas, so each test's window (about
    650 widgets) stayed for the rest of the run; by the end of the suite an app-wide restyle
    (the theme and layout tests) repolished tens of thousands of widgets, minutes per test."""
    yield
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication

    from app.services.tasks import TaskRunner
    from app.ui.main_window import MainWindow

    closed = [
        widget
        for widget in QApplication.topLevelWidgets()
        if isinstance(widget, MainWindow) and not widget.isVisible()
    ]
    for window in closed:
        for runner in window.findChildren(TaskRunner):
            runner.wait()  # no background task reports to a deleted view
        window.deleteLater()
    if closed:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def chat_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from app.state.settings import SettingsFile

    folder = tmp_path / "kvstudio-data"
    folder.mkdir()
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(folder))
    SettingsFile(folder).update(n_ctx=2048, n_threads=ENGINE_THREADS)  # small, quick
    return folder


@pytest.fixture
def chat_app(qtbot, chat_data_dir: Path) -> Iterator:
    """The main window and its parts on a fresh data folder (engine not started yet)."""
    from app.gui import build_app
    from app.platform.paths import data_dir

    parts = build_app(data_dir())
    parts.window.resize(1200, 800)
    parts.window.show()
    yield parts
    parts.window.close()
    parts.close()


@pytest.fixture
def loaded_chat_app(qtbot, chat_app):
    """chat_app with the starter model loaded through the one-click offer."""
    page = chat_app.window.chat
    assert page.offer.isVisible() and page.offer_button.isVisible()
    busy_shown = []
    chat_app.engine.loading_started.connect(
        lambda _options: busy_shown.append(page.status.busy_bar.isVisible())
    )
    with qtbot.waitSignal(chat_app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        page.offer_button.click()
    assert busy_shown == [True]  # an indeterminate bar and elapsed seconds while it loads
    assert not page.status.busy_bar.isVisible()
    qtbot.waitUntil(lambda: not page.offer.isVisible(), timeout=HANG_GUARD_MS)
    # The starter is a base model: the page offers text continuation; these tests chat with it.
    assert page.completion_mode
    page.completion.chat_anyway_button.click()
    assert not page.completion_mode
    return chat_app
