"""Runs the KV mode comparison (app.engine.compare) off the GUI thread.

The comparison spawns one engine process per mode and blocks for minutes, so it runs on a
plain Python thread; progress and the result reach the GUI thread as queued signals.
"""

from __future__ import annotations

import logging
import threading
from typing import Unpack

from PySide6.QtCore import QObject, Signal

from app.engine.advisor_measure import remember_comparison
from app.engine.compare import CompareOptions, run_compare
from app.engine.compare_one_mode import CompareCancelledError
from app.platform.errors import AppError
from app.platform.probes import MemoryProbe
from app.platform.recording import Recording

log = logging.getLogger(__name__)


class CompareRunner(QObject):
    """One comparison at a time.

    Signals:
        started(object): the run began; the Recording it fills (drawn live).
        progress_changed(float, str): fraction done (0..1) and what it is doing, in words.
        finished(object): the CompareResult.
        failed(str): one sentence for the user.
        cancelled(): the user cancelled; nothing was measured to the end.

    Methods: start(model_path, n_ctx, depth, **options), cancel(); property `running`.
    """

    started = Signal(object)
    progress_changed = Signal(float, str)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, probe: MemoryProbe | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._probe = probe
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(
        self, model_path: str, n_ctx: int, depth: int, **options: Unpack[CompareOptions]
    ) -> Recording:
        """Start a comparison (options go to run_compare: modes, n_gpu_layers, n_prompt,
        n_gen, quality_chunks, chunk_tokens, reference_text, n_threads).
        Raises AppError when one is already running."""
        if self.running:
            raise AppError("A comparison is already running.")
        self._cancel = threading.Event()
        recording = Recording.new("", "")
        self._thread = threading.Thread(
            target=self._run,
            args=(model_path, n_ctx, depth, options, recording, self._cancel),
            name="compare-runner",
            daemon=True,
        )
        self._thread.start()
        self.started.emit(recording)
        return recording

    def cancel(self) -> None:
        """Stop between steps (the engine in use is cancelled and stopped)."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(
        self,
        model_path: str,
        n_ctx: int,
        depth: int,
        options: CompareOptions,
        recording: Recording,
        cancel: threading.Event,
    ) -> None:
        try:
            result = run_compare(
                model_path,
                n_ctx=n_ctx,
                depth=depth,
                progress_cb=self.progress_changed.emit,
                cancel=cancel,
                probe=self._probe,
                recording=recording,
                load_advice="lower the context in the Compare settings",
                **options,
            )
        except CompareCancelledError:
            self.cancelled.emit()
        except AppError as error:
            self.failed.emit(str(error))
        except Exception as error:  # the thread's boundary: log it, tell the user in words
            log.exception("comparison failed")
            self.failed.emit(f"The comparison failed: {error}")
        else:
            remember_comparison(result)  # the KV advisor's measurements, for this model file
            self.finished.emit(result)
