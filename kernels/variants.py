"""Build variants of llama-cpp-python: the CMake options each backend needs.

The CUDA and HIP Flash Attention kernels are compiled only for the K/V pairs named in
GGML_CUDA_FA_QUANTS. llama.cpp's default list lacks q8_0-f16, our default KV mode, which
would then run through a slow "converting K and V to f16" path; so every GPU variant
names the pairs the app uses. The CPU and Vulkan backends handle mixed pairs without options.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

LLAMA_CPP_PYTHON_VERSION = "0.3.36"

# K/V pairs the app offers in its compare run and default mode (K-V, as ggml names them).
FA_PAIRS = ("q8_0-f16", "q8_0-q8_0", "f16-f16")


@dataclass(frozen=True)
class BuildVariant:
    name: str
    summary: str
    cmake_args: tuple[str, ...]

    @property
    def cmake_args_text(self) -> str:
        return " ".join(self.cmake_args)


_FA = "-DGGML_CUDA_FA_QUANTS=" + ";".join(FA_PAIRS)

VARIANTS: dict[str, BuildVariant] = {
    v.name: v
    for v in (
        BuildVariant("cpu", "CPU only (the default pip build)", ()),
        BuildVariant(
            "rocm-rdna3",
            "AMD Radeon RX 7000 / RDNA3 (+ RDNA3.5 APUs) through ROCm HIP; needs ROCm >= 6.1",
            ("-DGGML_HIP=ON", "-DGPU_TARGETS=gfx1100;gfx1101;gfx1102;gfx1150;gfx1151", _FA),
        ),
        BuildVariant(
            "rocm-rdna4",
            "AMD Radeon RX 9000 / RDNA4 through ROCm HIP",
            ("-DGGML_HIP=ON", "-DGPU_TARGETS=gfx1200;gfx1201", _FA),
        ),
        BuildVariant(
            "cuda",
            "NVIDIA through CUDA, for the GPU in this machine (native arch)",
            ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=native", _FA),
        ),
        BuildVariant(
            "cuda-hopper",
            "NVIDIA H100/H200 (sm_90), used for the project's reference runs",
            ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90", _FA),
        ),
        BuildVariant(
            "vulkan",
            "Any Vulkan GPU (handles mixed K/V pairs without extra options)",
            ("-DGGML_VULKAN=ON",),
        ),
    )
}


def variant(name: str) -> BuildVariant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(
            f"Unknown build variant '{name}'; choose one of: {', '.join(VARIANTS)}."
        ) from None


def custom_variant(cmake_args: str) -> BuildVariant:
    """`python -m kernels build custom`: the CMAKE_ARGS a user set (./quickstart.sh passes them),
    built like a named variant, so a CUDA/HIP build gets our kernel patches too."""
    args = tuple(shlex.split(cmake_args))
    return BuildVariant("custom", "the CMAKE_ARGS of the environment", args)
