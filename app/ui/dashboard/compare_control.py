"""Runs the Compare section: turns its settings into a run of CompareRunner, keeps the time
estimate true to what is known (the loaded model's load time and last reply, or a finished
comparison's measured speeds; app.engine.compare_estimate does the arithmetic), and shows
the run's progress, result and errors in the panel."""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Sequence
from typing import Any, Unpack

from PySide6.QtCore import QObject

from app.engine.compare_estimate import (
    CompareRates,
    CompareSteps,
    compare_steps,
    rates_from_result,
    rates_from_session,
)
from app.engine.compare_result import CompareResult, run_title
from app.engine.messages import Finished, Loaded
from app.platform.errors import AppError
from app.platform.recording import MemoryPoint, Recording
from app.platform.safe_text import safe_text
from app.services.compare_runner import CompareRunner
from app.services.engine_client import EngineClient
from app.ui.dashboard.compare_panel import ComparePanel, CompareRunSettings
from app.ui.theme import text_colour

log = logging.getLogger(__name__)
NO_MODEL = "Load a model first: the comparison runs on the loaded model."


def peak_measure(probe_name: str, process_seen: bool) -> tuple[str, str]:
    """What a peak of the charted memory is, short and in words: the engine's own memory
    where the probe sees the process (RSS with psutil, its GPU memory otherwise), else the
    whole device's."""
    if not process_seen:
        return "device", f"whole device, {probe_name}"
    if probe_name == "psutil":
        return "RSS", "engine RSS, psutil"
    return "GPU", f"engine's GPU memory, {probe_name}"


def process_seen(points: Sequence[MemoryPoint]) -> bool:
    """Whether the probe saw the engine process during the run. Not just the last point:
    a comparison's last engine has exited by the time its final sample is taken."""
    return any(p.process_bytes is not None for p in points)


class CompareControl(QObject):
    """Fed by the page: `set_model(loaded)`, `reply_finished(finished)`; `start(...)`."""

    def __init__(self, panel: ComparePanel, runner: CompareRunner, client: EngineClient) -> None:
        super().__init__(panel)
        self.panel, self.runner, self.client = panel, runner, client
        self.loaded: Loaded | None = None
        self.last_reply: Finished | None = None
        self._measured: dict[str, CompareRates] = {}  # model path -> its last comparison's
        self.steps: CompareSteps | None = None
        self._run_options: dict[str, Any] = {}  # the settings of the run going on
        runner.progress_changed.connect(panel.set_progress)
        runner.finished.connect(self._on_runner_finished)
        runner.failed.connect(self._on_runner_failed)
        runner.cancelled.connect(self._on_runner_cancelled)
        panel.run_requested.connect(self._on_panel_run_requested)
        panel.settings_changed.connect(self.show_estimate)
        panel.cancel_requested.connect(runner.cancel)

    # ---- what is known about the model --------------------------------------------------

    def set_model(self, loaded: Loaded | None) -> None:
        self.loaded, self.last_reply = loaded, None
        self.panel.set_can_run(loaded is not None, "" if loaded else NO_MODEL)
        if loaded is not None and not self.panel.rows:  # keep a comparison's settings shown
            self.panel.ctx_box.setValue(loaded.n_ctx)
        self.show_estimate()

    def reply_finished(self, finished: Finished) -> None:
        if finished.generated_tokens > 1:
            self.last_reply = finished
            self.show_estimate()

    def rates(self, model_path: str) -> CompareRates:
        if model_path in self._measured:
            return self._measured[model_path]
        try:
            size = os.path.getsize(model_path)
        except OSError:
            size = 0
        loaded = self.loaded if self.loaded and self.loaded.model_path == model_path else None
        reply = self.last_reply if loaded else None
        return rates_from_session(
            size,
            loaded.load_seconds if loaded else None,
            reply.prompt_tokens if reply else 0,
            reply.time_to_first_token_s if reply else 0.0,
            reply.tokens_per_second if reply else 0.0,
        )

    # ---- a run ------------------------------------------------------------------------

    def options(
        self, model_path: str | None = None, **settings: Unpack[CompareRunSettings]
    ) -> tuple[str | None, dict[str, Any]]:
        """The model and run_compare options a comparison would use: `model_path`, else the
        loaded model's; the panel's settings, overridden by `settings` (n_ctx, depth, ...)."""
        # A bag of run_compare's options: each of its readers takes the keys it knows.
        options: dict[str, Any] = {**self.panel.settings(), **settings}
        loaded = self.client.loaded
        path = model_path or (loaded.model_path if loaded else None)
        if loaded is not None:
            options.setdefault("n_gpu_layers", loaded.options.n_gpu_layers)
        n_ctx, depth = options["n_ctx"], options["depth"]
        options.setdefault("n_prompt", max(1, min(512, n_ctx - depth)))
        options.setdefault("n_gen", max(1, min(64, n_ctx - depth)))
        return (None if path is None else str(path)), options

    def show_estimate(self, _settings: object = None) -> None:
        """Before a run: how long the panel's settings should take on the loaded model."""
        if self.runner.running:
            return
        path, options = self.options()
        if path is None:
            self.panel.time_view.show_estimate(None, "")
            return
        try:
            self.steps = compare_steps(self.rates(path), **options)
        except AppError as error:
            self.panel.time_view.show_estimate(None, str(error))
            return
        self.panel.time_view.show_estimate(self.steps)

    def start(
        self, model_path: str | None = None, **settings: Unpack[CompareRunSettings]
    ) -> Recording:
        path, options = self.options(model_path=model_path, **settings)
        if path is None:
            raise AppError(NO_MODEL)
        self.steps = compare_steps(self.rates(path), **options)
        self._run_options = dict(options)
        n_ctx, depth = options.pop("n_ctx"), options.pop("depth")
        self.panel.show_settings(n_ctx, depth, options.get("quality_chunks", 4))
        self.panel.set_running(True)
        self.panel.time_view.start(self.steps)
        return self.runner.start(path, n_ctx, depth, **options)

    def show_opened_run(self, recording: Recording) -> None:
        """Show the results of an opened recording of a comparison (none: nothing to show)."""
        results = recording.metadata.get("results")
        if not results:
            return
        where = {"device": recording.device_name, "probe": recording.probe_name}
        self.panel.result = None
        self.panel.set_rows(results, run_title({**recording.metadata, **where}))
        self.panel.set_peak_measure(
            *peak_measure(
                recording.probe_name or "an unknown probe", process_seen(recording.points)
            )
        )
        self.panel.set_status(
            f"Results of the opened run ({recording.started_at}); "
            "Run comparison measures the loaded model again."
        )

    def _on_panel_run_requested(self, settings: CompareRunSettings) -> None:
        try:
            self.start(**settings)
        except AppError as error:
            self.panel.set_status(str(error))
            self.panel.set_running(False)
            self.panel.time_view.stop("")

    def _on_runner_finished(self, result: CompareResult) -> None:
        panel = self.panel
        panel.set_running(False)
        panel.time_view.finish()
        self._learn(result)
        points = result.recording.points if result.recording is not None else []
        panel.set_peak_measure(*peak_measure(result.probe, process_seen(points)))
        panel.set_result(result, run_title(result.to_dict()))
        notes = " ".join(result.notes())
        panel.set_status(
            f"Measured in {result.seconds:.0f} s. Memory: {result.probe} "
            f"({result.device}). Peak memory is over load and the speed run. {notes}"
        )

    def _learn(self, result: CompareResult) -> None:
        """The next estimate for this model uses this run's measured speeds and step times."""
        steps, measured = self.steps, self.panel.time_view.step_seconds
        if steps is None or len(measured) != len(steps.names):
            return
        try:
            self._measured[result.model_path] = rates_from_result(
                result, steps.names, measured, **self._run_options
            )
        except ZeroDivisionError:  # a run with no speeds measured teaches nothing
            log.info("no speeds in the comparison of %s", result.model_path)

    def _on_runner_failed(self, message: str) -> None:
        self.panel.set_running(False)
        self.panel.time_view.stop("Failed: nothing was measured to the end.")
        # the status is rich text; the message may quote the model file's name
        self.panel.set_status(
            f"<span style='color:{text_colour('error')}'>"
            f"{html.escape(safe_text(message, 1000))}</span>"
        )

    def _on_runner_cancelled(self) -> None:
        self.panel.set_running(False)
        self.panel.time_view.stop("Cancelled.")
        self.panel.set_status("Cancelled; nothing was measured to the end.")
