"""The comparison as small bar charts (KV allocated, peak memory, prompt and decode speed,
perplexity), one panel per measure, painted with QPainter (QtGui, no widgets) so the same
drawing serves the dashboard's chart (app/ui/dashboard/bar_chart.py) and `kvstudio bench
--plot` (an offscreen QImage saved as PNG), which imports nothing from app/ui."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QPen

from app.platform.errors import AppError

# One colour per mode, in the order the modes were measured (f16/f16 first, grey).
MODE_COLORS = ("#8a94a6", "#2f7ed8", "#16a085", "#e67e22", "#8e44ad", "#c0392b")

PANELS = (
    ("kv_allocated_mib", "KV cache allocated", "MiB", "{:,.1f}"),
    ("peak_memory_mib", "Peak memory", "MiB", "{:,.0f}"),
    ("prompt_tokens_per_second", "Prompt speed", "tokens/s", "{:,.0f}"),
    ("decode_tokens_per_second", "Decode speed", "tokens/s", "{:,.1f}"),
    ("perplexity", "Perplexity (lower is better)", "", "{:.3f}"),
)


@dataclass(frozen=True)
class ChartLook:
    """The chart's colours: the dashboard passes its look's (app/ui/theme_colours.py), a PNG
    is drawn in LIGHT_LOOK. Words are 4.5:1 or more on the background in both."""

    background: QColor
    text: QColor
    muted: QColor  # units, mode names, "not measured"
    grid: QColor


LIGHT_LOOK = ChartLook(QColor("#ffffff"), QColor("#1f2937"), QColor("#6b7280"), QColor("#e5e7eb"))


def _panel(
    painter: QPainter,
    rect: QRectF,
    rows: Sequence[Mapping[str, object]],
    key: str,
    title: str,
    unit: str,
    fmt: str,
    look: ChartLook,
) -> None:
    values = [row.get(key) for row in rows]
    painter.setPen(look.text)
    font = painter.font()
    bold = QFont(font)
    bold.setBold(True)
    painter.setFont(bold)
    painter.drawText(
        QRectF(rect.left(), rect.top(), rect.width(), 20), Qt.AlignmentFlag.AlignLeft, title
    )
    painter.setFont(font)
    if unit:
        painter.setPen(look.muted)
        painter.drawText(
            QRectF(rect.left(), rect.top(), rect.width(), 20), Qt.AlignmentFlag.AlignRight, unit
        )
    plot = QRectF(rect.left(), rect.top() + 26, rect.width(), rect.height() - 26 - 22)
    painter.setPen(QPen(look.grid, 1))
    painter.drawLine(plot.bottomLeft(), plot.bottomRight())
    numeric = [v for v in values if isinstance(v, (int, float))]
    if not numeric:
        painter.setPen(look.muted)
        painter.drawText(plot, Qt.AlignmentFlag.AlignCenter, "not measured")
        return
    top = max(numeric) * 1.18 or 1.0
    n = max(1, len(rows))
    slot = plot.width() / n
    bar_w = min(70.0, slot * 0.62)
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        x = plot.left() + slot * i + (slot - bar_w) / 2
        color = QColor(MODE_COLORS[i % len(MODE_COLORS)])
        if isinstance(value, (int, float)):
            h = max(1.0, plot.height() * value / top)
            bar = QRectF(x, plot.bottom() - h, bar_w, h)
            painter.fillRect(bar, color)
            painter.setPen(look.text)
            painter.drawText(
                QRectF(x - 20, bar.top() - 18, bar_w + 40, 16),
                Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom,
                fmt.format(value),
            )
        painter.setPen(look.muted)
        painter.drawText(
            QRectF(plot.left() + slot * i, plot.bottom() + 4, slot, 18),
            Qt.AlignmentFlag.AlignHCenter,
            str(row.get("mode", "")),
        )


def paint_compare(
    painter: QPainter,
    rect: QRectF,
    rows: Sequence[Mapping[str, object]],
    title: str = "",
    look: ChartLook = LIGHT_LOOK,
) -> None:
    """Draw the panels for `rows` (CompareResult.rows()) into `rect` in `look`'s colours."""
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.fillRect(rect, look.background)
    y = rect.top() + 10
    if title:
        painter.setPen(look.text)
        painter.drawText(
            QRectF(rect.left() + 14, y, rect.width() - 28, 20), Qt.AlignmentFlag.AlignLeft, title
        )
        y += 28
    if not rows:
        painter.setPen(look.muted)
        painter.drawText(
            rect, Qt.AlignmentFlag.AlignCenter, "Run a comparison to see the results here."
        )
        return
    panels = [
        p for p in PANELS if any(isinstance(r.get(p[0]), (int, float)) for r in rows)
    ] or list(PANELS[:1])
    gap = 18.0
    width = (rect.width() - 28 - gap * (len(panels) - 1)) / len(panels)
    height = rect.bottom() - y - 8
    for i, (key, panel_title, unit, fmt) in enumerate(panels):
        x = rect.left() + 14 + i * (width + gap)
        _panel(painter, QRectF(x, y, width, height), rows, key, panel_title, unit, fmt, look)


def render_compare_png(
    rows: Sequence[Mapping[str, object]],
    path: str | Path,
    title: str = "",
    size: QSize | None = None,
) -> Path:
    """Write the chart as a PNG (works offscreen; creates a QGuiApplication if none)."""
    size = size or QSize(1400, 420)
    app = QGuiApplication.instance()
    if app is None:
        import os

        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QGuiApplication([])
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.fill(LIGHT_LOOK.background)
    painter = QPainter(image)
    try:
        paint_compare(painter, QRectF(0, 0, size.width(), size.height()), rows, title)
    finally:
        painter.end()
    path = Path(path)
    if not image.save(str(path), "PNG"):  # type: ignore[call-overload]  # the stubs want bytes; PySide wants str
        raise AppError(f"The chart could not be written to {path}.")
    return path
