"""NVIDIA GPU memory through NVML (the nvidia-ml-py package, imported as pynvml)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import ModuleType

from app.platform.probes.base import MemoryProbe, MemorySample, now

log = logging.getLogger(__name__)


class NvmlUnavailableError(RuntimeError):
    """No NVIDIA driver, no device, or nvidia-ml-py is not installed."""


@dataclass
class NvmlProbe(MemoryProbe):
    """Device memory of one GPU, and a process's own usage where the driver reports it."""

    index: int = 0
    name: str = "NVML"
    limits: str = (
        "Device memory includes every process on the GPU; a process's own usage is only "
        "shown when the driver reports it (not inside some containers or under MIG)."
    )
    _nvml: ModuleType | None = field(default=None, repr=False, compare=False)  # pynvml, once open
    _handle: object = field(default=None, repr=False, compare=False)  # NVML's, passed back to it

    def __post_init__(self) -> None:
        try:
            import pynvml
        except ImportError as error:
            raise NvmlUnavailableError("nvidia-ml-py is not installed") from error
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise NvmlUnavailableError(f"NVML could not start: {error}") from error
        try:
            if pynvml.nvmlDeviceGetCount() <= self.index:
                raise NvmlUnavailableError(f"no NVIDIA GPU number {self.index}")
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            name = pynvml.nvmlDeviceGetName(self._handle)
        except (pynvml.NVMLError, NvmlUnavailableError):
            pynvml.nvmlShutdown()
            raise
        self.device = name.decode() if isinstance(name, bytes) else str(name)
        self._nvml = pynvml

    def _library(self) -> ModuleType:
        if self._nvml is None:
            raise NvmlUnavailableError("the NVML probe is closed")
        return self._nvml

    def sample(self, pid: int | None = None) -> MemorySample:
        nvml = self._library()
        info = nvml.nvmlDeviceGetMemoryInfo(self._handle)
        return MemorySample(now(), int(info.used), int(info.total), self._process_used(pid))

    def _process_used(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        nvml = self._library()
        total = None
        for query in (
            nvml.nvmlDeviceGetComputeRunningProcesses,
            nvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            try:
                processes = query(self._handle)
            except nvml.NVMLError as error:
                log.debug("NVML process query failed: %s", error)
                continue
            for process in processes:
                used = getattr(process, "usedGpuMemory", None)
                if used is not None and used >= 2**63:
                    used = None  # NVML_VALUE_NOT_AVAILABLE
                if process.pid == pid and used is not None:
                    # One process may be listed as both compute and graphics; take the larger.
                    total = max(total or 0, int(used))
        return total

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None
