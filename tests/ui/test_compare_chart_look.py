"""The Compare bar chart (painted, no style sheet reaches it) follows the look: dark behind its
bars in the dark look (it stayed white), and its title, panel titles, values and mode names at
4.5:1 or more against what is painted under them in both looks."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QApplication

from app.ui.dashboard.bar_chart import CompareBarChart
from app.ui.theme import DARK, LIGHT, show_scheme
from tests.ui.contrast import AA, contrast, painted_background, painted_text

ROWS = [
    {"mode": "f16/f16", "kv_allocated_mib": 144.0, "decode_tokens_per_second": 22.4},
    {"mode": "q8_0/f16", "kv_allocated_mib": 110.3, "decode_tokens_per_second": 22.1},
]


@pytest.fixture(autouse=True)
def app_look_restored(qapp):
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def test_the_compare_chart_follows_the_look(qtbot, qapp) -> None:
    chart = CompareBarChart()
    qtbot.addWidget(chart)
    chart.resize(900, 320)
    chart.set_rows(ROWS, "Compare on the starter")
    chart.show()
    backgrounds = {}
    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        QApplication.processEvents()
        image = chart.grab().toImage()
        background = painted_background(image, chart.rect())
        backgrounds[scheme] = background.lightness()
        # The chart's title, the first panel's title and its bars' values, the mode names.
        for what, area in (
            ("title", QRect(14, 10, 300, 20)),
            ("panel title", QRect(14, 38, 200, 20)),
            ("mode names", QRect(14, chart.height() - 30, 400, 18)),
        ):
            words = painted_text(image, area, background)
            assert contrast(words, background) >= AA, (scheme, what, words.name())
    assert backgrounds[DARK] < 64 < backgrounds[LIGHT]
