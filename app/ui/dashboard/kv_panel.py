"""KV cache as the context fills: bytes holding tokens with the loaded K/V types next to
what an f16/f16 cache would hold for the same tokens, the saving now, and the allocated
totals (llama.cpp's own log for the loaded mode, app.kv.kv_cache for f16/f16).

The chart is this widget; its lines of figures are `info`, a separate widget the page lays
out under both charts, where a line has the page's whole width."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.engine.messages import Loaded
from app.kv.kv_cache import CacheSize, KvCacheEstimate, kv_cache_bytes
from app.kv.kv_summary import KvSummary, kv_mib, summarize
from app.kv.kv_types import FP16_KV_MODE
from app.models.gguf_read import read_gguf_header
from app.platform import units as fmt
from app.ui.dashboard.bar_chart import MODE_COLORS
from app.ui.dashboard.chart_theme import is_palette_change, paint_chart
from app.ui.dashboard.memory_chart import AXIS_WIDTH, CHART_HINT_HEIGHT
from app.ui.theme import text_colour

log = logging.getLogger(__name__)

MIB = 1024 * 1024
CURVE_POINTS = 160


_mib = kv_mib


def kv_estimate(loaded: Loaded) -> KvCacheEstimate | None:
    """app.kv.kv_cache's estimate for a load (None when the arithmetic fails: the log's
    figures still show)."""
    try:
        o = loaded.options
        return kv_cache_bytes(
            read_gguf_header(loaded.model_path),
            o.n_ctx,
            o.kv.label,
            n_ubatch=o.n_ubatch,
            swa_full=o.swa_full,
            n_batch=o.n_batch,
            flash_attn=o.flash_attn,
        )
    except Exception as error:  # noqa: BLE001 - the chart is optional; the log figures still show
        log.warning("KV arithmetic unavailable for %s: %s", loaded.model_path, error)
        return None


def loaded_summary(loaded: Loaded, estimate: KvCacheEstimate | None = None) -> KvSummary:
    """A load's KV figures: llama.cpp's logged allocation next to the arithmetic's f16/f16."""
    mode = loaded.options.kv
    allocated = sum(c.total_bytes for c in loaded.kv_caches)
    return summarize(
        loaded.n_ctx, mode, allocated, estimate if estimate is not None else kv_estimate(loaded)
    )


class _KvPlot(pg.PlotWidget):
    def sizeHint(self) -> QSize:
        return QSize(400, CHART_HINT_HEIGHT)  # as the memory chart's: both fit 640 px tall

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if is_palette_change(event):  # a theme switch
            paint_chart(self)


class KvPanel(QWidget):
    """`set_loaded(loaded)` when a model loads, `set_tokens(n_past)` as the context fills."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.estimate: KvCacheEstimate | None = None  # the loaded model's KV arithmetic
        self.loaded: Loaded | None = None
        self.n_tokens = 0
        self._run_curves: list[pg.PlotDataItem] = []
        self.plot = _KvPlot(background=text_colour("chart"))
        self.plot.setMinimumHeight(160)
        item = self.plot.getPlotItem()
        # No grid: pyqtgraph draws it with the axes, so every change inside the plot would
        # repaint both axes' text (most of a frame's cost).
        item.setLabel("left", "KV in use", units="MiB")
        item.setLabel("bottom", "tokens in the context")
        item.getAxis("left").enableAutoSIPrefix(False)
        # A fixed width: sized to its tick labels, the axis widens when a label gains a digit,
        # which resizes the plot and regenerates every axis of the chart in one GUI pass.
        item.getAxis("left").setWidth(AXIS_WIDTH)
        item.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        legend = item.addLegend(offset=(10, 5), labelTextColor=text_colour("text"))
        # Width-1 solid pens: a wide or dashed pen makes each repaint tens of ms.
        self.fp16_curve = self.plot.plot(
            [], [], pen=pg.mkPen("#8a94a6", width=1), name=FP16_KV_MODE.label
        )
        self.mode_curve = self.plot.plot(
            [], [], pen=pg.mkPen("#2f7ed8", width=1), name="loaded K/V"
        )
        self.now_line = pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("#e67e22", width=1))
        self.plot.addItem(self.now_line, ignoreBounds=True)
        # Ranges are set once per model: moving the "now" marker must not re-range (and
        # so repaint) the whole plot.
        item.getViewBox().disableAutoRange()
        self._legend = legend
        paint_chart(self.plot)

        self.now_label = QLabel(
            "No model loaded: this chart follows the model loaded in the app "
            "(a saved run's KV figures are in the Compare table)."
        )
        self.now_label.setWordWrap(True)
        self.now_label.setTextFormat(Qt.TextFormat.RichText)
        self.alloc_label = QLabel("")
        self.alloc_label.setWordWrap(True)
        self.alloc_label.setTextFormat(Qt.TextFormat.RichText)
        self.caches_label = QLabel("")
        self.caches_label.setWordWrap(True)
        self.caches_label.setObjectName("dashboardNote")
        # Fixed sizes: text changing twice a second must not re-lay out the page (each
        # relayout repaints the charts).
        for label, lines in ((self.now_label, 1), (self.alloc_label, 1), (self.caches_label, 2)):
            label.setFixedHeight(label.fontMetrics().lineSpacing() * lines + 6)
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.info = QWidget()
        info = QGridLayout(self.info)
        info.setContentsMargins(0, 0, 0, 0)
        info.addWidget(self.now_label, 0, 0)
        info.addWidget(self.alloc_label, 1, 0)
        info.addWidget(self.caches_label, 2, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot.setVisible(False)  # until a model is loaded or a run is shown
        layout.addWidget(self.plot)

    # ---- inputs -----------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        settled = getattr(self, "loaded", None) is not None and not self._run_curves
        if settled and is_palette_change(event):
            self._update_labels()  # the saving's colour is the shown look's

    def set_loaded(self, loaded: Loaded | None) -> None:
        self.loaded = loaded
        self.estimate = None
        self.n_tokens = 0
        self._clear_run_curves()
        self.now_line.setVisible(True)
        self.plot.setVisible(loaded is not None)
        if loaded is None:
            self.mode_curve.setData([], [])
            self.fp16_curve.setData([], [])
            self.now_label.setText(
                "No model loaded: this chart follows the model loaded in the app "
                "(a saved run's KV figures are in the Compare table)."
            )
            self.alloc_label.setText("")
            self.caches_label.setText("")
            return
        self.estimate = kv_estimate(loaded)
        mode = loaded.options.kv.label
        self._legend.removeItem(self.mode_curve)
        self._legend.removeItem(self.fp16_curve)
        self._legend.addItem(self.fp16_curve, FP16_KV_MODE.label)
        self._legend.addItem(self.mode_curve, mode)
        self._draw_curves()
        self._update_labels()

    def show_run(self, metadata: dict[str, Any]) -> bool:
        """Draw a saved or running comparison's KV curves, one per mode (from the
        recording's `kv_estimates` and `results`); False when it has none."""

        estimates = metadata.get("kv_estimates") or {}
        if not estimates:
            return False
        self.loaded, self.estimate = None, None
        self._clear_run_curves()
        self.mode_curve.setData([], [])
        self.fp16_curve.setData([], [])
        self.now_line.setVisible(False)
        self.plot.setVisible(True)
        top = 0.0
        for i, (label, est) in enumerate(estimates.items()):
            caches = [CacheSize(**c) for c in est["caches"]]
            n_ctx, n_ubatch = int(est["n_ctx"]), int(est["n_ubatch"])
            xs = np.unique(np.linspace(0, n_ctx, CURVE_POINTS).astype(int))
            ys = [
                sum(
                    c.cells_in_use(int(n), n_ubatch) * (c.k_bytes_per_cell + c.v_bytes_per_cell)
                    for c in caches
                )
                / MIB
                for n in xs
            ]
            top = max(top, max(ys))
            curve = self.plot.plot(
                xs, ys, pen=pg.mkPen(MODE_COLORS[i % len(MODE_COLORS)], width=1), name=label
            )
            self._run_curves.append(curve)
            self.plot.getPlotItem().setXRange(0, n_ctx, padding=0.02)
        self.plot.getPlotItem().setYRange(0, top * 1.08, padding=0)
        self._legend.removeItem(self.mode_curve)
        self._legend.removeItem(self.fp16_curve)

        rows = {r["mode"]: r for r in metadata.get("results") or []}
        parts = []
        for label in estimates:
            row = rows.get(label)
            if row is None:
                continue
            saving = row.get("kv_saving_mib")
            pct = row.get("kv_saving_percent")
            digits = 0 if row["kv_allocated_mib"] >= 100 else 1
            extra = (
                f" (<b style='color:{text_colour('good')}'>"
                f"-{fmt.mib(saving, digits)}, -{pct:.1f}%</b>)"
                if saving
                else ""
            )
            parts.append(f"{label} <b>{fmt.mib(row['kv_allocated_mib'], digits)}</b>{extra}")
        n_ctx = metadata.get("n_ctx", 0)
        self.now_label.setText(
            f"This run's KV bytes as the context fills, per mode (computed from the GGUF header; "
            f"the allocation below is llama.cpp's own log), n_ctx {n_ctx:,}."
        )
        self.alloc_label.setText(
            "Allocated: " + " &middot; ".join(parts) if parts else "Allocated: not measured yet."
        )
        self.caches_label.setText("")
        return True

    def _clear_run_curves(self) -> None:
        for curve in self._run_curves:
            self._legend.removeItem(curve)
            self.plot.removeItem(curve)
        self._run_curves = []

    def set_tokens(self, n_tokens: int) -> None:
        if n_tokens == self.n_tokens or self.loaded is None:
            return
        self.n_tokens = n_tokens
        self._update_labels()

    # ---- drawing ------------------------------------------------------------------------

    def _draw_curves(self) -> None:
        est = self.estimate
        if est is None:
            return
        n_ctx = est.n_ctx_seq
        xs = np.unique(np.linspace(0, n_ctx, CURVE_POINTS).astype(int))
        usage = [est.bytes_in_use(int(n)) for n in xs]
        self.mode_curve.setData(xs, [u.bytes / MIB for u in usage])
        self.fp16_curve.setData(xs, [u.fp16_bytes / MIB for u in usage])
        top = max(max(u.fp16_bytes for u in usage) / MIB, 1e-3)
        self.plot.getPlotItem().setXRange(0, n_ctx, padding=0.02)
        self.plot.getPlotItem().setYRange(0, top * 1.08, padding=0)

    @property
    def summary(self) -> KvSummary | None:
        """The loaded model's KV figures (None with no model loaded): the page's sentence
        and this panel's "Allocated" line are both written from it."""
        if self.loaded is None:
            return None
        if self.estimate is None:
            mode = self.loaded.options.kv
            allocated = sum(c.total_bytes for c in self.loaded.kv_caches)
            return summarize(self.loaded.n_ctx, mode, allocated, None)
        return loaded_summary(self.loaded, self.estimate)

    def _update_labels(self) -> None:
        loaded, summary = self.loaded, self.summary
        if loaded is None or summary is None:
            return
        mode = summary.mode.label
        est = self.estimate
        self.now_line.setValue(self.n_tokens)
        if est is not None and summary.fp16_bytes is not None:
            usage = est.bytes_in_use(self.n_tokens)
            saving = usage.fp16_bytes - usage.bytes
            pct = 100 * saving / usage.fp16_bytes if usage.fp16_bytes else 0.0
            self.now_label.setText(
                f"<b>{self.n_tokens:,} tokens</b> in the context: KV in use "
                f"<b>{_mib(usage.bytes)}</b> with {mode}, {_mib(usage.fp16_bytes)} at f16/f16 "
                f"- saving <b style='color:{text_colour('good')}'>{_mib(saving)} ({pct:.1f}%)</b>."
            )
            self.alloc_label.setText(
                f"Allocated for {summary.n_ctx:,} tokens: <b>{_mib(summary.allocated_bytes)}</b> "
                f"with {mode} (llama.cpp's log) vs {_mib(summary.fp16_bytes)} at f16/f16 "
                f"(computed) - <b style='color:{text_colour('good')}'>"
                f"{_mib(summary.saving_bytes or 0)} "
                f"({summary.saving_percent:.1f}%)</b> less."
            )
        else:
            self.now_label.setText(f"<b>{self.n_tokens:,} tokens</b> in the context.")
            self.alloc_label.setText(
                f"Allocated for {summary.n_ctx:,} tokens: <b>{_mib(summary.allocated_bytes)}</b> "
                f"with {mode} (llama.cpp's log); the f16/f16 figure needs the KV arithmetic, "
                "which failed."
            )
        self.caches_label.setText(
            "   ".join(
                f"{'sliding-window' if c.swa else 'global'} cache: "
                f"{c.cells:,} cells x {c.layers} layers, "
                f"K ({c.k_type}) {fmt.mib(c.k_mib)}, V ({c.v_type}) {fmt.mib(c.v_mib)}"
                for c in loaded.kv_caches
            )
        )
