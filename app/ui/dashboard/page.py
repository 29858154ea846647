"""The Dashboard page: one sentence about the loaded model's KV cache (details behind a
toggle), live memory of the engine with load / prompt / generation markers beside the KV
cache as the context fills (loaded K/V types next to f16/f16), a warning when the int8-K
kernel is not what runs, the measured Compare run with its estimated time, and below it
the lesson (why Flash Attention and the 8-bit K cache matter, in this model's numbers).

Sampling runs on a thread (app.services.memory_sampler); this page redraws from its ring
buffer on a 10 Hz QTimer, so neither sampling nor streaming tokens can stall the GUI.
Markers of engine work (loaded, prompt, generation, finished) are placed at the times the
engine put in its events, so a busy GUI thread can delay them but never reorder them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Unpack

from PySide6.QtCore import QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.messages import Finished, KernelWarning, Loaded, PromptStarted, Token
from app.kv.kv_summary import NO_MODEL_SENTENCE, kv_sentence
from app.load.profile import LoadProfile
from app.platform.errors import AppError
from app.platform.recording import MemoryPoint, Recording
from app.services.compare_runner import CompareRunner
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.services.memory_sampler import MemorySampler
from app.ui.dashboard.chart_columns import ChartColumns, section_title
from app.ui.dashboard.compare_control import CompareControl
from app.ui.dashboard.compare_panel import ComparePanel, CompareRunSettings
from app.ui.dashboard.devices_panel import DevicesPanel
from app.ui.dashboard.header import DashboardHeader, live_details, recording_details
from app.ui.dashboard.kernel_banner import KernelBanner
from app.ui.dashboard.kv_panel import KvPanel, kv_estimate, loaded_summary
from app.ui.dashboard.lesson_panel import LessonPanel
from app.ui.dashboard.memory_chart import MemoryChart
from app.ui.dashboard.source_row import SourceRow
from app.ui.theme import text_colour

log = logging.getLogger(__name__)


class DashboardPage(QWidget):
    """The dashboard for one EngineClient (app.services.engine_client)."""

    def __init__(
        self,
        client: EngineClient,
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
        loaded = client.loaded
        if loaded is not None:
            self.on_engine_model_loaded(loaded, mark=False)
        else:
            self.compare_control.set_model(None)
            self._sentence_from(None)
        self.on_engine_kernel_warnings(client.kernel_warnings)

    # ---- layout -----------------------------------------------------------------------

    def _build(self) -> None:
        self.header = DashboardHeader()
        self.title = self.header.title
        self.probe_label = self.header.details
        self.banner = KernelBanner()

        self.source_row = SourceRow()
        self.source_box = self.source_row.box
        self.stats_label = self.source_row.stats
        self.open_button = QPushButton("Open recording...")
        self.save_button = QPushButton("Save recording...")
        # Beside Details, so the stats line has the page's width at 1024 px.
        self.header.buttons.addWidget(self.open_button)
        self.header.buttons.addWidget(self.save_button)

        self.memory_chart = MemoryChart()
        self.kv_panel = KvPanel()
        self.kv_panel.caches_label.hide()  # a detail: shown with the header's Details
        self.devices_panel = DevicesPanel()  # only for a model split across workers
        self.compare = ComparePanel()
        self.compare_control = CompareControl(self.compare, self.runner, self.client)

        self.charts = ChartColumns(
            (
                ("Engine memory over time", self.memory_chart),
                ("KV cache as the context fills", self.kv_panel),
            )
        )

        content = QWidget()
        content.setObjectName("dashboardContent")
        layout = QVBoxLayout(content)
        layout.setContentsMargins(18, 10, 18, 18)
        layout.setSpacing(6)
        layout.addWidget(self.header)
        layout.addWidget(self.banner)
        layout.addWidget(self.source_row)
        layout.addLayout(self.charts, 3)
        layout.addWidget(self.devices_panel)
        layout.addWidget(self.kv_panel.info)
        layout.addWidget(self._rule())
        layout.addWidget(section_title("Compare KV modes - measured, one fresh engine per mode"))
        layout.addWidget(self.compare, 2)
        # Last, below the fold at 1024x640: Run comparison stays on screen on arrival.
        self.lesson = LessonPanel(self.client)  # why FA and int8-K matter, in this model's numbers
        layout.addWidget(self._rule())
        self.lesson_title = section_title("Why Flash Attention and the 8-bit K cache matter")
        layout.addWidget(self.lesson_title)
        layout.addWidget(self.lesson)
        self.content = content

        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll_area)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self.charts.fit_width(event.size().width())
        super().resizeEvent(event)

    @staticmethod
    def _rule() -> QFrame:
        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setStyleSheet("color: #e5e7eb;")
        return line

    def _connect(self) -> None:
        c = self.client
        listen_to_engine(c, self)
        self.runner.started.connect(self._on_compare_started)
        self.header.details_toggled.connect(self.kv_panel.caches_label.setVisible)
        self.runner.finished.connect(self._on_compare_finished)
        self.source_row.source_chosen.connect(self._on_source_chosen)
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
        self.source_row.show_source(source)
        self._show_probe()
        self._show_kv()
        self._redraw(force_text=True)

    def _show_kv(self) -> None:
        """The KV panel follows the loaded model live, or the shown run's modes."""
        rec = self.shown_recording()
        if self.source != "live" and rec is not None and self.kv_panel.show_run(rec.metadata):
            return
        if self.kv_panel.loaded is not self.client.loaded or self.kv_panel.estimate is None:
            self.kv_panel.set_loaded(self.client.loaded)
            self.kv_panel.set_tokens(self._n_past)

    def _show_probe(self) -> None:
        rec = self.shown_recording()
        if self.source == "live":
            text = live_details(self.sampler.probe, bool(self.client.engine_pid))
        else:
            text = recording_details(rec) if rec is not None else "Nothing recorded yet."
        self.header.set_details(text)

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

    def _update_stats(self, points: list[MemoryPoint]) -> None:
        rec = self.shown_recording()
        probe_name = (rec.probe_name if rec is not None else "") or str(
            getattr(self.sampler.probe, "name", "probe")
        )
        self.source_row.show_stats(points, self.source == "live", probe_name)

    # ---- engine events ----------------------------------------------------------------

    def on_engine_loading_started(self, options: LoadProfile) -> None:
        self.sampler.set_pid(self.client.engine_pid)
        self.sampler.mark("load", Path(options.model_path).name)  # asked for now, by the GUI

    def on_engine_model_loaded(self, loaded: Loaded, mark: bool = True) -> None:
        self.sampler.set_pid(self.client.engine_pid)
        if mark:
            self.sampler.mark("loaded", "loaded", at=loaded.at)
        self._n_past = 0
        if self.source == "live":
            self.kv_panel.set_loaded(loaded)
        same = self.kv_panel.loaded is loaded  # its estimate is this model's: not read twice
        self.devices_panel.set_loaded(
            loaded, self.kv_panel.estimate if same else kv_estimate(loaded)
        )
        self._sentence_from(loaded)
        self.compare_control.set_model(loaded)
        self._show_probe()

    def _sentence_from(self, loaded: Loaded | None) -> None:
        # The KV panel's own figures when it shows this model (it may be showing a run).
        summary = self.kv_panel.summary if self.kv_panel.loaded is loaded else None
        if loaded is not None and summary is None:
            summary = loaded_summary(loaded)
        self.header.set_sentence(kv_sentence(summary) if summary else NO_MODEL_SENTENCE)

    def on_engine_model_unloaded(self) -> None:
        if self.source == "live":
            self.kv_panel.set_loaded(None)
        self.devices_panel.set_loaded(None)
        self._sentence_from(None)
        self.compare_control.set_model(None)

    def on_engine_prompt_started(self, started: PromptStarted) -> None:
        self.sampler.mark("prompt", f"prompt: {started.prompt_tokens:,} tokens", at=started.at)
        self._awaiting_first_token = started.request_id

    def on_engine_token(self, token: Token) -> None:
        if token.request_id == self._awaiting_first_token:
            self._awaiting_first_token = None
            self.sampler.mark("generation", "generation", at=token.at)
        self._n_past = token.n_past

    def on_engine_reply_finished(self, finished: Finished) -> None:
        self._awaiting_first_token = None
        self.sampler.mark("finished", finished.stop_reason, at=finished.at)
        self._n_past = finished.n_past
        self.compare_control.reply_finished(finished)

    def on_engine_crashed(self, _message: str) -> None:
        self.sampler.mark("end", "engine crashed")
        self.sampler.set_pid(None)

    def on_engine_kernel_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        self.warnings = tuple(warnings)
        self.banner.set_warnings(self.warnings)

    # ---- compare ----------------------------------------------------------------------

    def start_compare(
        self, model_path: str | None = None, **settings: Unpack[CompareRunSettings]
    ) -> Recording:
        """Start the comparison (on the loaded model unless `model_path` is given);
        settings override the panel's (n_ctx, depth, quality_chunks, n_prompt, n_gen, ...)."""
        return self.compare_control.start(model_path, **settings)

    def _on_compare_started(self, recording: Recording) -> None:
        self.compare_recording = recording
        self.set_source("compare")

    def _on_compare_finished(self, _result: object) -> None:
        self._show_kv()
        self._show_probe()

    # ---- recordings -------------------------------------------------------------------

    def open_recording(self, path: str | Path) -> Recording:
        """Show a saved recording (raises BadInputError for a file that is not one)."""
        recording = Recording.load(path)
        self.file_recording = recording
        self.compare_control.show_opened_run(recording)
        self.set_source("file")
        return recording

    def save_recording(self, path: str | Path) -> Path:
        recording = self.shown_recording()
        if recording is None:
            raise AppError("There is no recording to save yet.")
        return recording.save(path)

    def _on_source_chosen(self, source: str) -> None:
        if source != self.source:
            self.set_source(source)

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open memory recording", "", "Recordings (*.json)"
        )
        if path:
            try:
                self.open_recording(path)
            except AppError as error:
                self.compare.set_status(
                    f"<span style='color:{text_colour('error')}'>{error}</span>"
                )

    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save memory recording", "memory.json", "Recordings (*.json)"
        )
        if path:
            try:
                self.save_recording(path)
            except (AppError, OSError) as error:
                self.compare.set_status(
                    f"<span style='color:{text_colour('error')}'>{error}</span>"
                )

    def shutdown(self) -> None:
        """Stop sampling and any comparison (window closing)."""
        self.redraw_timer.stop()
        self.runner.cancel()
        self.sampler.stop()
