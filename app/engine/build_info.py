"""What llama.cpp's system-info line says about the build: backends and Flash Attention pairs.

Example (CUDA build):
`CUDA : ARCHS = 900 | USE_GRAPHS = 1 | FA_QUANTS = q8_0-f16,q8_0-q8_0,f16-f16 | ...`
A CPU build names only `CPU : SSE3 = 1 | ...`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.kv.kv_types import KvMode

_SECTION_RE = re.compile(r"(?:^|\|)\s*([A-Za-z][\w ]*?)\s*:\s*")
_FA_RE = re.compile(r"FA_QUANTS\s*=\s*([\w,\-]+)")
GPU_BACKENDS = ("CUDA", "ROCm", "HIP", "Vulkan", "Metal", "SYCL", "MUSA", "OpenCL")


@dataclass(frozen=True)
class BuildInfo:
    backends: tuple[str, ...]  # as named in the line: "CPU", "CUDA", ...
    fa_pairs: tuple[str, ...] | None  # K-V pairs the CUDA/HIP FA kernels have; None: not reported
    raw: str

    @property
    def gpu_backends(self) -> tuple[str, ...]:
        return tuple(b for b in self.backends if b in GPU_BACKENDS)

    def has_fa_pair(self, mode: KvMode) -> bool | None:
        """True/False for CUDA/HIP builds that report FA_QUANTS; None when the build does
        not restrict pairs (CPU, Vulkan, or a build that does not say)."""
        if self.fa_pairs is None:
            return None
        return "all" in self.fa_pairs or mode.pair in self.fa_pairs


def parse_system_info(text: str) -> BuildInfo:
    backends = []
    for part in text.split("|"):
        if ":" in part:
            name = part.split(":", 1)[0].strip()
            if name and " " not in name and "=" not in name:
                backends.append(name)
    match = _FA_RE.search(text)
    pairs = tuple(p for p in match.group(1).split(",") if p) if match else None
    return BuildInfo(tuple(dict.fromkeys(backends)), pairs, text.strip())


def read_build_info() -> BuildInfo:
    import llama_cpp  # first: numpy before llama_cpp crashed model loads on one machine

    return parse_system_info(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))


@dataclass(frozen=True)
class BackendPairs:
    """Which K/V pairs the running backend's GPU Flash Attention has kernels for, as the load
    dialog needs it: from the loaded model's system-info line, or before any load from the
    chosen package's manifest."""

    backend: str  # "built-in", "rocm-rdna3", ...
    fa_pairs: tuple[str, ...] | None  # None: every pair runs natively (CPU, Vulkan) or unknown

    def native(self, mode: KvMode) -> bool | None:
        if self.fa_pairs is None:
            return None
        return "all" in self.fa_pairs or mode.pair in self.fa_pairs
