"""AMD GPU memory through ROCm's amdsmi Python package, when it is installed.

Written against the amdsmi API of ROCm 6.x (amdsmi_get_gpu_memory_usage/total and
amdsmi_get_gpu_process_list); not exercised in CI, which has no AMD GPU. The sysfs probe
covers the same numbers without ROCm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import ModuleType

from app.platform.probes.base import MemoryProbe, MemorySample, now

log = logging.getLogger(__name__)


class AmdSmiUnavailableError(RuntimeError):
    """amdsmi is not installed or finds no AMD GPU."""


@dataclass
class AmdSmiProbe(MemoryProbe):
    index: int = 0
    name: str = "amdsmi"
    limits: str = (
        "Device VRAM includes every process on the GPU; a process's own VRAM is shown when "
        "amdsmi lists the process (it may need the render group or root)."
    )
    _smi: ModuleType | None = field(default=None, repr=False, compare=False)  # amdsmi, once open
    _handle: object = field(default=None, repr=False, compare=False)  # amdsmi's, passed back to it

    def __post_init__(self) -> None:
        try:
            import amdsmi
        except ImportError as error:
            raise AmdSmiUnavailableError("amdsmi is not installed") from error
        try:
            amdsmi.amdsmi_init()
            handles = amdsmi.amdsmi_get_processor_handles()
        except Exception as error:  # amdsmi raises its own AmdSmiException family
            raise AmdSmiUnavailableError(f"amdsmi could not start: {error}") from error
        if len(handles) <= self.index:
            amdsmi.amdsmi_shut_down()
            raise AmdSmiUnavailableError(f"no AMD GPU number {self.index}")
        self._smi, self._handle = amdsmi, handles[self.index]
        try:
            self.device = str(
                amdsmi.amdsmi_get_gpu_asic_info(self._handle).get("market_name", "AMD GPU")
            )
        except Exception:  # noqa: BLE001 - a name is optional
            self.device = "AMD GPU"

    def _library(self) -> ModuleType:
        if self._smi is None:
            raise AmdSmiUnavailableError("the amdsmi probe is closed")
        return self._smi

    def sample(self, pid: int | None = None) -> MemorySample:
        smi = self._library()
        vram = smi.AmdSmiMemoryType.VRAM
        used = int(smi.amdsmi_get_gpu_memory_usage(self._handle, vram))
        total = int(smi.amdsmi_get_gpu_memory_total(self._handle, vram))
        gtt_used = gtt_total = None
        try:
            gtt = smi.AmdSmiMemoryType.GTT
            gtt_used = int(smi.amdsmi_get_gpu_memory_usage(self._handle, gtt))
            gtt_total = int(smi.amdsmi_get_gpu_memory_total(self._handle, gtt))
        except Exception as error:  # noqa: BLE001 - GTT is optional
            log.debug("amdsmi has no GTT figures: %s", error)
        return MemorySample(now(), used, total, self._process_used(pid), gtt_used, gtt_total)

    def _process_used(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        smi = self._library()
        try:
            processes = smi.amdsmi_get_gpu_process_list(self._handle)
        except Exception as error:  # noqa: BLE001
            log.debug("amdsmi process list failed: %s", error)
            return None
        for process in processes:
            # ROCm 6.1+ returns dicts; older releases return handles to look up.
            info = (
                process
                if isinstance(process, dict)
                else smi.amdsmi_get_gpu_process_info(self._handle, process)
            )
            if int(info.get("pid", -1)) == pid:
                memory = info.get("memory_usage") or {}
                value = memory.get("vram_mem")
                return int(value) if value is not None else None
        return None

    def close(self) -> None:
        if self._smi is not None:
            self._smi.amdsmi_shut_down()
            self._smi = None
