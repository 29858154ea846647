"""Which backend package fits the GPUs app/backends/gpu_detect.py found, in one sentence.

advice = recommend(detect_gpus())   # advice.backend: a package variant name; advice.sentence
"""

from __future__ import annotations

from dataclasses import dataclass

from app.backends.gpu_detect import Gpu

BUILT_IN = "built-in"  # app.backends.store.BUILT_IN (that module is not needed to detect)
ROCM_RDNA3_TARGETS = ("gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151")  # kernels/variants
ROCM_RDNA4_TARGETS = ("gfx1200", "gfx1201")
HOPPER = (9, 0)  # the cuda-hopper package is built for sm_90 only
DP4A = (6, 1)  # CUDA's int8 dot instruction (__dp4a) needs compute capability 6.1


@dataclass(frozen=True)
class Recommendation:
    backend: str  # a package variant (kernels/variants.py) or "built-in"
    sentence: str  # one sentence for the user
    gpu: Gpu | None = None  # the GPU it is for
    needs: str | None = None  # what the package needs besides itself, when anything


ROCM_NEEDS = (
    "The ROCm packages load only where ROCm 6 is installed (they link libamdhip64.so.6); "
    "the vulkan backend needs no ROCm."
)
NO_GPU = "No GPU found: KV Studio runs on the CPU; everything works, slower."
# Where the GPU backend packages are published (issue 27's release workflow puts them there).
RELEASES_PAGE = "https://github.com/kvstudio/kvstudio/releases"


def where_to_get(advice: Recommendation, platform_tag: str) -> str:
    """Where the recommended package comes from, in one sentence ("" when none is needed):
    named as kernels/package.py names the file, so the user can find it on the page."""
    if advice.backend == BUILT_IN:
        return ""
    file = f"kvstudio-backend-{advice.backend}-<version>-{platform_tag}.tar.gz"
    return (
        f"Download the {advice.backend} package ({file}) from the project's release page, "
        f"{RELEASES_PAGE}, then install it from the file."
    )


def advice_for(gpu: Gpu) -> Recommendation:
    """The backend package that fits one GPU, and the sentence saying so."""
    if gpu.vendor == "Apple":
        return Recommendation(
            BUILT_IN,
            f"{gpu.name} found: the built-in backend already runs on it through Metal, "
            "so no package is needed.",
            gpu,
        )
    if gpu.vendor == "NVIDIA":
        return _nvidia_advice(gpu)
    if gpu.vendor == "AMD" and gpu.target in ROCM_RDNA3_TARGETS:
        return Recommendation(
            "rocm-rdna3",
            f"{gpu.name} found: the rocm-rdna3 backend runs the int8-K kernel on it.",
            gpu,
            ROCM_NEEDS,
        )
    if gpu.vendor == "AMD" and gpu.target in ROCM_RDNA4_TARGETS:
        return Recommendation(
            "rocm-rdna4",
            f"{gpu.name} found: the rocm-rdna4 backend is built for its {gpu.target}.",
            gpu,
            ROCM_NEEDS,
        )
    if gpu.vendor == "AMD":
        why = f"no ROCm package is built for {gpu.target}" if gpu.target else "its chip is unknown"
        return Recommendation(
            "vulkan", f"{gpu.name} found: {why}, so the vulkan backend runs it.", gpu
        )
    return Recommendation("vulkan", f"{gpu.name} found: the vulkan backend runs it.", gpu)


def _nvidia_advice(gpu: Gpu) -> Recommendation:
    cc = gpu.compute_capability
    if cc is None:
        return Recommendation(
            "cuda",
            f"{gpu.name} found: a cuda backend runs the int8-K kernel on it "
            "(install nvidia-ml-py to learn which CUDA architecture it needs).",
            gpu,
        )
    text = f"{gpu.name} found (compute capability {cc[0]}.{cc[1]})"
    if cc < DP4A:
        return Recommendation(
            "vulkan", f"{text}: it predates CUDA's int8 dot instruction, so use vulkan.", gpu
        )
    if cc == HOPPER:
        return Recommendation(
            "cuda-hopper", f"{text}: the cuda-hopper backend runs the int8-K kernel on it.", gpu
        )
    return Recommendation(
        "cuda",
        f"{text}: a cuda backend built for sm_{cc[0]}{cc[1]} runs the int8-K kernel on it.",
        gpu,
    )


_RANK = {"cuda-hopper": 0, "cuda": 0, "rocm-rdna3": 0, "rocm-rdna4": 0, BUILT_IN: 0, "vulkan": 1}


def recommend(gpus: list[Gpu]) -> Recommendation:
    """The backend for the best of `gpus`: a package with a kernel built for the GPU before
    vulkan, then the GPU with the most memory (a discrete card before an APU's carve-out)."""
    if not gpus:
        return Recommendation(BUILT_IN, NO_GPU)
    advice = [advice_for(g) for g in gpus]
    return min(
        advice, key=lambda a: (_RANK.get(a.backend, 1), -((a.gpu and a.gpu.memory_bytes) or 0))
    )
