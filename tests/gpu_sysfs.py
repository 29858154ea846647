"""Fake /sys trees shaped like the real amdgpu (and nvidia-drm) ones, for GPU detection tests:
no AMD GPU exists on the test machines. As on a real system, /sys/class/drm/cardN are links into
/sys/devices/pci.../drm/cardN, and cardN/device links back to the PCI device folder, which holds
the PCI config attributes (vendor, device, revision, class: hex with a newline), the driver's
uevent, and for amdgpu the mem_info_* files (decimal bytes). Connectors (card1-DP-1) and render
nodes (renderD128) sit next to the cards, as they do."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3


@dataclass(frozen=True)
class PciGpu:
    vendor: int
    device: int
    revision: int
    driver: str
    vram_total: int | None = None  # amdgpu's mem_info_vram_total; an APU's is its carve-out
    subsystem: tuple[int, int] = (0x1DA2, 0x471E)
    pci_class: int = 0x030000  # VGA; APUs often report 0x038000 (display controller)


RX_7900_XTX = PciGpu(0x1002, 0x744C, 0xC8, "amdgpu", 25_753_026_560)
STRIX_HALO_8060S = PciGpu(0x1002, 0x1586, 0xC1, "amdgpu", 512 * 1024**2, pci_class=0x038000)
RX_9070_XT = PciGpu(0x1002, 0x7550, 0xC0, "amdgpu", 17_095_983_104)
RX_6800_XT = PciGpu(0x1002, 0x73BF, 0xC1, "amdgpu", 17_163_091_968)  # RDNA2: not in the table
RTX_4090 = PciGpu(0x10DE, 0x2684, 0xA1, "nvidia", subsystem=(0x10DE, 0x167C))
INTEL_IGPU = PciGpu(0x8086, 0xA780, 0x04, "i915", pci_class=0x030000)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_sysfs(root: Path, *gpus: PciGpu) -> Path:
    """A /sys under `root` with one DRM card per GPU (card0, card1, ...); returns its class/drm."""
    drm = root / "class" / "drm"
    drm.mkdir(parents=True)
    _write(drm / "version", "drm 1.1.0 20060810\n")
    for index, gpu in enumerate(gpus):
        slot = f"0000:{3 + index:02x}:00.0"
        device = root / "devices" / "pci0000:00" / f"0000:00:0{1 + index}.1" / slot
        sub_vendor, sub_device = gpu.subsystem
        attributes = {
            "vendor": f"0x{gpu.vendor:04x}\n",
            "device": f"0x{gpu.device:04x}\n",
            "revision": f"0x{gpu.revision:02x}\n",
            "class": f"0x{gpu.pci_class:06x}\n",
            "subsystem_vendor": f"0x{sub_vendor:04x}\n",
            "subsystem_device": f"0x{sub_device:04x}\n",
            "uevent": (
                f"DRIVER={gpu.driver}\nPCI_CLASS={gpu.pci_class:X}\n"
                f"PCI_ID={gpu.vendor:04X}:{gpu.device:04X}\n"
                f"PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}\nPCI_SLOT_NAME={slot}\n"
            ),
        }
        if gpu.vram_total is not None:
            attributes |= {
                "mem_info_vram_total": f"{gpu.vram_total}\n",
                "mem_info_vram_used": f"{gpu.vram_total // 20}\n",
                "mem_info_gtt_total": f"{16 * GIB}\n",
                "mem_info_gtt_used": f"{512 * 1024**2}\n",
            }
        for name, text in attributes.items():
            _write(device / name, text)
        card = f"card{index}"
        node = device / "drm" / card
        node.mkdir(parents=True)
        (node / "device").symlink_to(os.path.relpath(device, node))
        _write(node / "dev", f"226:{index}\n")
        (drm / card).symlink_to(os.path.relpath(node, drm))
        connector = node / f"{card}-DP-1"
        connector.mkdir()
        (drm / connector.name).symlink_to(os.path.relpath(connector, drm))
        render = device / "drm" / f"renderD{128 + index}"
        render.mkdir()
        (drm / render.name).symlink_to(os.path.relpath(render, drm))
    return drm
