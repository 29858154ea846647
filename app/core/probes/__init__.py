"""Memory probes: one interface over NVML, amdsmi, AMD sysfs and psutil.

    probe = detect_probe()          # the best one available; probe.why says why
    sample = probe.sample(pid)      # MemorySample (bytes; process_used None when unseen)
    probe.name, probe.limits        # shown next to the chart: never silently faked
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.core.probes.amd_sysfs import AmdSysfsProbe, AmdSysfsUnavailableError
from app.core.probes.amdsmi_probe import AmdSmiProbe, AmdSmiUnavailableError
from app.core.probes.base import MemoryProbe, MemorySample
from app.core.probes.nvml import NvmlProbe, NvmlUnavailableError
from app.core.probes.psutil_probe import PsutilProbe

log = logging.getLogger(__name__)

__all__ = [
    "AmdSmiProbe", "AmdSysfsProbe", "MemoryProbe", "MemorySample", "NvmlProbe", "PsutilProbe",
    "detect_probe",
]


def detect_probe(sysfs_root: str = "/sys/class/drm", gpu: bool = True) -> MemoryProbe:
    """The best probe on this machine: NVML, then amdsmi, then AMD sysfs, then psutil.

    `gpu=False` (a CPU-only llama.cpp build, or n_gpu_layers=0) goes straight to psutil,
    since the model then lives in system RAM. The returned probe's `why` says what was tried.
    """
    tried: list[str] = []
    probe: MemoryProbe
    if gpu:
        candidates: tuple[tuple[Callable[[], MemoryProbe], type[Exception]], ...] = (
            (NvmlProbe, NvmlUnavailableError),
            (AmdSmiProbe, AmdSmiUnavailableError),
            (lambda: AmdSysfsProbe(root=sysfs_root), AmdSysfsUnavailableError),
        )
        for make, errors in candidates:
            try:
                probe = make()
            except errors as error:
                tried.append(str(error))
                continue
            probe.why = f"{probe.name} found {probe.device}."
            log.info("memory probe: %s (%s)", probe.name, probe.device)
            return probe
    probe = PsutilProbe()
    probe.why = (
        "No GPU probe is available (" + "; ".join(tried) + "), so system RAM is shown."
        if tried else "The model runs on the CPU, so system RAM is shown."
    )
    log.info("memory probe: psutil (%s)", probe.why)
    return probe
