"""AMD GPU memory on Linux from the amdgpu driver's sysfs files (no library needed).

/sys/class/drm/cardN/device/mem_info_vram_used|total and mem_info_gtt_used|total hold
plain decimal bytes and a newline. A process's own VRAM comes from /proc/PID/fdinfo/*
(`drm-memory-vram: N KiB`, amdgpu on Linux 5.19+), one entry per DRM client.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from app.platform.probes.base import MemoryProbe, MemorySample, now

log = logging.getLogger(__name__)

_CARD_RE = re.compile(r"card\d+")
_UNITS = {"": 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


class AmdSysfsUnavailableError(RuntimeError):
    """No amdgpu card with memory files under the sysfs root."""


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def amd_cards(root: str | os.PathLike[str] = "/sys/class/drm") -> list[Path]:
    """The card folders under `root` whose device has mem_info_vram_total (amdgpu), in order."""
    root = Path(root)
    if not root.is_dir():
        return []
    cards = [p for p in root.iterdir() if _CARD_RE.fullmatch(p.name)]
    found = [c for c in cards if (c / "device" / "mem_info_vram_total").is_file()]
    return sorted(found, key=lambda c: int(c.name[4:]))


@dataclass
class AmdSysfsProbe(MemoryProbe):
    """One amdgpu card: device VRAM and GTT; the process's VRAM from /proc fdinfo."""

    root: str = "/sys/class/drm"
    proc_root: str = "/proc"
    card: str | None = None  # "card1"; None: the card with the most VRAM
    name: str = "AMD sysfs"
    limits: str = (
        "Device VRAM includes every process on the GPU; a process's own VRAM needs "
        "Linux 5.19+ (fdinfo) and is missing when the kernel does not report it."
    )

    def __post_init__(self) -> None:
        cards = amd_cards(self.root)
        if self.card is not None:
            cards = [c for c in cards if c.name == self.card]
        if not cards:
            raise AmdSysfsUnavailableError(f"no amdgpu card with memory files under {self.root}")
        # An APU's small carve-out and a discrete card: watch the one with the most VRAM.
        self._card = max(cards, key=lambda c: _read_int(c / "device" / "mem_info_vram_total") or 0)
        self.card = self._card.name
        device = self._card / "device"
        self._pci = Path(os.path.realpath(device)).name  # e.g. 0000:03:00.0
        product = device / "product_name"
        label = product.read_text().strip() if product.is_file() else ""
        self.device = label or f"AMD GPU ({self.card}, {self._pci})"

    def sample(self, pid: int | None = None) -> MemorySample:
        device = self._card / "device"
        used = _read_int(device / "mem_info_vram_used")
        total = _read_int(device / "mem_info_vram_total")
        if used is None or total is None:
            raise AmdSysfsUnavailableError(f"{device} stopped reporting VRAM")
        return MemorySample(
            now(),
            used,
            total,
            self._process_vram(pid),
            _read_int(device / "mem_info_gtt_used"),
            _read_int(device / "mem_info_gtt_total"),
        )

    def _process_vram(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        fdinfo = Path(self.proc_root) / str(pid) / "fdinfo"
        try:
            entries = list(fdinfo.iterdir())
        except OSError:
            return None
        clients: dict[str, int] = {}
        for entry in entries:
            parsed = _parse_fdinfo(entry)
            if parsed is None:
                continue
            client, pdev, vram = parsed
            if pdev and pdev != self._pci:
                continue
            clients[client] = vram  # several fds can share one DRM client: count it once
        return sum(clients.values()) if clients else None


def _parse_fdinfo(path: Path) -> tuple[str, str, int] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    if fields.get("drm-driver") != "amdgpu":
        return None
    raw = fields.get("drm-memory-vram") or fields.get("drm-total-vram")
    if raw is None:
        return None
    number, _, unit = raw.partition(" ")
    try:
        vram = int(number) * _UNITS.get(unit.strip(), 1)
    except ValueError:
        return None
    return fields.get("drm-client-id", path.name), fields.get("drm-pdev", ""), vram
