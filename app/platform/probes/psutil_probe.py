"""System RAM and a process's resident set, through psutil (CPU-only machines)."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from app.platform.probes.base import MemoryProbe, MemorySample, now


@dataclass
class PsutilProbe(MemoryProbe):
    name: str = "psutil"
    limits: str = (
        "Counts system RAM: the engine's resident set includes the model pages it has touched "
        "(memory-mapped weights), and memory other programs use is in the device total."
    )
    device: str = "system RAM"
    kind: str = "cpu"

    def sample(self, pid: int | None = None) -> MemorySample:
        vm = psutil.virtual_memory()
        rss = None
        if pid is not None:
            try:
                rss = psutil.Process(pid).memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                rss = None
        return MemorySample(now(), int(vm.total - vm.available), int(vm.total), rss)
