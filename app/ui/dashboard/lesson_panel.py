"""The Dashboard's lesson: why Flash Attention and the int8 K cache matter, for the loaded
model at its context, in plain sentences (app.kv.lesson) and one chart of the bytes involved,
on a log scale (the N x N matrix is millions of times a tile). It follows the engine itself
(the model loaded, the tokens in the context), so the page only places it."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.engine.messages import Finished, Loaded, Token
from app.kv.kv_cache import KvCacheEstimate
from app.kv.lesson import FA_TILE, Lesson, lesson_for, lesson_sentences
from app.models.gguf_header import GgufHeader
from app.models.gguf_read import read_gguf_header
from app.platform.units import size
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.ui.dashboard.kv_panel import kv_estimate

NO_MODEL = (
    "Load a model and this panel shows, in its own numbers, why Flash Attention and the 8-bit "
    "K cache let a long context fit."
)


def size_text(n_bytes: int) -> str:
    return size(n_bytes, 1)


def lesson_bars(lesson: Lesson) -> list[tuple[str, int, str]]:
    """The chart's bars: what attention would write without tiling against what Flash
    Attention keeps, then what one decode step reads in f16 against the loaded types."""
    mode = lesson.mode.label
    return [
        (f"N x N scores, one layer, N = {lesson.n_ctx:,}", lesson.score_matrix_bytes, "#c0392b"),
        (f"Flash Attention tile ({FA_TILE} x {FA_TILE})", lesson.tile_bytes, "#16a085"),
        (
            f"K+V read per step at {lesson.tokens:,} tokens, f16",
            lesson.fp16_read_per_step,
            "#8a94a6",
        ),
        (f"K+V read per step, {mode}", lesson.read_per_step, "#2f7ed8"),
    ]


class LessonChart(QWidget):
    """Horizontal bars of byte counts on a log scale, each labelled with its size."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bars: list[tuple[str, int, str]] = []  # (label, bytes, colour)
        self.setMinimumHeight(120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(600, 26 * max(4, len(self.bars)) + 8)

    def set_bars(self, bars: list[tuple[str, int, str]]) -> None:
        self.bars = bars
        self.updateGeometry()
        self.update()

    def paintEvent(self, _event: object) -> None:
        if not self.bars:
            return
        painter = QPainter(self)
        try:
            self._paint(painter)
        finally:
            painter.end()

    def _paint(self, painter: QPainter) -> None:
        text = self.palette().windowText().color()
        metrics = painter.fontMetrics()
        label_width = max(metrics.horizontalAdvance(label) for label, _, _ in self.bars) + 12
        value_width = metrics.horizontalAdvance("1,023.9 MiB") + 12
        top = math.log10(max(n for _, n, _ in self.bars))
        row = (self.height() - 4) / len(self.bars)
        span = max(1.0, self.width() - label_width - value_width)
        for i, (label, n_bytes, colour) in enumerate(self.bars):
            y = 2 + i * row
            painter.setPen(text)
            painter.drawText(
                QRectF(0, y, label_width - 8, row),
                int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                label,
            )
            # Log scale from 1 KiB: a tile and a whole matrix on one axis.
            width = span * max(0.02, (math.log10(max(n_bytes, 1)) - 3) / max(top - 3, 1e-9))
            if n_bytes == 0:  # nothing read yet: no bar, only its "0 B"
                width = 0.0
            else:
                painter.fillRect(
                    QRectF(label_width, y + row * 0.2, width, row * 0.6), QColor(colour)
                )
            painter.drawText(
                QRectF(label_width + width + 6, y, value_width, row),
                int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                size_text(n_bytes),
            )


class LessonPanel(QWidget):
    """The lesson for the model the engine has loaded; `lesson` is what it shows (None: no
    model, or no KV arithmetic for it)."""

    def __init__(self, client: EngineClient, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lessonPanel")
        self.lesson: Lesson | None = None
        self._loaded: Loaded | None = None
        self._header: GgufHeader | None = None
        self._estimate: KvCacheEstimate | None = None
        self.text = QLabel(NO_MODEL)
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.chart = LessonChart()
        self.chart.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        layout.addWidget(self.chart)
        listen_to_engine(client, self)
        if client.loaded is not None:
            self.on_engine_model_loaded(client.loaded)

    def on_engine_model_loaded(self, loaded: Loaded) -> None:
        self._loaded = loaded
        self._estimate = kv_estimate(loaded)
        try:
            self._header = read_gguf_header(loaded.model_path) if self._estimate else None
        except Exception:  # noqa: BLE001 - kv_estimate read it a moment ago; the panel is optional
            self._header = None
        self.show_tokens(0)

    def on_engine_model_unloaded(self) -> None:
        self._loaded = self._estimate = self._header = None
        self.lesson = None
        self.text.setText(NO_MODEL)
        self.chart.setVisible(False)

    def on_engine_token(self, token: Token) -> None:
        if token.n_past // 16 != (self.lesson.tokens if self.lesson else 0) // 16:
            self.show_tokens(token.n_past)  # every 16 tokens: text need not redraw per token

    def on_engine_reply_finished(self, finished: Finished) -> None:
        self.show_tokens(finished.n_past)

    def show_tokens(self, tokens: int) -> None:
        """The lesson with `tokens` in the context."""
        if self._estimate is None or self._header is None:
            if self._loaded is not None:
                self.text.setText("This model's KV arithmetic is not available: no lesson.")
            return
        self.lesson = lesson_for(self._header, self._estimate, tokens)
        self.text.setText(" ".join(lesson_sentences(self.lesson)))
        self.chart.set_bars(lesson_bars(self.lesson))
        self.chart.setVisible(True)


__all__ = ["FA_TILE", "LessonChart", "LessonPanel"]
