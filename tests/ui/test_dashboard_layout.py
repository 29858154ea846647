"""The Dashboard in the real app at the smallest supported window (1024x640) and a common
desktop (1920x1080): nothing squeezed, and without scrolling the sentence about the model,
both charts' plot areas and the Compare button are on screen (issue 12, point 4); the
lesson (issue 28) comes after Compare, whole on screen once scrolled to."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QRect  # noqa: E402

from tests.ui.layout_checks import LARGE, SMALL, layout_problems  # noqa: E402

pytestmark = pytest.mark.slow


def _dashboard(parts):
    from app.ui.dashboard.page import DashboardPage

    parts.window.show_page("Dashboard")
    return parts.window.findChild(DashboardPage)


def _visible_height(page, widget, rect: QRect) -> int:
    """Pixels of `rect` (in `widget`'s coordinates) inside the page's scrolled viewport."""
    viewport = page.scroll_area.viewport()
    top_left = widget.mapTo(viewport, rect.topLeft())
    return QRect(top_left, rect.size()).intersected(viewport.rect()).height()


def _plot_area(chart) -> QRect:
    """The chart's plot (its ViewBox, without the axes), in the chart's coordinates."""
    return chart.mapFromScene(chart.getPlotItem().getViewBox().sceneBoundingRect()).boundingRect()


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["1024x640", "1920x1080"])
def test_dashboard_fits_with_the_starter_loaded(loaded_chat_app, size) -> None:
    page = _dashboard(loaded_chat_app)
    actions = [page.compare.run_button, page.header.details_button]
    assert layout_problems(loaded_chat_app.window, size, actions) == []
    assert page.scroll_area.verticalScrollBar().value() == 0  # what a user sees on arrival

    sentence = page.header.sentence
    assert sentence.text().startswith("KV cache at 2,048 tokens:")
    assert _visible_height(page, sentence, sentence.rect()) == sentence.height()
    for chart in (page.memory_chart, page.kv_panel.plot):
        area = _plot_area(chart)
        assert area.height() >= 120, (type(chart).__name__, area)
        # at least half of each plot above the fold (in practice all of it)
        assert _visible_height(page, chart, area) >= area.height() // 2, (
            type(chart).__name__,
            area,
        )
    # Side by side when there is room: the plots share their rows.
    memory_top = page.memory_chart.mapTo(page.content, page.memory_chart.rect().topLeft())
    kv_top = page.kv_panel.plot.mapTo(page.content, page.kv_panel.plot.rect().topLeft())
    assert abs(memory_top.y() - kv_top.y()) < 5 and kv_top.x() > memory_top.x()
    # The lesson comes after Compare; scrolled to, its sentences and chart are whole on screen.
    lesson, run = page.lesson, page.compare.run_button
    lesson_top = lesson.mapTo(page.content, lesson.rect().topLeft()).y()
    assert run.mapTo(page.content, run.rect().bottomLeft()).y() < lesson_top
    page.scroll_area.ensureWidgetVisible(lesson, 0, 0)
    for part in (lesson.text, lesson.chart):
        assert part.isVisible() and _visible_height(page, part, part.rect()) == part.height()
    page.scroll_area.verticalScrollBar().setValue(0)


def test_dashboard_without_a_model_says_what_to_do_and_fits(chat_app) -> None:
    page = _dashboard(chat_app)
    assert layout_problems(chat_app.window, SMALL, [page.compare.run_button]) == []
    sentence = page.header.sentence
    assert sentence.text().startswith("No model loaded. Load one on the Chat page")
    assert _visible_height(page, sentence, sentence.rect()) == sentence.height()
    assert not page.compare.run_button.isEnabled()
