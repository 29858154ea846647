"""The Compare run's time: an estimate of its duration before it starts, then a progress
bar with the time left, moved only by the run's own step events (CompareRunner's
progress_changed), and at the end how long it took next to what was estimated."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from app.engine.compare_estimate import CompareSteps
from app.platform.units import duration

BAR_STEPS = 1000


class CompareProgress(QWidget):
    """`show_estimate(steps)` before a run, `start(steps)`, `step_reported(fraction)` per
    progress event, `finish()`/`stop()`. Shows text in `label` and the bar `bar`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.steps: CompareSteps | None = None
        self.done_steps = 0
        self.seconds_left: float | None = None
        self.step_seconds: list[float] = []  # measured, one per step done
        self._started = 0.0
        self._last_step_end = 0.0
        self.bar = QProgressBar()
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setTextVisible(True)
        self.bar.setFormat("")
        self.bar.setMaximumWidth(360)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setObjectName("dashboardNote")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.label, 2)

    def show_estimate(self, steps: CompareSteps | None, why_not: str = "") -> None:
        """Before a run: how long these settings should take (or why no estimate)."""
        self.steps = steps
        self.bar.setValue(0)  # the last run's "done" would read as this one's
        self.bar.setFormat("")
        if steps is None:
            self.label.setText(why_not)
            return
        self.label.setText(
            f"Estimated time: about {duration(steps.total_seconds)} "
            f"({len(steps.names)} steps; an estimate from {steps.rates.source})."
        )

    def start(self, steps: CompareSteps) -> None:
        self.steps = steps
        self.done_steps = 0
        self.step_seconds = []
        self._started = self._last_step_end = time.monotonic()
        self.seconds_left = steps.total_seconds
        self.bar.setValue(0)
        self.bar.setFormat(f"about {duration(self.seconds_left)} left")
        self.label.setText(
            f"Started; estimated about {duration(steps.total_seconds)} in all (an estimate)."
        )

    def step_reported(self, fraction: float) -> None:
        """A progress event of the run: `fraction` is steps done over all steps."""
        steps = self.steps
        if steps is None:
            return
        done = min(len(steps.seconds), round(fraction * len(steps.seconds)))
        if done <= self.done_steps:
            return  # a step began; only a step's end moves the bar
        now = time.monotonic()
        self.step_seconds += [now - self._last_step_end] + [0.0] * (done - self.done_steps - 1)
        self._last_step_end = now
        self.done_steps = done
        self.seconds_left = steps.seconds_left(done, now - self._started)
        self.bar.setValue(round(steps.done_fraction(done) * BAR_STEPS))
        left = f"about {duration(self.seconds_left)} left" if done < len(steps.seconds) else "done"
        self.bar.setFormat(f"{done} of {len(steps.seconds)} steps - {left}")
        self.label.setText(f"{left[0].upper()}{left[1:]} (an estimate from the steps so far).")

    def finish(self) -> float:
        """The run ended well; returns the seconds it took."""
        took = time.monotonic() - self._started
        estimated = self.steps.total_seconds if self.steps is not None else None
        self.bar.setValue(BAR_STEPS)
        self.bar.setFormat("done")
        self.seconds_left = 0.0
        self.label.setText(
            f"Took {duration(took)}"
            + (f" (estimated {duration(estimated)})." if estimated is not None else ".")
        )
        return took

    def stop(self, words: str) -> None:
        """The run failed or was cancelled."""
        self.seconds_left = None
        self.bar.setFormat("")
        self.label.setText(words)
