"""GPU detection and the backend it recommends: amdgpu sysfs on fake trees shaped like the real
ones (tests/gpu_sysfs.py: no AMD GPU exists here), NVML through a stand-in with nvidia-ml-py's
API (neither nvidia-ml-py nor an NVIDIA driver exists here), the real vulkaninfo of this machine,
and the platform check for Apple Silicon."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.backends.gpu_advice import NO_GPU, recommend
from app.backends.gpu_detect import Gpu, detect_gpus, parse_vulkaninfo_summary, vulkan_gpus
from tests.gpu_sysfs import (
    INTEL_IGPU,
    RTX_4090,
    RX_6800_XT,
    RX_7900_XTX,
    RX_9070_XT,
    STRIX_HALO_8060S,
    PciGpu,
    fake_sysfs,
)

NOT_A_MAC = {"system": "Linux", "machine": "x86_64"}


def detect(drm: Path, nvml: object = None) -> list[Gpu]:
    return detect_gpus(drm, nvml=nvml, vulkaninfo=None, **NOT_A_MAC)  # type: ignore[arg-type]


def test_rx_7900_xtx_next_to_an_intel_igpu(tmp_path: Path) -> None:
    gpus = detect(fake_sysfs(tmp_path / "sys", INTEL_IGPU, RX_7900_XTX))
    assert [g.describe() for g in gpus] == ["Radeon RX 7900 XTX (gfx1100, 23.98 GiB, amdgpu sysfs)"]
    advice = recommend(gpus)
    assert advice.backend == "rocm-rdna3"
    assert advice.sentence == (
        "Radeon RX 7900 XTX found: the rocm-rdna3 backend runs the int8-K kernel on it."
    )
    assert advice.needs is not None and "libamdhip64.so.6" in advice.needs


def test_strix_halo_apu_is_rdna3_5(tmp_path: Path) -> None:
    gpus = detect(fake_sysfs(tmp_path / "sys", STRIX_HALO_8060S))
    assert [(g.name, g.target) for g in gpus] == [("Radeon 8060S", "gfx1151")]
    assert recommend(gpus).sentence == (
        "Radeon 8060S found: the rocm-rdna3 backend runs the int8-K kernel on it."
    )


def test_rx_9070_xt_gets_the_rdna4_package(tmp_path: Path) -> None:
    gpus = detect(fake_sysfs(tmp_path / "sys", RX_9070_XT))
    advice = recommend(gpus)
    assert (advice.backend, advice.sentence) == (
        "rocm-rdna4",
        "Radeon RX 9070 XT found: the rocm-rdna4 backend is built for its gfx1201.",
    )


def test_an_amd_id_outside_the_table_is_reported_by_id_and_gets_vulkan(tmp_path: Path) -> None:
    gpus = detect(fake_sysfs(tmp_path / "sys", RX_6800_XT))
    assert [g.name for g in gpus] == ["AMD GPU 1002:73bf"]
    assert recommend(gpus).sentence == (
        "AMD GPU 1002:73bf found: its chip is unknown, so the vulkan backend runs it."
    )


def test_a_discrete_rdna3_card_wins_over_an_apu_without_a_package(tmp_path: Path) -> None:
    phoenix_780m = PciGpu(0x1002, 0x15BF, 0xC1, "amdgpu", 512 * 1024**2)
    gpus = detect(fake_sysfs(tmp_path / "sys", phoenix_780m, RX_7900_XTX))
    assert [(g.name, g.target) for g in gpus] == [
        ("AMD Phoenix GPU", "gfx1103"),
        ("Radeon RX 7900 XTX", "gfx1100"),
    ]
    assert recommend(gpus).backend == "rocm-rdna3"
    assert recommend(gpus[:1]).sentence == (
        "AMD Phoenix GPU found: no ROCm package is built for gfx1103, so the vulkan backend "
        "runs it."
    )


@dataclass
class _Memory:
    total: int


class StandInNvml:
    """NOT NVML: a stand-in with nvidia-ml-py's function names and return types (pynvml 12),
    since no NVIDIA driver can exist on the test machines. Answers for one GPU."""

    def __init__(self, name: str, capability: tuple[int, int], memory: int) -> None:
        self.name, self.capability, self.memory = name, capability, memory
        self.started = 0

    def nvmlInit(self) -> None:
        self.started += 1

    def nvmlShutdown(self) -> None:
        self.started -= 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return ("handle", index)

    def nvmlDeviceGetName(self, handle: object) -> str:
        return self.name

    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]:
        return self.capability

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _Memory:
        return _Memory(self.memory)


def test_an_nvidia_only_host(tmp_path: Path) -> None:
    nvml = StandInNvml("NVIDIA GeForce RTX 4090", (8, 9), 24 * 1024**3)
    gpus = detect(fake_sysfs(tmp_path / "sys", RTX_4090), nvml)
    assert [g.describe() for g in gpus] == ["NVIDIA GeForce RTX 4090 (sm_89, 24.00 GiB, NVML)"]
    assert nvml.started == 0  # shut down again
    advice = recommend(gpus)
    assert (advice.backend, advice.sentence) == (
        "cuda",
        "NVIDIA GeForce RTX 4090 found (compute capability 8.9): a cuda backend built for "
        "sm_89 runs the int8-K kernel on it.",
    )


def test_an_h200_gets_the_hopper_package(tmp_path: Path) -> None:
    nvml = StandInNvml("NVIDIA H200", (9, 0), 141 * 1024**3)
    advice = recommend(detect(tmp_path / "no-sys", nvml))
    assert (advice.backend, advice.sentence) == (
        "cuda-hopper",
        "NVIDIA H200 found (compute capability 9.0): the cuda-hopper backend runs the int8-K "
        "kernel on it.",
    )


def test_without_nvml_an_nvidia_card_is_still_seen_in_sysfs(tmp_path: Path) -> None:
    gpus = detect(fake_sysfs(tmp_path / "sys", RTX_4090))
    assert [g.name for g in gpus] == ["NVIDIA GPU 10de:2684"]
    assert recommend(gpus).backend == "cuda"


def test_no_gpu_means_the_built_in_cpu_backend(tmp_path: Path) -> None:
    advice = recommend(detect(fake_sysfs(tmp_path / "sys", INTEL_IGPU)))
    assert (advice.backend, advice.sentence) == ("built-in", NO_GPU)
    assert NO_GPU == ("No GPU found: KV Studio runs on the CPU; everything works, slower.")


def test_apple_silicon_runs_metal_in_the_built_in_backend(tmp_path: Path) -> None:
    gpus = detect_gpus(
        tmp_path / "no-sys", nvml=None, vulkaninfo=None, system="Darwin", machine="arm64"
    )
    assert [g.vendor for g in gpus] == ["Apple"]
    advice = recommend(gpus)
    assert advice.backend == "built-in" and "through Metal" in advice.sentence


@pytest.mark.skipif(shutil.which("vulkaninfo") is None, reason="vulkaninfo is not installed")
def test_the_real_vulkaninfo_here_lists_only_a_cpu_device_which_is_not_a_gpu() -> None:
    # This machine's only Vulkan device is Mesa's llvmpipe (PHYSICAL_DEVICE_TYPE_CPU).
    assert vulkan_gpus("vulkaninfo") == []


def test_a_vulkan_only_gpu_gets_vulkan() -> None:
    # The Devices section of `vulkaninfo --summary` (Vulkan SDK 1.3) on an Intel Arc machine.
    text = (
        "Devices:\n========\nGPU0:\n\tapiVersion         = 1.3.274\n"
        "\tvendorID           = 0x8086\n\tdeviceID           = 0x56a0\n"
        "\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU\n"
        "\tdeviceName         = Intel(R) Arc(tm) A770 Graphics (DG2)\n"
        "\tdriverName         = Intel open-source Mesa driver\n"
        "GPU1:\n\tvendorID           = 0x10005\n\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU\n"
        "\tdeviceName         = llvmpipe (LLVM 15.0.6, 256 bits)\n"
    )
    gpus = parse_vulkaninfo_summary(text)
    assert [(g.name, g.vendor) for g in gpus] == [("Intel(R) Arc(tm) A770 Graphics (DG2)", "Intel")]
    assert recommend(gpus).sentence == (
        "Intel(R) Arc(tm) A770 Graphics (DG2) found: the vulkan backend runs it."
    )


def test_a_missing_vulkaninfo_says_nothing() -> None:
    assert vulkan_gpus("vulkaninfo-that-is-not-installed") == []
