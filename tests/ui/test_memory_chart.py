"""The memory chart's marker lines: one per phase start, drawn incrementally, and a long
session's older lines kept cheap to paint."""

from __future__ import annotations

import pytest

from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")

from app.platform.recording import Marker  # noqa: E402
from app.ui.dashboard.memory_chart import RECENT_LINES, MemoryChart  # noqa: E402


def _replies(n: int, start: float = 0.0) -> list[Marker]:
    markers = []
    for i in range(n):
        t = start + 2.0 * i
        markers += [
            Marker(t, "prompt", "prompt"),
            Marker(t + 0.5, "generation", "generation"),
            Marker(t + 1.5, "finished", "stop"),
        ]
    return markers


def test_a_new_marker_adds_one_line_and_keeps_the_others(qtbot) -> None:
    chart = MemoryChart()
    qtbot.addWidget(chart)
    markers = [
        Marker(0.0, "mode", "q8_0/f16"),
        Marker(0.02, "load", "m.gguf"),
        Marker(0.9, "loaded", "loaded"),
        *_replies(1, start=1.0),
    ]
    chart.set_markers(markers)
    first = list(chart._marker_items)
    # mode and load, 20 ms apart, share a line; "loaded" and "finished" draw none of their own.
    assert chart.line_labels == ["q8_0/f16 load", "prompt", "generation"]

    markers += [Marker(4.0, "prompt", "prompt")]
    chart.set_markers(markers)
    assert chart._marker_items[:3] == first  # the older lines are the same objects
    assert chart.marker_count == 4 and chart.line_labels[-1] == "prompt"


def test_another_recording_redraws_from_scratch(qtbot) -> None:
    chart = MemoryChart()
    qtbot.addWidget(chart)
    chart.set_markers(_replies(20))
    chart.set_markers([Marker(5.0, "mode", "q8_0/f16")])
    assert chart.marker_count == 1 and chart.line_labels == ["q8_0/f16"]
    assert chart._marker_items[0].value() == 5.0


def test_a_long_session_keeps_every_line_but_labels_only_the_recent_ones(qtbot) -> None:
    chart = MemoryChart()
    qtbot.addWidget(chart)
    chart.resize(1200, 300)
    chart.show()
    markers = _replies(60)
    for i in range(1, 61):  # replies arrive one by one, as in a session
        chart.set_markers(markers[: 3 * i])
    assert chart.marker_count == 120  # prompt + generation per reply
    assert len(chart.line_labels) == RECENT_LINES
    assert chart.line_labels[-2:] == ["prompt", "generation"]
    # Each item in the plot is painted in Python on every 10 Hz redraw; 120 labelled lines
    # made a repaint take 30 ms. Older lines share one item per colour instead.
    items = chart.getPlotItem().items
    assert len(items) <= 1 + RECENT_LINES + len(("prompt", "generation")), len(items)


def test_labels_of_markers_close_in_time_do_not_overlap(qtbot) -> None:
    """A short prompt puts 'prompt' and 'generation' a few pixels apart; replies in quick
    succession do it again: every label on screen has a rectangle of its own, stacked down
    its line or hidden, and the plot's bottom cuts none."""
    from app.platform.recording import MemoryPoint

    chart = MemoryChart()
    qtbot.addWidget(chart)
    chart.resize(500, 260)
    chart.show()
    qtbot.waitExposed(chart)
    chart.set_points([MemoryPoint(0.1 * i, 300 * 2**20) for i in range(300)])
    markers = [
        Marker(1.0, "load", "model.gguf"),
        Marker(1.5, "loaded", "loaded"),
        Marker(5.0, "prompt", "prompt: 12 tokens"),
        Marker(5.12, "generation", "generation"),
        Marker(5.3, "prompt", "prompt: 40 tokens"),
        Marker(5.4, "generation", "generation"),
        Marker(5.5, "prompt", "prompt: 3 tokens"),
        Marker(20.0, "prompt", "prompt: 3 tokens"),
    ]
    for i in range(1, len(markers) + 1):  # as a session adds them
        chart.set_markers(markers[:i])
    shown = chart.shown_labels
    assert len(shown) >= 4, shown  # stacked, not all hidden
    for a, (text_a, rect_a) in enumerate(shown):
        for text_b, rect_b in shown[a + 1 :]:
            assert not rect_a.intersects(rect_b), (text_a, rect_a, text_b, rect_b)
    plot_area = chart.getViewBox().sceneBoundingRect()
    for text, rect in shown:
        assert plot_area.contains(rect), (text, rect, plot_area)
    # The lone marker at 20 s keeps the top of its line.
    assert shown[-1][1].top() == shown[0][1].top()

    # A narrower chart puts the lines closer: the labels are laid out again.
    with qtbot.waitSignal(chart.getViewBox().sigResized, timeout=HANG_GUARD_MS):
        chart.resize(300, 260)
    assert chart.getViewBox().sceneBoundingRect().width() < 250
    shown = chart.shown_labels
    for a, (_, rect_a) in enumerate(shown):
        assert not any(rect_a.intersects(rect_b) for _, rect_b in shown[a + 1 :])
