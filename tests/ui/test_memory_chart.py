"""The memory chart's marker lines: one per phase start, drawn incrementally."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.core.recording import Marker  # noqa: E402
from app.ui.dashboard.memory_chart import MemoryChart  # noqa: E402


def _labels(chart: MemoryChart) -> list[str]:
    return [line.label.format if line.label is not None else "" for line in chart._marker_items]


def test_a_new_marker_adds_one_line_and_keeps_the_others(qtbot) -> None:
    chart = MemoryChart()
    qtbot.addWidget(chart)
    markers = [Marker(0.0, "mode", "q8_0/f16"), Marker(0.02, "load", "m.gguf"),
               Marker(0.9, "loaded", "loaded"), Marker(1.0, "prompt", "prompt"),
               Marker(1.5, "generation", "generation")]
    chart.set_markers(markers)
    first = list(chart._marker_items)
    # mode and load, 20 ms apart, share a line; "loaded" draws none of its own.
    assert _labels(chart) == ["q8_0/f16 load", "prompt", "generation"]

    markers += [Marker(3.0, "finished", "stop"), Marker(4.0, "prompt", "prompt")]
    chart.set_markers(markers)
    # The finished marker draws no line; the new prompt adds one; older lines are the same objects.
    assert chart._marker_items[:3] == first
    assert len(chart._marker_items) == 4 and _labels(chart)[-1] == "prompt"


def test_another_recording_redraws_from_scratch(qtbot) -> None:
    chart = MemoryChart()
    qtbot.addWidget(chart)
    chart.set_markers([Marker(0.0, "load", "a"), Marker(2.0, "prompt", "p")])
    chart.set_markers([Marker(5.0, "mode", "q8_0/f16")])
    assert chart.marker_count == 1 and _labels(chart) == ["q8_0/f16"]
    assert chart._marker_items[0].value() == 5.0
