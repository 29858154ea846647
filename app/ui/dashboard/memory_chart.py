"""Memory over time (pyqtgraph), with vertical markers for model load, prompt
processing and generation. Fed whole arrays by the page's redraw timer.

Marker labels never overlap: when two lines are closer than a label is wide, the later
label moves down its line below the earlier one, and is hidden when the chart has no room."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, QSize
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QWidget

from app.platform.recording import Marker, MemoryPoint
from app.ui.dashboard.chart_theme import is_palette_change, paint_chart
from app.ui.theme import text_colour

MIB = 1024 * 1024
AXIS_WIDTH = 64  # px: room for "100000" (MiB) and the axis title

# Marker kind -> (colour, short label drawn at the top of the line)
MARKER_STYLE = {
    "mode": ("#6b7280", "{label}"),
    "load": ("#8e44ad", "load"),
    "loaded": ("#8e44ad", "loaded"),
    "prompt": ("#e67e22", "prompt"),
    "generation": ("#16a085", "generation"),
    "finished": ("#9ca3af", ""),
    "quality": ("#2f7ed8", "quality"),
    "end": ("#d1d5db", ""),
}
DRAWN_KINDS = ("mode", "load", "prompt", "generation", "quality")
# A drawn kind's colour in the shown look (its label is text: 4.5:1 on the chart in each look).
THEMED_KINDS = {"mode": "mode", "load": "load", "loaded": "load", "prompt": "prompt"}
THEMED_KINDS |= {"generation": "generation", "quality": "quality"}
RECENT_LINES = 12  # lines drawn with their labels; older ones stay as plain lines
HISTORY_LINE_TOP_MIB = 1e7  # older lines run off the top of any y range the chart sets
CHART_HINT_HEIGHT = 240  # px
LABEL_TOP = 0.96  # a label's place along its line, as a share of the plot's height
LABEL_GAP_PX = 4


def _nice_ceiling(x: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 5, 7.5 x 10^k that is >= x."""
    import math

    exp = 10 ** math.floor(math.log10(x))
    for step in (1, 1.5, 2, 3, 5, 7.5, 10):
        if step * exp >= x:
            return step * exp
    return 10 * exp


class MemoryChart(pg.PlotWidget):
    """`set_points(points)` and `set_markers(markers)`; both are cheap when nothing changed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, background=text_colour("chart"))
        self.setMinimumHeight(220)
        item = self.getPlotItem()
        # No grid: pyqtgraph draws it with the axes, so each new sample would repaint
        # both axes' text (most of a frame's cost).
        item.setLabel("left", "memory", units="MiB")
        item.setLabel("bottom", "time", units="s")
        item.getAxis("left").enableAutoSIPrefix(False)
        # A fixed width: sized to its tick labels, the axis widens when a label gains a digit,
        # which resizes the plot and regenerates every axis of the chart in one GUI pass.
        item.getAxis("left").setWidth(AXIS_WIDTH)
        item.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        # Width-1 (cosmetic) pen and no fill, peak downsampling and fixed, stepped ranges keep a
        # repaint to a few ms: a wide pen, antialiasing or an axis redrawn on every
        # sample cost tens of ms per frame on the GUI thread.
        self.curve = self.plot([], [], pen=pg.mkPen("#2f7ed8", width=1))
        self.curve.setDownsampling(auto=True, method="peak")
        self.curve.setClipToView(True)
        item.getViewBox().disableAutoRange()
        self._x_span = self._y_top = 0.0
        self._n_points = -1
        self._last_t: float | None = None
        self._marker_items: list[pg.InfiniteLine] = []  # the recent, labelled lines
        self._markers: list[Marker] = []  # the markers already drawn, in order
        self._drawn: list[tuple[float, str, str]] = []  # (t, colour, label) per _marker_items
        self._history: dict[str, list[float]] = {}  # colour -> times of older, plain lines
        self._history_items: dict[str, pg.PlotCurveItem] = {}
        self._markers_key: tuple[int, float] | None = None
        self.x = np.zeros(0)
        self.y = np.zeros(0)
        self._laying_out = False
        # The labels' room changes with the time axis and the chart's size: lay them out again.
        item.getViewBox().sigTransformChanged.connect(self._on_view_changed)
        item.getViewBox().sigResized.connect(self._on_view_changed)
        paint_chart(self)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        built = hasattr(self, "_markers")  # Qt reports one while pyqtgraph builds the chart
        if built and is_palette_change(event):  # a theme switch: the look's colours, markers
            paint_chart(self)
            markers, self._markers_key = list(self._markers), None
            self._clear_markers()
            self.set_markers(markers)

    def sizeHint(self) -> QSize:
        # Small, so that in the page's scroll area (sized to its preferred height) both
        # charts and the Compare button fit a 640 px tall window; stretch gives them more.
        return QSize(400, CHART_HINT_HEIGHT)

    @property
    def point_count(self) -> int:
        return len(self.x)

    def set_points(self, points: Sequence[MemoryPoint]) -> bool:
        """Draw `points`; returns False when they were already drawn."""
        last_t = points[-1].t if points else None
        if len(points) == self._n_points and last_t == self._last_t:
            return False
        self._n_points, self._last_t = len(points), last_t
        self.x = np.fromiter((p.t for p in points), dtype=float, count=len(points))
        self.y = np.fromiter((p.used_bytes / MIB for p in points), dtype=float, count=len(points))
        self.curve.setData(self.x, self.y)
        self._update_ranges()
        return True

    def _update_ranges(self) -> None:
        """Change the axes only when the data outgrows them (in 1-2-5 steps)."""
        if not len(self.x):
            return
        x0 = min(0.0, float(self.x[0]))
        span = _nice_ceiling(max(10.0, (float(self.x[-1]) - x0) * 1.02))
        top = _nice_ceiling(max(1.0, float(self.y.max())) * 1.12)
        if span != self._x_span or x0 != getattr(self, "_x0", None):
            self._x_span, self._x0 = span, x0
            self.setXRange(x0, x0 + span, padding=0)
        if top != self._y_top:
            self._y_top = top
            self.setYRange(0, top * 1.03, padding=0)  # room for the top tick's label

    def set_markers(self, markers: Sequence[Marker]) -> None:
        """Draw one line per phase start. Markers are only ever appended while a recording
        runs, so only the new ones are drawn: rebuilding every line and label on each new
        marker cost the GUI thread 49 ms after 20 replies and 160 ms after 60 (offscreen)."""
        key = (len(markers), markers[-1].t if markers else 0.0)
        if key == self._markers_key:
            return
        self._markers_key = key
        seen = len(self._markers)
        if list(markers[:seen]) != self._markers:  # another recording, or reordered: start over
            self._clear_markers()
            seen = 0
        for marker in markers[seen:]:
            self._markers.append(marker)
            if marker.kind in DRAWN_KINDS:
                self._draw_marker(marker)
        self.layout_labels()

    def layout_labels(self) -> None:
        """Place the labels from the oldest: each at the top of its line unless it would
        overlap a label already placed, then just below that one, or hidden when it would
        run past the bottom of the plot. Cheap: at most RECENT_LINES labels, and only when
        markers or the view change, never per sample."""
        if self._laying_out:  # updateMatrix below can report a transform change
            return
        self._laying_out = True
        try:
            self._place_labels()
        finally:
            self._laying_out = False

    def _place_labels(self) -> None:
        view = self.getViewBox()
        view.updateMatrix()
        area = view.sceneBoundingRect()
        height = area.height()
        if height <= 0 or not self.isVisible():
            return
        placed: list[QRectF] = []
        for line in self._marker_items:
            label = getattr(line, "label", None)
            if label is None or not label.format:
                continue
            line.viewTransformChanged()  # its bounds follow the view, which may just have moved
            label.setVisible(True)
            position = LABEL_TOP
            while True:
                label.setPosition(position)
                label.updateTransform(force=True)
                rect = label.sceneBoundingRect()
                clashes = [r for r in placed if r.intersects(rect)]
                if rect.bottom() > area.bottom():  # no room left under the others
                    label.setVisible(False)
                    break
                if not clashes:
                    placed.append(rect)
                    break
                position -= (max(r.bottom() for r in clashes) - rect.top() + LABEL_GAP_PX) / height

    @property
    def shown_labels(self) -> list[tuple[str, QRectF]]:
        """The labels on screen and their rectangles in the scene, oldest first."""
        return [
            (line.label.format, line.label.sceneBoundingRect())
            for line in self._marker_items
            if getattr(line, "label", None) is not None and line.label.isVisible()
        ]

    def _on_view_changed(self, _view: object) -> None:
        self.layout_labels()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.layout_labels()  # a hidden chart could not measure its labels

    def _clear_markers(self) -> None:
        for item in [*self._marker_items, *self._history_items.values()]:
            self.removeItem(item)
        self._marker_items, self._drawn, self._markers = [], [], []
        self._history, self._history_items = {}, {}

    def _draw_marker(self, marker: Marker) -> None:
        color, text = MARKER_STYLE.get(marker.kind, ("#9ca3af", "{label}"))
        if marker.kind in THEMED_KINDS:
            color = text_colour(THEMED_KINDS[marker.kind])
        label = text.format(label=marker.label) if text else ""
        # Markers within 50 ms of the last line share it and its label (load + loaded, say),
        # which keeps a long session readable.
        if self._drawn and abs(marker.t - self._drawn[-1][0]) < 0.05:
            t, first_color, first_label = self._drawn[-1]
            merged = " ".join(x for x in (first_label, label) if x)
            if merged != first_label:
                self._drawn[-1] = (t, first_color, merged)
                self.removeItem(self._marker_items[-1])
                self._marker_items[-1] = self._add_line(t, first_color, merged)
            return
        if len(self._marker_items) == RECENT_LINES:
            self._retire_oldest_line()
        self._drawn.append((marker.t, color, label))
        self._marker_items.append(self._add_line(marker.t, color, label))

    def _retire_oldest_line(self) -> None:
        """The oldest labelled line becomes a plain segment in its colour's history item:
        every labelled line is a Python-painted item, and 120 of them made each 10 Hz
        repaint of the chart take 30 ms."""
        self.removeItem(self._marker_items.pop(0))
        t, color, _label = self._drawn.pop(0)
        times = self._history.setdefault(color, [])
        times.append(t)
        x = np.repeat(np.asarray(times, dtype=float), 2)
        y = np.tile([0.0, HISTORY_LINE_TOP_MIB], len(times))
        item = self._history_items.get(color)
        if item is None:
            faded = pg.mkColor(color)
            faded.setAlpha(90)  # older phases stay visible without competing with the recent ones
            item = pg.PlotCurveItem(pen=pg.mkPen(faded, width=1))
            self.addItem(item, ignoreBounds=True)
            self._history_items[color] = item
        item.setData(x, y, connect="pairs")

    def _add_line(self, t: float, color: str, label: str) -> pg.InfiniteLine:
        line = pg.InfiniteLine(
            pos=t,
            angle=90,
            movable=False,
            pen=pg.mkPen(color, width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
            label=label.replace("{", "(").replace("}", ")") or None,
            labelOpts={
                "position": 0.96,
                "color": color,
                "rotateAxis": (1, 0),
                "anchors": [(1, 0), (1, 0)],
            }
            if label
            else None,
        )
        self.addItem(line)
        return line

    @property
    def line_labels(self) -> list[str]:
        """The labels of the labelled (most recent) lines, oldest first."""
        return [label for _t, _color, label in self._drawn]

    @property
    def marker_count(self) -> int:
        """Lines drawn: the labelled recent ones and the plain older ones."""
        return len(self._marker_items) + sum(len(times) for times in self._history.values())
