"""Live memory samples for the dashboard, read off the GUI thread.

A plain Python thread (app.platform.recording.ProbeSampler) reads the probe at 4-10 Hz and
appends to a ring buffer and to the session's Recording. Nothing is emitted per sample:
the dashboard redraws from the buffer on its own ~10 Hz timer, so a slow probe or a burst
of samples can never queue work onto the GUI thread.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.engine.compare import probe_description
from app.platform.probes import MemoryProbe, detect_probe
from app.platform.recording import MemoryPoint, ProbeSampler, Recording

log = logging.getLogger(__name__)


class MemorySampler(QObject):
    """Samples the memory probe for the engine process.

    Signals:
        probe_changed(object): a probe was chosen (the MemoryProbe; its name, device and
            limits are shown in words).
        recording_reset(object): a new Recording was started (after `new_recording()`).

    Methods: start(pid), stop(), set_pid(pid), mark(kind, label, at), snapshot(),
    new_recording(); properties `probe`, `recording`, `running`, `last_error`.
    """

    probe_changed = Signal(object)
    recording_reset = Signal(object)

    def __init__(
        self, probe: MemoryProbe | None = None, hz: float = 10.0, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        if not 4.0 <= hz <= 10.0:
            raise ValueError("The dashboard samples at 4 to 10 Hz.")
        self._hz = hz
        self._probe = probe
        self._sampler: ProbeSampler | None = None
        self._recording: Recording | None = None

    @property
    def probe(self) -> MemoryProbe:
        """The probe in use (detected on first use: NVML, amdsmi, AMD sysfs, else psutil)."""
        if self._probe is None:
            self._probe = detect_probe()
            self.probe_changed.emit(self._probe)
        return self._probe

    @property
    def recording(self) -> Recording:
        if self._recording is None:
            self._recording = self._new_recording()
        return self._recording

    @property
    def running(self) -> bool:
        return self._sampler is not None and self._sampler.running

    @property
    def last_error(self) -> str:
        return self._sampler.last_error if self._sampler is not None else ""

    def _new_recording(self) -> Recording:
        name, device, limits = probe_description(self.probe)
        return Recording.new(name, device, probe_limits=limits, source="live dashboard")

    def new_recording(self) -> Recording:
        """Start a fresh recording (the ring buffer keeps its recent samples)."""
        self._recording = self._new_recording()
        if self._sampler is not None:
            self._sampler.recording = self._recording
            self._sampler.buffer.clear()  # its times were relative to the old recording
        self.recording_reset.emit(self._recording)
        return self._recording

    def start(self, pid: int | None = None) -> None:
        if self._sampler is None:
            self._sampler = ProbeSampler(self.probe, self.recording, hz=self._hz)
        self._sampler.start(pid)

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()

    def set_pid(self, pid: int | None) -> None:
        if self._sampler is not None:
            self._sampler.set_pid(pid)
        else:
            self.start(pid)

    def mark(self, kind: str, label: str = "", at: float | None = None) -> None:
        """Mark the recording now, or at `at`: a time.monotonic() reading, such as the
        engine's time in an event."""
        rec = self.recording
        rec.mark(kind, label, t=None if at is None else rec.since_start(at))

    def snapshot(self) -> list[MemoryPoint]:
        """The ring buffer's samples, oldest first (a copy; safe while sampling goes on)."""
        if self._sampler is None:
            return []
        for _ in range(3):
            try:
                return list(self._sampler.buffer)
            except RuntimeError:  # appended to while copying; try again
                continue
        return []
