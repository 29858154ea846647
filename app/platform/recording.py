"""Memory recordings: probe samples over time plus markers (model load, prompt,
generation, ...), saved as JSON so a run made on one machine (the NVML samples of a GPU
bench) can be re-opened and drawn by the dashboard on another.

    recording = Recording.new(probe_name="nvml", device_name="NVIDIA H200")
    sampler = ProbeSampler(probe, recording, hz=10); sampler.start(pid)
    recording.mark("load", "f16/f16: loading")
    ...
    sampler.stop(); recording.save("run.json"); Recording.load("run.json")

`ProbeSampler` is a plain Python thread, so the CLI bench needs no Qt; the GUI's sampler
service wraps the same class.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from app.platform.errors import BadInputError
from app.platform.probes.base import MemoryProbe, MemorySample

log = logging.getLogger(__name__)

FORMAT = "kvstudio-memory-recording"
VERSION = 1

# Marker kinds the dashboard knows how to draw (others are drawn as plain lines).
MARKER_KINDS = ("mode", "load", "loaded", "prompt", "generation", "finished", "quality", "end")


@dataclass(frozen=True, slots=True)  # slots: an hour at 10 Hz is 36,000 of these
class MemoryPoint:
    """One sample, `t` seconds after the recording started.

    `used_bytes` is the figure charted: the engine's memory on the device the probe
    watches (device memory used on a GPU, the engine's RSS on a CPU-only machine).
    """

    t: float
    used_bytes: int
    total_bytes: int | None = None  # device (or system RAM) capacity
    process_bytes: int | None = None  # the engine process's own share, where reported
    device_used_bytes: int | None = None  # the whole device, all processes


@dataclass(frozen=True)
class Marker:
    t: float
    kind: str  # one of MARKER_KINDS
    label: str = ""


def point_from_sample(sample: MemorySample, t: float, device_fallback: bool = True) -> MemoryPoint:
    """A MemoryPoint from an app.platform.probes MemorySample: the engine process's own usage
    where the probe sees it (NVML per-process, psutil RSS), else the whole device's when
    `device_fallback` (else 0: no engine process to measure)."""
    process, device_used, total = sample.process_used, sample.device_used, sample.device_total
    if process is not None:
        used = process
    else:
        used = device_used if device_fallback else 0
    return MemoryPoint(
        t=t,
        used_bytes=int(used or 0),
        total_bytes=int(total),
        process_bytes=None if process is None else int(process),
        device_used_bytes=int(device_used),
    )


# The last hour keeps every sample (the live dashboard takes 10 a second); older samples are kept
# as one point per THINNED_SECONDS, the highest of that stretch. A session left open for days then
# holds an hour of full detail plus 8,640 points a day, and never loses a peak.
MAX_POINTS = 36_000
THINNING_SLACK = 600  # thin once per minute of samples, not at every sample
FULL_DETAIL_SECONDS = 3600.0
THINNED_SECONDS = 10.0


def _higher(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _merge(a: MemoryPoint, b: MemoryPoint) -> MemoryPoint:
    """One point for two neighbours: at the time of the higher one, every value the higher."""
    top = a if a.used_bytes >= b.used_bytes else b
    return MemoryPoint(
        top.t,
        top.used_bytes,
        top.total_bytes,
        _higher(a.process_bytes, b.process_bytes),
        _higher(a.device_used_bytes, b.device_used_bytes),
    )


class MarkerRecord(TypedDict):
    t: float
    kind: str
    label: str


class SampleColumns(TypedDict):
    """The samples as columns, not one object per sample: a 10 Hz hour is 36,000 samples."""

    t: list[float]
    used_bytes: list[int]
    total_bytes: list[int | None]
    process_bytes: list[int | None]
    device_used_bytes: list[int | None]


class RecordingFile(TypedDict):
    """A recording as its JSON file holds it."""

    format: str  # FORMAT
    version: int
    probe: str
    probe_limits: str
    device: str
    started_at: str
    metadata: dict[str, Any]
    samples: SampleColumns
    markers: list[MarkerRecord]


@dataclass
class Recording:
    probe_name: str
    device_name: str
    started_at: str  # ISO 8601, UTC
    points: list[MemoryPoint] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    probe_limits: str = ""  # what the probe can and cannot see, in words
    _t0: float = field(default_factory=time.monotonic, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _thinned: int = field(default=0, repr=False, compare=False)  # points[:_thinned] are thinned

    @classmethod
    def new(
        cls, probe_name: str, device_name: str, probe_limits: str = "", **metadata: Any
    ) -> Recording:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        return cls(
            probe_name, device_name, started, probe_limits=probe_limits, metadata=dict(metadata)
        )

    def now(self) -> float:
        """Seconds since the recording started (the time axis of points and markers)."""
        return self.since_start(time.monotonic())

    def since_start(self, monotonic: float) -> float:
        """Where a `time.monotonic()` reading lies on the time axis. The clock is the
        machine's, so a reading taken in the engine process (the `at` of its events) lands
        where it happened, however late the GUI handles the event."""
        return monotonic - self._t0

    def add_point(self, point: MemoryPoint) -> None:
        with self._lock:
            self.points.append(point)
            if len(self.points) - self._thinned > MAX_POINTS + THINNING_SLACK:
                self._thin_older_than_an_hour()

    def _thin_older_than_an_hour(self) -> None:
        """Points before the last hour not yet thinned become one per THINNED_SECONDS."""
        cutoff = self.points[-1].t - FULL_DETAIL_SECONDS
        end = self._thinned
        while end < len(self.points) and self.points[end].t < cutoff:
            end += 1
        start = self._thinned
        if start and end > start:  # the last thinned stretch may go on in the new points
            start -= 1
        buckets: dict[int, MemoryPoint] = {}
        for p in self.points[start:end]:
            key = int(p.t // THINNED_SECONDS)
            buckets[key] = _merge(buckets[key], p) if key in buckets else p
        thinned = [buckets[k] for k in sorted(buckets)]
        self.points[start:end] = thinned
        self._thinned = start + len(thinned)

    def mark(self, kind: str, label: str = "", t: float | None = None) -> Marker:
        """Add a marker at `t` seconds (now when None); markers stay sorted by time."""
        marker = Marker(self.now() if t is None else t, kind, label)
        with self._lock:
            self.markers.append(marker)
            self.markers.sort(key=lambda m: m.t)
        return marker

    def peak(self, t_from: float = 0.0, t_to: float = float("inf")) -> MemoryPoint | None:
        """The sample with the most memory between two times, or None."""
        with self._lock:
            window = [p for p in self.points if t_from <= p.t <= t_to]
        return max(window, key=lambda p: p.used_bytes, default=None)

    def peak_device(self, t_from: float = 0.0, t_to: float = float("inf")) -> int | None:
        """The most memory the whole device (all processes) used between two times."""
        with self._lock:
            values = [
                p.device_used_bytes
                for p in self.points
                if t_from <= p.t <= t_to and p.device_used_bytes is not None
            ]
        return max(values, default=None)

    def last_point(self) -> MemoryPoint | None:
        with self._lock:
            return self.points[-1] if self.points else None

    # ---- JSON -------------------------------------------------------------------------

    def to_dict(self) -> RecordingFile:
        with self._lock:
            points, markers = list(self.points), list(self.markers)
        columns: SampleColumns = {
            "t": [round(p.t, 3) for p in points],
            "used_bytes": [p.used_bytes for p in points],
            "total_bytes": [p.total_bytes for p in points],
            "process_bytes": [p.process_bytes for p in points],
            "device_used_bytes": [p.device_used_bytes for p in points],
        }
        return {
            "format": FORMAT,
            "version": VERSION,
            "probe": self.probe_name,
            "probe_limits": self.probe_limits,
            "device": self.device_name,
            "started_at": self.started_at,
            "metadata": self.metadata,
            "samples": columns,
            "markers": [{"t": m.t, "kind": m.kind, "label": m.label} for m in markers],
        }

    @classmethod
    def from_dict(cls, data: object) -> Recording:
        """The recording in `data`, as read from a JSON file (any value: what is not a
        recording raises BadInputError)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BadInputError("This file is not a KV Studio memory recording.")
        if int(data.get("version", 0)) > VERSION:
            raise BadInputError("This memory recording was written by a newer KV Studio.")
        try:
            s = data["samples"]
            n = len(s["t"])

            def column(name: str) -> list[int | None]:
                values: list[int | None] = s.get(name) or [None] * n  # as the file has them
                return values

            points = [
                MemoryPoint(float(t), int(u), tot, proc, dev)
                for t, u, tot, proc, dev in zip(
                    s["t"],
                    s["used_bytes"],
                    column("total_bytes"),
                    column("process_bytes"),
                    column("device_used_bytes"),
                    strict=True,
                )
            ]
            markers = [
                Marker(float(m["t"]), str(m["kind"]), str(m.get("label", "")))
                for m in data.get("markers", [])
            ]
        except (KeyError, TypeError, ValueError) as error:
            raise BadInputError(f"The memory recording is damaged ({error}).") from None
        return cls(
            probe_name=str(data.get("probe", "")),
            device_name=str(data.get("device", "")),
            started_at=str(data.get("started_at", "")),
            points=points,
            markers=markers,
            metadata=dict(data.get("metadata") or {}),
            probe_limits=str(data.get("probe_limits", "")),
        )

    def save(self, path: str | Path) -> Path:
        """Write the recording as JSON (atomically: a temp file renamed into place)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), separators=(",", ":")), encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInputError(f"No recording at {path}.") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise BadInputError(
                f"{path.name} is not a readable memory recording ({error})."
            ) from None
        return cls.from_dict(data)


class ProbeSampler:
    """Samples `probe.sample(pid)` on a daemon thread at `hz`, appending to a Recording
    and to a ring buffer (`buffer`, newest last) that a GUI can redraw from.

    A probe error is logged once and sampling goes on (a process between restarts has
    no pid to read); `last_error` keeps the sentence.
    """

    def __init__(
        self,
        probe: MemoryProbe,
        recording: Recording | None = None,
        hz: float = 10.0,
        buffer_size: int = 6000,
    ) -> None:
        if not 0.5 <= hz <= 50:
            raise BadInputError("The sampling rate must be between 0.5 and 50 per second.")
        self.probe = probe
        self.recording = recording
        self.interval = 1.0 / hz
        self.buffer: deque[MemoryPoint] = deque(maxlen=buffer_size)
        self.pid: int | None = None
        self.last_error = ""
        self._process_seen = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    def now(self) -> float:
        return self.recording.now() if self.recording is not None else time.monotonic() - self._t0

    def set_pid(self, pid: int | None) -> None:
        self.pid = pid  # an int assignment: atomic for the sampling thread

    def start(self, pid: int | None = None) -> None:
        if pid is not None:
            self.pid = pid
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def sample_once(self) -> MemoryPoint | None:
        """Take one sample now (on the caller's thread); None if the probe failed."""
        try:
            sample = self.probe.sample(self.pid)
        except Exception as error:  # noqa: BLE001 - a failing probe must never stop the run it watches
            message = str(error) or type(error).__name__
            if message != self.last_error:
                log.warning("memory probe failed: %s", message)
                self.last_error = message
            return None
        # Once the probe has shown per-process figures (or on a CPU, where RAM used by
        # everything is no stand-in for the engine), "no process figure" means no engine.
        if sample.process_used is not None:
            self._process_seen = True
        fallback = not self._process_seen and self.probe.kind != "cpu"
        point = point_from_sample(sample, self.now(), fallback)
        self.buffer.append(point)
        if self.recording is not None:
            self.recording.add_point(point)
        return point

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow probe): skip ahead rather than burst
                next_at = time.monotonic()
                delay = 0
            self._stop.wait(delay)
