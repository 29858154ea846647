"""Memory probes: one interface over NVML, amdsmi, AMD sysfs and psutil.

probe = detect_probe()          # the best one available; probe.why says why
sample = probe.sample(pid)      # MemorySample (bytes; process_used None when unseen)
probe.name, probe.limits        # shown next to the chart: never silently faked
free = read_free_memory()       # what a model load may use now (FreeMemory)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from app.platform.errors import BadInputError
from app.platform.probes.amd_sysfs import AmdSysfsProbe, AmdSysfsUnavailableError
from app.platform.probes.amdsmi_probe import AmdSmiProbe, AmdSmiUnavailableError
from app.platform.probes.base import MemoryProbe, MemorySample
from app.platform.probes.nvml import NvmlProbe, NvmlUnavailableError
from app.platform.probes.psutil_probe import PsutilProbe
from app.platform.units import parse_size

log = logging.getLogger(__name__)

__all__ = [
    "FREE_MEMORY_ENV",
    "AmdSmiProbe",
    "AmdSysfsProbe",
    "FreeMemory",
    "MemoryProbe",
    "MemorySample",
    "NvmlProbe",
    "PsutilProbe",
    "detect_probe",
    "read_free_memory",
]

# Pretend only this much memory is free (e.g. "6GiB"): leaves room for other programs, and
# lets tests see a small device on a big machine. Every fit check and verdict reads it.
FREE_MEMORY_ENV = "KVSTUDIO_FREE_MEMORY"


@dataclass(frozen=True)
class FreeMemory:
    """Memory a model could load into now."""

    bytes: int
    device: str  # "NVIDIA H200", "system RAM"
    source: str  # what read it: "NVML", "psutil", or FREE_MEMORY_ENV
    on_gpu: bool


def read_free_memory(gpu: bool = True) -> FreeMemory:
    """Free memory of the GPU the probes find (NVML, amdsmi, AMD sysfs), else available
    system RAM; `gpu=False` reads system RAM. $KVSTUDIO_FREE_MEMORY, when set, caps it."""
    probe = detect_probe(gpu=gpu)
    try:
        free = FreeMemory(probe.sample().device_free, probe.device, probe.name, probe.kind == "gpu")
    finally:
        probe.close()
    limit = free_memory_cap()
    if limit is not None:
        free = FreeMemory(min(free.bytes, limit), free.device, FREE_MEMORY_ENV, free.on_gpu)
    return free


def free_memory_cap() -> int | None:
    """$KVSTUDIO_FREE_MEMORY in bytes, None when unset; BadInputError when it is not a size.
    It caps every device a load is checked against (a worker's too)."""
    cap = os.environ.get(FREE_MEMORY_ENV, "").strip()
    if not cap:
        return None

    try:
        return parse_size(cap)
    except BadInputError as error:
        raise BadInputError(f"{FREE_MEMORY_ENV}: {error}") from None


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
        if tried
        else "The model runs on the CPU, so system RAM is shown."
    )
    log.info("memory probe: psutil (%s)", probe.why)
    return probe
