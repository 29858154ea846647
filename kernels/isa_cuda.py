"""The NVIDIA twin of kernels/isa_proof.py: compile the FA vector-kernel instances with nvcc for one
sm arch and count `IDP.4A` per kernel in `cuobjdump -sass`.

`python -m kernels isa-proof --cuda` writes docs/int8k-isa-sm90.json and its page; the verdict is
kernels/isa_report.py's, the same rules as for RDNA3 (every q8_0-K kernel holds the instruction
unless it is llama.cpp's trapping softcap stub; no kernel of the f16 control does). Needs nvcc;
cuobjdump and nvdisasm are downloaded from PyPI into the cache when missing.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from kernels import cuda_tools, sass
from kernels.isa_proof import (
    REPO,
    IsaProofError,
    ProofRun,
    cache_home,
    ensure_sdist,
    instance_file,
    sha256_of,
    unpack_ggml,
)
from kernels.isa_report import KernelCount, build_report
from kernels.variants import FA_PAIRS, LLAMA_CPP_PYTHON_VERSION

DEFAULT_ARCH = "sm_90"  # the cuda-hopper variant: the H100/H200 of the reference runs
DEFAULT_JSON = REPO / "docs" / "int8k-isa-sm90.json"
DEFAULT_TABLE = REPO / "docs" / "int8k-isa-sm90.md"
COMMAND = "python -m kernels isa-proof --cuda"
# The flags of one llama.cpp CUDA object that decide its machine code, as CMake passes them.
COMPILE_FLAGS = ("-O3", "-std=c++17", "-DNDEBUG", "-DGGML_USE_CUDA")
CUBLAS_STUB = REPO / "kernels" / "cublas_stub"
# What the instances are compiled from: a trimmed sdist (no other backends) hashes the same.
SOURCE_PARTS = ("ggml/include/", "ggml/src/ggml-cuda/")
_ARCH = re.compile(r"^sm_(?P<cc>\d{2,3})[a-z]?$")

Log = Callable[[str], None]


def check_arch(arch: str) -> str:
    match = _ARCH.match(arch)
    if not match:
        raise IsaProofError(f"not an NVIDIA GPU architecture (like sm_90): {arch or 'none given'}.")
    if not sass.has_dp4a(arch):
        raise IsaProofError(
            f"{arch} has no {sass.INSTRUCTION} (it exists from sm_61 on), "
            "so there is nothing to prove."
        )
    return arch


def sources_sha256(src: Path) -> str:
    """sha256 over the files the instances compile from: ggml/include, ggml/src's own files and
    ggml/src/ggml-cuda; equal for the full sdist and one trimmed of the other backends."""
    digest = hashlib.sha256()
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        top_level_src = rel.startswith("ggml/src/") and rel.count("/") == 2
        if rel.startswith(SOURCE_PARTS) or top_level_src:
            digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cublas_headers(nvcc: str) -> str:
    """'toolkit' when the CUDA toolkit beside nvcc has cuBLAS's header, else 'stub'
    (kernels/cublas_stub)."""
    toolkit = Path(nvcc).resolve().parent.parent
    for include in (toolkit / "include", *toolkit.glob("targets/*/include")):
        if (include / "cublas_v2.h").is_file():
            return "toolkit"
    return "stub"


def compile_instance(nvcc: str, src: Path, pair: str, arch: str, out: Path, stub: bool) -> None:
    cmd = [
        nvcc,
        f"-arch={arch}",
        *COMPILE_FLAGS,
        "-Iggml/include",
        "-Iggml/src",
        "-Iggml/src/ggml-cuda",
        *(["-isystem", str(CUBLAS_STUB)] if stub else []),
        "-c",
        instance_file(pair),
        "-o",
        str(out) + ".tmp",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(cmd, cwd=src, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = [line for line in result.stderr.splitlines() if "error" in line.lower()]
        tail = (detail or result.stderr.strip().splitlines() or ["no output"])[-1]
        raise IsaProofError(f"nvcc failed on {instance_file(pair)}: {tail.strip()}")
    Path(str(out) + ".tmp").replace(out)


def disassemble(path: Path) -> str:
    """`cuobjdump -sass` of an object, cubin or library."""
    cuobjdump = cuda_tools.find("cuobjdump")
    if not cuobjdump or not cuda_tools.find("nvdisasm"):
        raise IsaProofError(
            cuda_tools.missing_sentence(
                cuda_tools.missing(("cuobjdump", "nvdisasm")), "the machine code cannot be read"
            )
        )
    result = subprocess.run(
        [cuobjdump, "-sass", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=cuda_tools.cuobjdump_env(),
    )
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise IsaProofError(f"cuobjdump -sass failed on {path.name}: {tail.strip()}")
    return result.stdout


def kernel_counts(functions: Sequence[sass.SassFunction], arch: str) -> list[KernelCount]:
    """The functions of `arch`, demangled; fails when the listing holds none."""
    mine = [f for f in functions if f.arch == arch]
    if not [f for f in mine if f.symbol]:
        raise IsaProofError(f"the {arch} machine code holds no functions.")
    demangler = cuda_tools.find_demangler()
    if not demangler:
        raise IsaProofError(
            f"no C++ demangler ({', '.join(cuda_tools.DEMANGLERS)}) was found to name the kernels."
        )
    try:
        names = cuda_tools.demangle(demangler, [f.symbol for f in mine if f.symbol])
    except OSError as error:
        raise IsaProofError(str(error)) from None
    names[""] = "(code before the first function)"
    return [KernelCount(f.symbol, names[f.symbol], f.count, f.traps) for f in mine]


def toolchain(nvcc: str, headers: str) -> list[str]:
    tools = [f"nvcc {cuda_tools.version_line(nvcc)}"]
    cuobjdump = cuda_tools.find("cuobjdump")
    if cuobjdump:
        tools.append(f"cuobjdump {cuda_tools.version_line(cuobjdump)}")
    tools.append(
        "cublas_v2.h from the CUDA toolkit"
        if headers == "toolkit"
        else "cublas_v2.h: kernels/cublas_stub (host declarations only)"
    )
    return tools


def machine() -> str:
    """'NVIDIA H200, driver 580.159.04' from nvidia-smi, for the record (nothing depends on it)."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "a machine without an NVIDIA GPU"
    gpus = [line.split(", ") for line in result.stdout.strip().splitlines() if ", " in line]
    if result.returncode != 0 or not gpus:
        return "a machine without an NVIDIA GPU"
    name, driver = gpus[0][0], gpus[0][-1]
    return f"{name}, driver {driver}"


def object_key(sha: str, pair: str, arch: str, tools: list[str]) -> str:
    """Cached objects are reused only for the same source, instance, arch, flags and toolchain."""
    nvcc_and_headers = [t for t in tools if not t.startswith("cuobjdump")]
    material = json.dumps([sha, pair, arch, COMPILE_FLAGS, nvcc_and_headers])
    return f"{pair}-{arch}-{hashlib.sha256(material.encode()).hexdigest()[:20]}"


def _setup(sdist: Path | None, log: Log) -> tuple[str, Path, str]:
    nvcc = cuda_tools.find("nvcc")
    if not nvcc:
        raise IsaProofError(
            "nvcc is missing, so the CUDA instances cannot be compiled (install the CUDA toolkit)."
        )
    try:
        cuda_tools.ensure_cuobjdump(log)
    except OSError as error:
        raise IsaProofError(str(error)) from None
    sdist = sdist or ensure_sdist(log)
    sha = sha256_of(sdist)
    root = cache_home() / "cuda"
    src = root / unpack_ggml(sdist, sha, root).lstrip("/")
    return nvcc, src, sha


def prove(
    arch: str = DEFAULT_ARCH,
    pairs: Sequence[str] = FA_PAIRS,
    use_cache: bool = True,
    sdist: Path | None = None,
    log: Log = print,
) -> ProofRun:
    arch = check_arch(arch)
    nvcc, src, sha = _setup(sdist, log)
    headers = cublas_headers(nvcc)
    tools = toolchain(nvcc, headers)
    kernels: dict[str, list[KernelCount]] = {}
    compiled = []
    for pair in pairs:
        # Keyed by the sdist: these are its sources as published. A proof of the patched
        # sources must key by the patch set too (isa_proof.source_key), as the RDNA3 one does.
        obj = cache_home() / "cuda" / "objects" / f"{object_key(sha, pair, arch, tools)}.o"
        if not use_cache or not obj.is_file():
            log(f"Compiling {instance_file(pair)} for {arch}...")
            compile_instance(nvcc, src, pair, arch, obj, headers == "stub")
            compiled.append(pair)
        kernels[pair] = kernel_counts(sass.parse(disassemble(obj)), arch)
    report = build_report(
        version=LLAMA_CPP_PYTHON_VERSION,
        sdist_sha256=sha,
        toolchain=tools,
        flags=[f"-arch={arch}", *COMPILE_FLAGS],
        targets=[arch],
        instance_files={pair: instance_file(pair) for pair in pairs},
        kernels={arch: kernels},
        instruction=sass.INSTRUCTION,
        command=COMMAND,
    )
    report["sources_sha256"] = sources_sha256(src)
    report["machine"] = machine()
    return ProofRun(report, tuple(compiled))


def compile_fresh(pair: str, arch: str = DEFAULT_ARCH, log: Log = print) -> list[KernelCount]:
    """One instance compiled now, never cached: keeps the object cache honest."""
    arch = check_arch(arch)
    nvcc, src, _ = _setup(None, log)
    obj = cache_home() / "cuda" / "fresh" / f"{pair}-{arch}.o"
    compile_instance(nvcc, src, pair, arch, obj, cublas_headers(nvcc) == "stub")
    return kernel_counts(sass.parse(disassemble(obj)), arch)
