"""`kvstudio doctor`: what this installation can run, and whether int8-K Flash Attention is in."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import TypedDict

from app.backends.store import load_chosen_backend_here
from app.engine.build_info import parse_system_info
from app.kv.kv_types import DEFAULT_KV_MODE
from app.platform.paths import data_dir
from app.platform.safe_text import safe_text
from app.platform.units import size_number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


class DeviceReport(TypedDict):
    name: str
    description: str
    kind: str
    backend: str
    memory_total_bytes: int
    memory_free_bytes: int


class DoctorReport(TypedDict):
    """What `kvstudio doctor --json` prints (and the text is written from)."""

    backend: str
    backend_notice: str | None
    library: str
    python: str
    platform: str
    llama_cpp_python: str
    llama_cpp: str
    ggml: str | None
    ggml_commit: str | None
    backends: list[str]
    gpu_backends: list[str]
    gpu_offload: bool
    flash_attention_pairs: list[str] | str | None  # the pairs, "all" (CPU), None (not reported)
    flash_attention_pairs_note: str
    int8_k_pair_q8_0_f16: bool | None
    devices: list[DeviceReport]
    system_info: str


def collect() -> DoctorReport:
    """Everything doctor reports, as plain values, about the backend the engine runs."""

    backend, notice = load_chosen_backend_here(data_dir())
    from app.engine import devices  # imports llama_cpp first (before numpy)

    versions = devices.versions()
    info = devices.system_info()
    build = parse_system_info(info)
    gpu = list(build.gpu_backends)
    if build.fa_pairs is not None:
        pairs: list[str] | str | None = list(build.fa_pairs)
        pairs_note = "the K-V pairs the GPU Flash Attention kernels were compiled for (FA_QUANTS)"
        int8_k = build.has_fa_pair(DEFAULT_KV_MODE)
    elif gpu:
        pairs = None
        pairs_note = (
            f"the {', '.join(gpu)} build does not report FA_QUANTS; "
            "mixed K/V pairs are handled without build options (Vulkan) or unknown"
        )
        int8_k = None
    else:
        pairs = "all"
        pairs_note = "CPU build: the CPU backend's Flash Attention handles every K/V pair"
        int8_k = True
    return {
        "backend": backend.name,
        "backend_notice": notice,
        "library": str(devices.loaded_library("llama") or ""),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "llama_cpp_python": versions.llama_cpp_python,
        "llama_cpp": versions.llama_cpp,
        "ggml": versions.ggml,
        "ggml_commit": versions.ggml_commit,
        "backends": list(build.backends),
        "gpu_backends": gpu,
        "gpu_offload": devices.supports_gpu_offload(),
        "flash_attention_pairs": pairs,
        "flash_attention_pairs_note": pairs_note,
        "int8_k_pair_q8_0_f16": int8_k,
        "devices": [
            {
                "name": d.name,
                "description": d.description,
                "kind": d.kind,
                "backend": d.backend,
                "memory_total_bytes": d.memory_total,
                "memory_free_bytes": d.memory_free,
            }
            for d in devices.list_devices()
        ],
        "system_info": info,
    }


def render(report: DoctorReport) -> str:
    pairs = report["flash_attention_pairs"]
    pairs_text = ", ".join(pairs) if isinstance(pairs, list) else (pairs or "not reported")
    int8_k = report["int8_k_pair_q8_0_f16"]
    verdict = {
        True: "yes: the build has Flash Attention for K=q8_0/V=f16",
        False: "NO: K=q8_0/V=f16 falls back to converting K and V to f16 (slow); rebuild with "
        "-DGGML_CUDA_FA_QUANTS=q8_0-f16;q8_0-q8_0;f16-f16",
        None: "unknown for this backend",
    }[int8_k]
    commit = f" (ggml {report['ggml']}, commit {report['ggml_commit']})" if report["ggml"] else ""
    lines = [
        f"Python            {report['python']} on {report['platform']}",
        f"llama-cpp-python  {report['llama_cpp_python']}",
        f"llama.cpp         {report['llama_cpp']}{commit}",
        f"backend           {report['backend']} ({report['library'] or 'library path unknown'})",
        f"backends          {', '.join(report['backends']) or 'none reported'}",
        f"GPU backends      {', '.join(report['gpu_backends']) or 'none (CPU-only build)'}",
        f"FA K/V pairs      {pairs_text}",
        f"                  ({report['flash_attention_pairs_note']})",
        f"int8-K (q8_0/f16) {verdict}",
        "devices:",
    ]
    if report["backend_notice"]:
        lines.insert(4, f"                  {report['backend_notice']}")
    for d in report["devices"]:
        memory = (
            f"{size_number(d['memory_total_bytes'], 'GiB')} GiB"
            if d["memory_total_bytes"]
            else "memory unknown"
        )
        lines.append(f"  {d['name']:<10} {d['kind']:<14} {d['description']} ({memory})")
    if not report["devices"]:
        lines.append("  (this build does not list its devices)")
    # Device names, the backend's notice (a package's problem, quoting its files) and paths are
    # other programs' and files' text: shown cleaned, each line at most a screenful.

    return "\n".join(safe_text(line, 1000) for line in lines)
