"""The Backends verdict once a backend has loaded, from the recorded packages' real manifests and
llama.cpp's real device and system-info lines: a GPU build that finds no GPU is not usable, a
CUDA/HIP build must report the pairs its manifest names (q8_0-f16 among them) and carry the int8
dot instruction in every q8_0-K kernel."""

from __future__ import annotations

from pathlib import Path

from app.backends.manifest import parse_manifest
from app.backends.store import InstalledBackend
from app.engine.backend_probe import ProbeResult
from app.engine.backend_verify import VerifyResult, judge_loaded

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "backend-packages"
CPU_LINE = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 |"
CUDA_LINE = (
    "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | FA_QUANTS = q8_0-f16,q8_0-q8_0,f16-f16 | " + CPU_LINE
)
DEFAULT_PAIRS_LINE = (
    "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | FA_QUANTS = q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16 | "
    + CPU_LINE
)


def judged(name: str, system_info: str, gpu_devices: tuple[str, ...]) -> VerifyResult:
    manifest = parse_manifest((RECORDS / f"{name}.json").read_text())
    result = VerifyResult(InstalledBackend(name, Path("/nowhere") / name, manifest))
    devices = tuple(f"{d}: a device (1.00 GiB)" for d in gpu_devices) + ("CPU: AMD EPYC (1 GiB)",)
    loaded = ProbeResult(
        f"/nowhere/{name}/libllama.so", "0.5.0-dev", system_info, devices, gpu_devices
    )
    judge_loaded(result, loaded)
    return result


def test_a_vulkan_build_without_a_visible_gpu_is_not_usable():
    # lavapipe unnamed in GGML_VK_VISIBLE_DEVICES: ggml-vulkan lists no device, the line no Vulkan.
    result = judged("vulkan", CPU_LINE, ())
    assert result.problems == [
        "the vulkan backend found no GPU device here, so llama.cpp would run everything on the CPU"
    ]
    assert judged("vulkan", CPU_LINE, ("Vulkan0",)).ok


def test_the_cuda_package_is_verified_from_its_recorded_counts():
    result = judged("cuda-hopper", CUDA_LINE, ("CUDA0",))
    assert result.ok, result.problems
    assert result.counts == {"sm_90": {"f16-f16": 0, "q8_0-f16": 1328, "q8_0-q8_0": 1328}}
    assert result.counts_source == "recorded in the manifest when the package was built"


def test_a_build_reporting_other_pairs_than_its_manifest_is_refused():
    result = judged("cuda-hopper", DEFAULT_PAIRS_LINE, ("CUDA0",))
    assert result.problems == [
        "llama.cpp reports FA pairs q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16, the manifest names "
        "q8_0-f16,q8_0-q8_0,f16-f16",
        "this build has no K=q8_0/V=f16 Flash Attention kernel: int8-K would run through "
        "llama.cpp's slow conversion to f16",
    ]
