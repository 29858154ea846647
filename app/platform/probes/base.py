"""What every memory probe returns, and the interface they share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MemorySample:
    """One reading. Bytes throughout; `time` is time.time() (seconds since the epoch)."""

    time: float
    device_used: int  # the whole device (VRAM), or system RAM for the psutil probe
    device_total: int
    process_used: int | None = None  # the given process's own usage, where the probe can see it
    gtt_used: int | None = None  # AMD: system memory mapped for the GPU (GTT)
    gtt_total: int | None = None

    @property
    def device_free(self) -> int:
        return max(0, self.device_total - self.device_used)

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "time": self.time,
            "device_used": self.device_used,
            "device_total": self.device_total,
            "process_used": self.process_used,
            "gtt_used": self.gtt_used,
            "gtt_total": self.gtt_total,
        }


@dataclass
class MemoryProbe:
    """A source of memory readings. Subclasses set `name`, `limits` and implement `sample`.

    `name`: what it reads ("NVML", "AMD sysfs", ...); `limits`: one sentence on what it
    cannot see, shown next to the chart; `device`: the device's name in words;
    `kind`: "gpu" or "cpu" (a CPU probe's device is system RAM); `why`: why detect_probe
    picked it.
    """

    name: str = "probe"
    limits: str = ""
    device: str = ""
    kind: str = "gpu"
    why: str = field(default="", compare=False)

    def sample(self, pid: int | None = None) -> MemorySample:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the probe holds (NVML handle, ...); sampling after close is an error."""


def now() -> float:
    return time.time()
