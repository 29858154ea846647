"""The theme on the Settings page, in the real app offscreen: Dark paints the window dark (pixels
of window.grab()), the chat's names stay readable, a restart of the real app keeps it; "Follow
the system" follows Qt's colour scheme; the page fits 1024x640 and 1920x1080 in both looks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.theme import DARK, LIGHT, STYLESHEETS, SYSTEM, ThemeController, scheme_for
from tests.docs_output import save_screenshot
from tests.ui.layout_checks import LARGE, SMALL, layout_problems, show_at
from tests.ui.test_settings_page import settings_page

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = QSize(1280, 800)


@pytest.fixture(autouse=True)
def app_look_restored(qapp):
    """The theme is app-wide: put back the stylesheet and palette other tests run with."""
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def lightness_at(widget: QWidget, point: QPoint | None = None) -> float:
    """How light the window's pixel is at `point` of `widget` (default: near its top right
    corner, where pages show their background), 0 black .. 1 white."""
    window = widget.window()
    point = point or QPoint(widget.width() - 40, 8)
    at = widget.mapTo(window, point)
    image = window.grab().toImage()
    ratio = image.devicePixelRatio()
    return QColor(image.pixel(int(at.x() * ratio), int(at.y() * ratio))).lightnessF()


@pytest.mark.slow
def test_dark_paints_the_window_dark_and_a_restart_keeps_it(qtbot, chat_app, tmp_path) -> None:
    page = settings_page(chat_app)
    assert page.theme.buttons[LIGHT].isChecked()
    assert lightness_at(page) > 0.8

    page.theme.buttons[DARK].click()
    assert lightness_at(page) < 0.2
    assert chat_app.settings.settings.theme == DARK
    chat = chat_app.window.chat
    chat_app.window.show_page("Chat")
    view = chat.findChild(QWidget, "messageView")
    # Above the empty chat's words (light on dark now: the middle would be a letter).
    assert lightness_at(view, QPoint(view.width() // 2, 12)) < 0.2

    # The real app started again on this data folder opens dark.
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        KVSTUDIO_DATA_DIR=str(chat_app.settings.folder),
        PYTHONPATH=str(ROOT),
    )
    shot = tmp_path / "restart.png"
    done = subprocess.run(
        [sys.executable, "-m", "app", "gui", "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    image = QImage(str(shot))
    # The middle of the conversation area (the chat page opens first).
    middle = QColor(image.pixel(image.width() * 3 // 5, image.height() // 2))
    assert middle.lightnessF() < 0.2

    chat_app.window.show_page("Settings")
    page.theme.buttons[LIGHT].click()
    assert lightness_at(page) > 0.8
    assert chat_app.settings.settings.theme == LIGHT


@pytest.mark.slow
def test_the_chat_names_are_drawn_in_the_theme_text_colour(qtbot, chat_app) -> None:
    """The You/Assistant names sit on the view's background, above the bubbles: text drawn
    in the light theme's colour would vanish on the dark view."""
    store = chat_app.store
    conversation = store.create_conversation("names")
    store.add_message(conversation.id, "user", "Hello there")
    chat = chat_app.window.chat
    chat.open_conversation(conversation.id)
    settings_page(chat_app).theme.buttons[DARK].click()
    chat_app.window.show_page("Chat")
    QApplication.processEvents()
    view = chat.findChild(QWidget, "messageView")
    rect = view.visualRect(view.model().index(0, 0))
    image = view.grab().toImage()
    ratio = image.devicePixelRatio()
    # Row by row from the top of the message: light pixels before the (light) bubble starts
    # are the name's. The user's name and bubble are on the right half.
    name_pixels = 0
    for y in range(rect.top(), rect.bottom()):
        light = sum(
            QColor(image.pixel(int(x * ratio), int(y * ratio))).lightnessF() > 0.6
            for x in range(rect.center().x(), rect.right())
        )
        if light > 80:  # a row of the bubble
            break
        name_pixels += light
    assert name_pixels > 20


@pytest.mark.parametrize(
    ("choice", "system", "shown"),
    [
        (SYSTEM, Qt.ColorScheme.Dark, DARK),
        (SYSTEM, Qt.ColorScheme.Light, LIGHT),
        (SYSTEM, Qt.ColorScheme.Unknown, LIGHT),
        (DARK, Qt.ColorScheme.Light, DARK),
        (LIGHT, Qt.ColorScheme.Dark, LIGHT),
    ],
)
def test_what_each_choice_shows_for_each_system_scheme(choice, system, shown) -> None:
    assert scheme_for(choice, system) == shown


def _system_turns(scheme: Qt.ColorScheme, qtbot) -> None:
    """Make the system's scheme `scheme`. Qt's offscreen platform keeps colorScheme() at
    Unknown whatever setColorScheme asks (checked here), so there the signal the platform
    would send is sent as it would be; on a platform that honours the request, it is real.
    (No wait for a signal that offscreen never sends: that cost 5 s a call.)"""
    hints = QGuiApplication.styleHints()
    changed: list[Qt.ColorScheme] = []

    def note(new: Qt.ColorScheme) -> None:
        changed.append(new)

    hints.colorSchemeChanged.connect(note)
    try:
        hints.setColorScheme(scheme)
    finally:
        hints.colorSchemeChanged.disconnect(note)
    if not changed and hints.colorScheme() != scheme:  # the platform ignored it: offscreen
        hints.colorSchemeChanged.emit(scheme)


@pytest.mark.slow
def test_follow_the_system_follows_its_scheme_changes(qtbot, chat_app) -> None:
    page = settings_page(chat_app)
    page.theme.buttons[SYSTEM].click()
    assert chat_app.settings.settings.theme == SYSTEM
    assert lightness_at(page) > 0.8  # offscreen: the system does not say, so light
    assert "does not say" in page.theme.system_label.text()
    try:
        _system_turns(Qt.ColorScheme.Dark, qtbot)
        assert lightness_at(page) < 0.2
        _system_turns(Qt.ColorScheme.Light, qtbot)
        assert lightness_at(page) > 0.8
        page.theme.buttons[LIGHT].click()  # a fixed choice ignores the system
        _system_turns(Qt.ColorScheme.Dark, qtbot)
        assert lightness_at(page) > 0.8
    finally:
        QGuiApplication.styleHints().unsetColorScheme()


def _selectors(sheet: str) -> set[str]:
    import re

    text = re.sub(r"/\*.*?\*/", "", sheet, flags=re.S)
    return {
        s.strip()
        for block in re.findall(r"([^{}]+)\{", text)
        for s in block.split(",")
        if s.strip()
    }


def test_the_dark_sheet_styles_everything_the_light_one_does() -> None:
    light = _selectors(STYLESHEETS[LIGHT].read_text(encoding="utf-8"))
    dark = _selectors(STYLESHEETS[DARK].read_text(encoding="utf-8"))
    assert light - dark == set()


@pytest.mark.slow
@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_the_settings_page_fits_small_and_large_windows(
    qtbot, chat_app, scheme, docs_folder
) -> None:
    chat_app.window.findChild(ThemeController).apply()  # as open_app does at start
    page = settings_page(chat_app)
    page.theme.buttons[scheme].click()
    actions = [
        page.token.set_button,
        page.folders.open_data_button,
        page.folders.add_button,
        page.folders.remove_button,
        page.load_defaults.save_button,
        page.backend.open_button,
        *page.theme.buttons.values(),
    ]
    window = chat_app.window
    for size in (SMALL, LARGE):
        assert layout_problems(window, size, actions) == [], size
    show_at(window, SCREENSHOT)
    name = "settings.png" if scheme == LIGHT else "settings-dark.png"
    save_screenshot(window, docs_folder, name)
    QApplication.processEvents()
