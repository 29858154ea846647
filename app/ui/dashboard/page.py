"""The Dashboard page: live memory of the engine with load / prompt / generation markers,
the KV cache as the context fills (loaded K/V types next to f16/f16), a warning when the
int8-K kernel is not what runs, and the measured Compare run.

Sampling runs on a thread (app.services.memory_sampler); this page redraws from its ring
buffer on a 10 Hz QTimer, so neither sampling nor streaming tokens can stall the GUI.
Markers of engine work (loaded, prompt, generation, finished) are placed at the times the
engine put in its events, so a busy GUI thread can delay them but never reorder them.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.core.errors import AppError
from app.core.recording import Recording
from app.core.safe_text import safe_text
from app.engine.messages import (
    Finished,
    KernelWarning,
    KernelWarningKind,
    Loaded,
    LoadOptions,
    PromptStarted,
    Token,
)
from app.services.compare_runner import CompareRunner
from app.services.memory_sampler import MemorySampler
from app.ui.dashboard.compare_panel import ComparePanel
from app.ui.dashboard.kv_panel import KvPanel
from app.ui.dashboard.memory_chart import MemoryChart

log = logging.getLogger(__name__)

MIB = 1024 * 1024
SOURCES = ("live", "compare", "file")
SOURCE_LABELS = ("Live engine", "Compare run", "Opened recording")
BANNER_STYLE = (
    "background: #fff4e5; color: #8a4b00; border: 1px solid #f5c07a; "
    "border-radius: 6px; padding: 8px;"
)
WARNING_WORDS: dict[KernelWarningKind, str] = {
    "pair_not_compiled": "this K/V pair is not compiled into llama.cpp's Flash Attention kernels, "
    "so K and V are converted to f16 for attention",
    "converted_to_f16": "llama.cpp converts K and V to f16 for attention",
    "fa_disabled": "Flash Attention is off",
    "attention_on_cpu": "attention runs on the CPU, not on the GPU kernel",
}


def _model_name(path: object) -> str:
    """The model's file name as the dashboard shows it: a file's (or a recording's) text,
    cleaned and cut."""
    return safe_text(Path(str(path)).name, 120)


def _section(title: str) -> QLabel:
    label = QLabel(title)
    label.setStyleSheet("font-size: 15px; font-weight: 600; color: #111827; margin-top: 8px;")
    return label


def _fixed_size(label: QLabel, lines: int) -> None:
    """A label whose text changes twice a second must not change its size hint: a new
    size re-lays the page out and repaints both charts (measured: 50-100 ms stalls)."""
    label.setFixedHeight(label.fontMetrics().lineSpacing() * lines + 6)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)


def _gib_or_mib(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / MIB:,.0f} MiB" if n < 4 * 1024 * MIB else f"{n / MIB / 1024:,.1f} GiB"


class DashboardPage(QWidget):
    """The dashboard for one EngineClient (app.services.engine_client)."""

    def __init__(
        self,
        client: Any,
        sampler: MemorySampler | None = None,
        runner: CompareRunner | None = None,
        parent: QWidget | None = None,
        redraw_hz: float = 10.0,
    ) -> None:
        super().__init__(parent)
        self.client = client
        self.sampler = sampler or MemorySampler(parent=self)
        self.runner = runner or CompareRunner(parent=self)
        self.source = "live"
        self.compare_recording: Recording | None = None
        self.file_recording: Recording | None = None
        self.warnings: tuple[KernelWarning, ...] = ()  # shown in the banner
        self._n_past = 0
        self._tick = 0
        self._awaiting_first_token: str | None = None  # a reply whose prompt has started
        self._build()
        self._connect()

        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(int(1000 / redraw_hz))
        self.redraw_timer.timeout.connect(self._redraw)
        self.redraw_timer.start()
        self.sampler.start(client.engine_pid)
        self._show_probe()
        loaded = getattr(client, "loaded", None)
        if loaded is not None:
            self._on_model_loaded(loaded, mark=False)
        else:
            self.compare.set_can_run(
                False, "Load a model first: the comparison runs on the loaded model."
            )
        self._set_warnings(client.kernel_warnings)

    # ---- layout -----------------------------------------------------------------------

    def _build(self) -> None:
        self.title = QLabel("Memory")
        self.title.setStyleSheet("font-size: 20px; font-weight: 600; color: #111827;")
        self.probe_label = QLabel("")
        self.probe_label.setWordWrap(True)
        self.probe_label.setTextFormat(Qt.TextFormat.RichText)
        self.probe_label.setStyleSheet("color: #4b5563;")
        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet(BANNER_STYLE)
        self.banner.hide()

        self.source_box = QComboBox()
        self.source_box.addItems(SOURCE_LABELS)
        self.open_button = QPushButton("Open recording...")
        self.save_button = QPushButton("Save recording...")
        self.stats_label = QLabel("")
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)
        _fixed_size(self.stats_label, lines=1)
        source_row = QHBoxLayout()
        source_row.addWidget(QLabel("Show"))
        source_row.addWidget(self.source_box)
        source_row.addSpacing(12)
        source_row.addWidget(self.stats_label, 1)
        source_row.addWidget(self.open_button)
        source_row.addWidget(self.save_button)

        self.memory_chart = MemoryChart()
        self.kv_panel = KvPanel()
        self.compare = ComparePanel()

        content = QWidget()
        content.setObjectName("dashboardContent")
        content.setStyleSheet("#dashboardContent { background: #ffffff; }")
        layout = QVBoxLayout(content)
        layout.setContentsMargins(18, 14, 18, 18)
        layout.setSpacing(8)
        layout.addWidget(self.title)
        layout.addWidget(self.probe_label)
        layout.addWidget(self.banner)
        layout.addLayout(source_row)
        layout.addWidget(self.memory_chart, 3)
        layout.addWidget(self._rule())
        layout.addWidget(_section("KV cache as the context fills"))
        layout.addWidget(self.kv_panel, 3)
        layout.addWidget(self._rule())
        layout.addWidget(_section("Compare KV modes - measured, one fresh engine per mode"))
        layout.addWidget(self.compare, 4)
        self.content = content

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

    @staticmethod
    def _rule() -> QFrame:
        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setStyleSheet("color: #e5e7eb;")
        return line

    def _connect(self) -> None:
        c = self.client
        c.loading_started.connect(self._on_loading_started)
        c.model_loaded.connect(self._on_model_loaded)
        c.model_unloaded.connect(self._on_model_unloaded)
        c.prompt_started.connect(self._on_prompt_started)
        c.token_received.connect(self._on_token_received)
        c.reply_finished.connect(self._on_reply_finished)
        c.kernel_warnings_changed.connect(self._set_warnings)
        c.engine_crashed.connect(self._on_engine_crashed)
        self.runner.started.connect(self._on_compare_started)
        self.runner.progress_changed.connect(self.compare.set_progress)
        self.runner.finished.connect(self._on_compare_finished)
        self.runner.failed.connect(self._on_compare_failed)
        self.runner.cancelled.connect(self._on_compare_cancelled)
        self.compare.run_requested.connect(self._on_run_requested)
        self.compare.cancel_requested.connect(self.runner.cancel)
        self.source_box.currentIndexChanged.connect(self._on_source_chosen)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.save_button.clicked.connect(self._on_save_clicked)

    # ---- what is shown ----------------------------------------------------------------

    def shown_recording(self) -> Recording | None:
        if self.source == "compare":
            return self.compare_recording
        if self.source == "file":
            return self.file_recording
        return self.sampler.recording

    def set_source(self, source: str) -> None:
        self.source = source
        index = SOURCES.index(source)
        if self.source_box.currentIndex() != index:
            self.source_box.setCurrentIndex(index)
        self._show_probe()
        self._show_kv()
        self._redraw(force_text=True)

    def _show_kv(self) -> None:
        """The KV panel follows the loaded model live, or the shown run's modes."""
        rec = self.shown_recording()
        if self.source != "live" and rec is not None and self.kv_panel.show_run(rec.metadata):
            return
        if (
            self.kv_panel.loaded is not getattr(self.client, "loaded", None)
            or self.kv_panel.estimate is None
        ):
            self.kv_panel.set_loaded(getattr(self.client, "loaded", None))
            self.kv_panel.set_tokens(self._n_past)

    def _show_probe(self) -> None:
        rec = self.shown_recording()
        if self.source == "live":
            probe = self.sampler.probe
            name, device = getattr(probe, "name", "probe"), getattr(probe, "device", "")
            limits, why = getattr(probe, "limits", ""), getattr(probe, "why", "")
            where = "the engine process" if self.client.engine_pid else "no engine running yet"
            text = (
                f"<b>Live</b>, sampled 10 times a second by <b>{name}</b> ({device}), "
                f"for {where}. {why} <i>{limits}</i>"
            )
        elif rec is not None:
            meta = rec.metadata
            what = "Compare run" if meta.get("source") == "compare" else "Recording"
            model = html.escape(_model_name(meta.get("model", "")))  # this label is rich text
            details = ", ".join(
                x
                for x in (
                    model,
                    f"n_ctx {meta['n_ctx']:,}" if "n_ctx" in meta else "",
                    f"depth {meta['depth']:,}" if "depth" in meta else "",
                )
                if x
            )
            # A recording is a file the user opened: each of its words escaped for this label.
            started, probe_name, device, limits = (
                html.escape(safe_text(v)) if v else ""
                for v in (rec.started_at, rec.probe_name, rec.device_name, rec.probe_limits)
            )
            text = (
                f"<b>{what}</b> of {started or 'an unknown time'}: {details}. "
                f"Memory from <b>{probe_name or 'an unknown probe'}</b>"
                f"{' (' + device + ')' if device else ''}. "
                f"<i>{limits}</i>"
            )
        else:
            text = "Nothing recorded yet."
        self.probe_label.setText(text)

    def _redraw(self, force_text: bool = False) -> None:
        """10 Hz: copy the samples and redraw only what changed."""
        if self.source == "live":
            points = self.sampler.snapshot()
            markers = list(self.sampler.recording.markers)
        else:
            rec = self.shown_recording()
            points = list(rec.points) if rec is not None else []
            markers = list(rec.markers) if rec is not None else []
        self._tick += 1
        slow_tick = self._tick % 5 == 0  # text and the KV "now" line: 2 Hz is plenty
        self.memory_chart.set_points(points)
        if slow_tick or force_text:
            self._update_stats(points)
        self.memory_chart.set_markers(markers)
        if slow_tick or force_text:
            self.kv_panel.set_tokens(self._n_past)

    def _update_stats(self, points: list) -> None:
        if not points:
            self.stats_label.setText("no samples yet")
            return
        now = points[-1]
        peak = max(p.used_bytes for p in points)
        whole = (
            f" &middot; device {_gib_or_mib(now.device_used_bytes)} used "
            f"of {_gib_or_mib(now.total_bytes)}"
            if now.total_bytes
            else ""
        )
        label = "now" if self.source == "live" else "at the end"
        self.stats_label.setText(
            f"{label} <b>{_gib_or_mib(now.used_bytes)}</b> &middot; "
            f"peak <b>{_gib_or_mib(peak)}</b>{whole}"
        )

    # ---- engine events ----------------------------------------------------------------

    def _on_loading_started(self, options: LoadOptions) -> None:
        self.sampler.set_pid(self.client.engine_pid)
        self.sampler.mark("load", Path(options.model_path).name)  # asked for now, by the GUI

    def _on_model_loaded(self, loaded: Loaded, mark: bool = True) -> None:
        self.sampler.set_pid(self.client.engine_pid)
        if mark:
            self.sampler.mark("loaded", "loaded", at=loaded.at)
        self._n_past = 0
        if self.source == "live":
            self.kv_panel.set_loaded(loaded)
        self.compare.set_can_run(True)
        if not self.compare.rows:  # keep the settings of a comparison on screen
            self.compare.ctx_box.setValue(loaded.n_ctx)
        self._show_probe()

    def _on_model_unloaded(self) -> None:
        if self.source == "live":
            self.kv_panel.set_loaded(None)
        self.compare.set_can_run(
            False, "Load a model first: the comparison runs on the loaded model."
        )

    def _on_prompt_started(self, started: PromptStarted) -> None:
        self.sampler.mark("prompt", f"prompt: {started.prompt_tokens:,} tokens", at=started.at)
        self._awaiting_first_token = started.request_id

    def _on_token_received(self, token: Token) -> None:
        if token.request_id == self._awaiting_first_token:
            self._awaiting_first_token = None
            self.sampler.mark("generation", "generation", at=token.at)
        self._n_past = token.n_past

    def _on_reply_finished(self, finished: Finished) -> None:
        self._awaiting_first_token = None
        self.sampler.mark("finished", finished.stop_reason, at=finished.at)
        self._n_past = finished.n_past

    def _on_engine_crashed(self, _message: str) -> None:
        self.sampler.mark("end", "engine crashed")
        self.sampler.set_pid(None)

    def _set_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        """The banner shows llama.cpp's kernel warnings only (the client's
        kernel_warnings_changed); notices about a conversation belong to the chat."""
        self.warnings = tuple(warnings)
        if not self.warnings:
            self.banner.hide()
            return
        words = "; ".join(dict.fromkeys(WARNING_WORDS[w.kind] for w in self.warnings))
        lines = "<br>".join(html.escape(w.text) for w in self.warnings[:4])
        self.banner.setText(
            f"<b>The int8-K kernel is not in use:</b> {words}. The memory saving still holds; "
            f"the speed you see is not the int8-K kernel's.<br><small>{lines}</small>"
        )
        self.banner.show()

    # ---- compare ----------------------------------------------------------------------

    def start_compare(self, model_path: str | None = None, **settings: Any) -> Recording:
        """Start the comparison (on the loaded model unless `model_path` is given);
        settings override the panel's (n_ctx, depth, quality_chunks, n_prompt, n_gen, ...)."""
        options = {**self.compare.settings(), **settings}
        loaded = getattr(self.client, "loaded", None)
        path = model_path or (loaded.model_path if loaded is not None else None)
        if path is None:
            raise AppError("Load a model first: the comparison runs on the loaded model.")
        if loaded is not None:
            options.setdefault("n_gpu_layers", loaded.options.n_gpu_layers)
        n_ctx, depth = options.pop("n_ctx"), options.pop("depth")
        self.compare.show_settings(n_ctx, depth, options.get("quality_chunks", 4))
        options.setdefault("n_prompt", max(1, min(512, n_ctx - depth)))
        options.setdefault("n_gen", max(1, min(64, n_ctx - depth)))
        self.compare.set_running(True)
        return self.runner.start(str(path), n_ctx, depth, **options)

    def _on_run_requested(self, settings: dict) -> None:
        try:
            self.start_compare(**settings)
        except AppError as error:
            self.compare.set_status(str(error))
            self.compare.set_running(False)

    def _on_compare_started(self, recording: Recording) -> None:
        self.compare_recording = recording
        self.set_source("compare")

    def _on_compare_finished(self, result: Any) -> None:
        self.compare.set_running(False)
        title = (
            f"{_model_name(result.model_path)} - n_ctx {result.n_ctx:,}, depth {result.depth:,} - "
            f"{result.device or result.probe}"
        )
        self.compare.set_result(result, title)
        self._show_kv()
        notes = " ".join(result.notes())
        self.compare.set_status(
            f"Measured in {result.seconds:.0f} s. Memory: {result.probe} "
            f"({result.device}). Peak memory is over load and the speed run. {notes}"
        )
        self._show_probe()

    def _on_compare_failed(self, message: str) -> None:
        self.compare.set_running(False)
        # the status is rich text; the message may quote the model file's name
        self.compare.set_status(
            f"<span style='color:#b91c1c'>{html.escape(safe_text(message, 1000))}</span>"
        )

    def _on_compare_cancelled(self) -> None:
        self.compare.set_running(False)
        self.compare.set_status("Cancelled; nothing was measured to the end.")

    # ---- recordings -------------------------------------------------------------------

    def open_recording(self, path: str | Path) -> Recording:
        """Show a saved recording (raises BadInputError for a file that is not one)."""
        recording = Recording.load(path)
        self.file_recording = recording
        results = recording.metadata.get("results")
        if results:
            meta = recording.metadata
            self.compare.result = None
            self.compare.set_rows(
                results,
                f"{_model_name(meta.get('model', ''))} - n_ctx "
                f"{meta.get('n_ctx', '?')}, depth {meta.get('depth', '?')} - "
                f"{recording.device_name or recording.probe_name}",
            )
            self.compare.set_status(
                f"Results of the opened run ({recording.started_at}); "
                "Run comparison measures the loaded model again."
            )
        self.set_source("file")
        return recording

    def save_recording(self, path: str | Path) -> Path:
        recording = self.shown_recording()
        if recording is None:
            raise AppError("There is no recording to save yet.")
        return recording.save(path)

    def _on_source_chosen(self, index: int) -> None:
        if SOURCES[index] != self.source:
            self.set_source(SOURCES[index])

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open memory recording", "", "Recordings (*.json)"
        )
        if path:
            try:
                self.open_recording(path)
            except AppError as error:
                self.compare.set_status(f"<span style='color:#b91c1c'>{error}</span>")

    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save memory recording", "memory.json", "Recordings (*.json)"
        )
        if path:
            try:
                self.save_recording(path)
            except (AppError, OSError) as error:
                self.compare.set_status(f"<span style='color:#b91c1c'>{error}</span>")

    def shutdown(self) -> None:
        """Stop sampling and any comparison (window closing)."""
        self.redraw_timer.stop()
        self.runner.cancel()
        self.sampler.stop()
