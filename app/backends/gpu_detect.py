"""Which GPUs this machine has (the first-run dialog; app/backends/gpu_advice.py says which
backend package fits them).

    gpus = detect_gpus()              # NVML, amdgpu sysfs, Vulkan, Apple Silicon; never the network

Each source is a real, cheap check that answers "nothing" when it cannot run: NVML when
nvidia-ml-py and the driver load, the amdgpu driver's sysfs files (vendor, device, revision),
`vulkaninfo --summary` when it is installed, and the platform for Apple Silicon. AMD chips are
named from a small table of PCI ids taken from libdrm's amdgpu.ids, with the gfx target each
chip is compiled for; an id not in it is still reported, by id.
"""

from __future__ import annotations

import logging
import platform
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.backends.system_programs import system_env
from app.platform.units import size

log = logging.getLogger(__name__)

AMD_VENDOR = "0x1002"
NVIDIA_VENDOR = "0x10de"
VULKANINFO_TIMEOUT_S = 10.0

# PCI device id -> (chip, gfx target). RDNA3 (Navi 31/32/33), Phoenix (RDNA3, gfx1103: no
# package is built for it), RDNA3.5 APUs (Strix Point, Strix Halo, Krackan) and RDNA4.
AMD_CHIPS: dict[int, tuple[str, str]] = {
    0x744C: ("Navi 31", "gfx1100"),
    0x747E: ("Navi 32", "gfx1101"),
    0x7480: ("Navi 33", "gfx1102"),
    0x7483: ("Navi 33", "gfx1102"),
    0x15BF: ("Phoenix", "gfx1103"),
    0x150E: ("Strix Point", "gfx1150"),
    0x1586: ("Strix Halo", "gfx1151"),
    0x1114: ("Krackan Point", "gfx1152"),
    0x7550: ("Navi 48", "gfx1201"),
    0x7551: ("Navi 48", "gfx1201"),
    0x7590: ("Navi 44", "gfx1200"),
}
# (device, revision) -> marketing name, as libdrm's amdgpu.ids spells it (without "AMD ").
AMD_NAMES: dict[tuple[int, int], str] = {
    (0x744C, 0xC8): "Radeon RX 7900 XTX",
    (0x744C, 0xCC): "Radeon RX 7900 XT",
    (0x744C, 0xCE): "Radeon RX 7900 GRE",
    (0x744C, 0xCF): "Radeon RX 7900M",
    (0x747E, 0xC8): "Radeon RX 7800 XT",
    (0x747E, 0xD8): "Radeon RX 7800M",
    (0x747E, 0xDB): "Radeon RX 7700",
    (0x747E, 0xFF): "Radeon RX 7700 XT",
    (0x7480, 0x00): "Radeon Pro W7600",
    (0x7480, 0xC0): "Radeon RX 7600 XT",
    (0x7480, 0xC1): "Radeon RX 7700S",
    (0x7480, 0xC2): "Radeon RX 7650 GRE",
    (0x7480, 0xC3): "Radeon RX 7600S",
    (0x7480, 0xC7): "Radeon RX 7600M XT",
    (0x7480, 0xCF): "Radeon RX 7600",
    (0x7483, 0xCF): "Radeon RX 7600M",
    (0x150E, 0xC1): "Radeon 890M",
    (0x150E, 0xC4): "Radeon 880M",
    (0x150E, 0xC5): "Radeon 890M",
    (0x150E, 0xC6): "Radeon 890M",
    (0x150E, 0xD1): "Radeon 890M",
    (0x150E, 0xD2): "Radeon 880M",
    (0x150E, 0xD3): "Radeon 890M",
    (0x1586, 0xC1): "Radeon 8060S",
    (0x1586, 0xC2): "Radeon 8050S",
    (0x1586, 0xC4): "Radeon 8050S",
    (0x1586, 0xD1): "Radeon 8060S",
    (0x1586, 0xD2): "Radeon 8050S",
    (0x1586, 0xD4): "Radeon 8050S",
    (0x1586, 0xD5): "Radeon 8040S",
    (0x1114, 0xC2): "Radeon 860M",
    (0x1114, 0xC3): "Radeon 840M",
    (0x7550, 0xC0): "Radeon RX 9070 XT",
    (0x7550, 0xC2): "Radeon RX 9070 GRE",
    (0x7550, 0xC3): "Radeon RX 9070",
    (0x7551, 0xC0): "Radeon AI PRO R9700",
    (0x7590, 0xC0): "Radeon RX 9060 XT",
    (0x7590, 0xC7): "Radeon RX 9060",
}


@dataclass(frozen=True)
class Gpu:
    name: str  # "Radeon RX 7900 XTX", "NVIDIA H200", "AMD GPU 1002:73bf"
    vendor: str  # "AMD", "NVIDIA", "Apple", "Intel", or the Vulkan vendor id
    found_by: str  # "amdgpu sysfs", "NVML", "Vulkan", "platform"
    target: str | None = None  # "gfx1100", "sm_90"; None when unknown
    memory_bytes: int | None = None  # dedicated memory (an APU's carve-out is small)
    compute_capability: tuple[int, int] | None = None  # NVIDIA only

    def describe(self) -> str:
        """One line for the dialog: "Radeon RX 7900 XTX (gfx1100, 24.0 GiB, amdgpu sysfs)"."""
        parts = [self.target] if self.target else []
        if self.memory_bytes:
            parts.append(size(self.memory_bytes))
        return f"{self.name} ({', '.join([*parts, self.found_by])})"


class NvmlLibrary(Protocol):
    """The part of nvidia-ml-py (imported as pynvml) that detection calls."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> object: ...


def load_nvml() -> NvmlLibrary | None:
    """nvidia-ml-py when it is installed (the `nvidia` extra); None otherwise."""
    try:
        import pynvml
    except ImportError:
        return None
    library: NvmlLibrary = pynvml
    return library


# ---- the sources ---------------------------------------------------------------------------------


def nvml_gpus(nvml: NvmlLibrary | None) -> list[Gpu]:
    """NVIDIA GPUs through NVML; [] when the library or the driver is missing."""
    if nvml is None:
        return []
    try:
        nvml.nvmlInit()
    except Exception as error:  # pynvml.NVMLError: no driver, no libnvidia-ml
        log.debug("NVML did not start: %s", error)
        return []
    gpus = []
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            raw = nvml.nvmlDeviceGetName(handle)
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            total = getattr(nvml.nvmlDeviceGetMemoryInfo(handle), "total", None)
            gpus.append(
                Gpu(
                    name,
                    "NVIDIA",
                    "NVML",
                    f"sm_{major}{minor}",
                    int(total) if isinstance(total, int) else None,
                    (int(major), int(minor)),
                )
            )
    except Exception as error:  # a device NVML cannot query: report what was read
        log.warning("NVML stopped answering: %s", error)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library that half-started
            pass
    return gpus


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _hex(text: str | None) -> int | None:
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def sysfs_gpus(root: Path) -> list[Gpu]:
    """AMD GPUs (and NVIDIA ones, by id) from /sys/class/drm/card*/device; [] without that tree.

    `root` is /sys/class/drm; tests point it at a tree laid out like the real one."""
    if not root.is_dir():
        return []
    gpus = []
    seen: set[Path] = set()
    cards = [p for p in root.iterdir() if re.fullmatch(r"card\d+", p.name)]
    for card in sorted(cards, key=lambda p: int(p.name[4:])):
        device = card / "device"
        pci = device.resolve()
        if pci in seen:
            continue
        seen.add(pci)
        vendor = (_read(device / "vendor") or "").lower()
        device_id = _hex(_read(device / "device"))
        if device_id is None:
            continue
        if vendor == AMD_VENDOR:
            gpus.append(_amd_gpu(device, device_id))
        elif vendor == NVIDIA_VENDOR:
            gpus.append(Gpu(f"NVIDIA GPU 10de:{device_id:04x}", "NVIDIA", "sysfs"))
    return gpus


def _amd_gpu(device: Path, device_id: int) -> Gpu:
    revision = _hex(_read(device / "revision"))
    chip, target = AMD_CHIPS.get(device_id, (None, None))
    vram = _read(device / "mem_info_vram_total")
    name = (
        AMD_NAMES.get((device_id, revision if revision is not None else -1))
        or _read(device / "product_name")  # boards with a FRU EEPROM (mostly workstation cards)
        or (f"AMD {chip} GPU" if chip else f"AMD GPU 1002:{device_id:04x}")
    )
    return Gpu(
        name,
        "AMD",
        "amdgpu sysfs",
        target,
        int(vram) if vram and vram.isdigit() else None,
    )


_VULKAN_VENDORS = {
    0x1002: "AMD",
    0x10DE: "NVIDIA",
    0x8086: "Intel",
    0x13B5: "Arm",
    0x5143: "Qualcomm",
}


def parse_vulkaninfo_summary(text: str) -> list[Gpu]:
    """The GPUs in `vulkaninfo --summary`'s Devices section; CPU devices (llvmpipe, lavapipe)
    are left out, since ggml-vulkan does not use them unless told to."""
    gpus = []
    for block in re.split(r"^GPU\d+:\s*$", text, flags=re.MULTILINE)[1:]:
        fields = dict(re.findall(r"^\s*(\w+)\s*=\s*(.*?)\s*$", block, flags=re.MULTILINE))
        if fields.get("deviceType", "").endswith("_CPU") or "deviceName" not in fields:
            continue
        vendor_id = _hex(fields.get("vendorID", "").removeprefix("0x")) or 0
        vendor = _VULKAN_VENDORS.get(vendor_id, f"vendor 0x{vendor_id:04x}")
        gpus.append(Gpu(fields["deviceName"], vendor, "Vulkan"))
    return gpus


def vulkan_gpus(command: str | None) -> list[Gpu]:
    """The GPUs `command --summary` (vulkaninfo) lists; [] when it is not installed or fails."""
    if command is None:
        return []
    try:
        done = subprocess.run(
            [command, "--summary"],
            capture_output=True,
            env=system_env(),
            text=True,
            timeout=VULKANINFO_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        log.debug("%s --summary did not run: %s", command, error)
        return []
    return parse_vulkaninfo_summary(done.stdout) if done.returncode == 0 else []


def apple_gpus(system: str, machine: str, chip: Callable[[], str | None]) -> list[Gpu]:
    """Apple Silicon's GPU on macOS/arm64 (every M-series Mac has one)."""
    if system != "Darwin" or machine != "arm64":
        return []
    name = chip() or "Apple Silicon"
    return [Gpu(f"{name} GPU", "Apple", "platform", "metal")]


def _apple_chip() -> str | None:
    try:
        done = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"],
            capture_output=True,
            env=system_env(),
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None  # "Apple M2 Pro"


def detect_gpus(
    sysfs_root: Path = Path("/sys/class/drm"),
    *,
    nvml: NvmlLibrary | None | Callable[[], NvmlLibrary | None] = load_nvml,
    vulkaninfo: str | None = "vulkaninfo",
    system: str | None = None,
    machine: str | None = None,
) -> list[Gpu]:
    """Every GPU the real checks find, without touching the network. Vulkan only adds GPUs of
    vendors NVML and sysfs did not already report (it would list the same card twice)."""
    library = nvml() if callable(nvml) else nvml
    nvidia = nvml_gpus(library)
    from_sysfs = sysfs_gpus(sysfs_root)
    if nvidia:  # NVML names them better than sysfs ids do
        from_sysfs = [g for g in from_sysfs if g.vendor != "NVIDIA"]
    gpus = nvidia + from_sysfs
    vendors = {g.vendor for g in gpus}
    gpus += [g for g in vulkan_gpus(vulkaninfo) if g.vendor not in vendors]
    gpus += apple_gpus(
        system if system is not None else platform.system(),
        machine if machine is not None else platform.machine(),
        _apple_chip,
    )
    return gpus


# ---- the advice ----------------------------------------------------------------------------------
