"""Every page of the real app, with the starter model loaded, is readable in the light and the
dark look: each text's colour against the background really painted under it is at least 4.5:1
(WCAG AA), for labels, buttons, inputs, spin boxes, tabs, table headers and cells, and the
charts' numbers, axis titles, legends and marker labels (tests/ui/contrast.py measures)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.ui.theme import DARK, LIGHT, ThemeController
from tests.ui.contrast import contrast_problems

pytestmark = pytest.mark.slow  # the starter model loads once

PAGES = ("Chat", "Models", "Dashboard", "Backends", "Server", "Settings")


@pytest.fixture(autouse=True)
def app_look_restored(qapp):
    """The theme is app-wide: put back the stylesheet and palette other tests run with."""
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def settle() -> None:
    for _ in range(5):
        QApplication.processEvents()


def below_the_fold(window: QWidget) -> list[str]:
    """The problems of what a page's scroll areas hold below the fold, scrolled to the end."""
    problems: list[str] = []
    for area in window.findChildren(QScrollArea):
        bar = area.verticalScrollBar()
        if area.isVisible() and bar.maximum() > 0:
            bar.setValue(bar.maximum())
            settle()
            problems += contrast_problems(window)
            bar.setValue(0)
            settle()
    return problems


def test_every_page_reads_at_aa_contrast_in_both_looks(qtbot, loaded_chat_app) -> None:
    window = loaded_chat_app.window
    window.resize(1280, 800)
    theme = window.findChild(ThemeController)
    found: dict[str, list[str]] = {}
    for scheme in (LIGHT, DARK):
        theme.choose(scheme)
        for title in PAGES:
            window.show_page(title)
            settle()
            problems = contrast_problems(window) + below_the_fold(window)
            if problems:
                found[f"{scheme} {title}"] = problems
    assert found == {}, "\n".join(f"{page}: {p}" for page, ps in found.items() for p in ps)


def test_dark_spin_box_arrows_stand_out(qtbot, qapp) -> None:
    """Spin-box arrows are controls: WCAG asks 3:1 for them against what surrounds them. In
    the dark look Fusion drew them in a shade of the window colour (about 1.3:1)."""
    from PySide6.QtWidgets import QSpinBox, QStyle, QStyleOptionSpinBox

    from app.ui.theme import show_scheme
    from tests.ui.contrast import contrast, painted_background

    show_scheme(qapp, DARK)
    box = QSpinBox()
    box.setRange(0, 10)
    box.setValue(5)
    box.resize(140, 30)
    qtbot.addWidget(box)
    box.show()
    settle()
    image = box.grab().toImage()
    option = QStyleOptionSpinBox()
    box.initStyleOption(option)
    for part in (QStyle.SubControl.SC_SpinBoxUp, QStyle.SubControl.SC_SpinBoxDown):
        rect = box.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, option, part, box)
        background = painted_background(image, rect)
        strongest = max(
            contrast(QColor(image.pixel(x, y)), background)
            for x in range(rect.left(), rect.right() + 1)
            for y in range(rect.top(), rect.bottom() + 1)
        )
        assert strongest >= 3.0, (part, strongest)
