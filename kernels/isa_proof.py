"""Compile llama.cpp's FA vector-kernel instances for RDNA3 and read their machine code.

`python -m kernels isa-proof` proves the int8-K claim at the instruction level: the q8_0-K Flash
Attention kernels contain `v_dot4_i32_iu8` and the f16/f16 control does not (see docs/int8k-isa.md).
hipcc comes from a Debian 13 root made by scripts/hip_root.sh and runs there through chroot, so
this needs root. This module only orchestrates subprocesses; kernels/isa_report.py judges.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.backends.manifest import sha256_file
from kernels.isa_report import KernelCount, build_report, scan
from kernels.patch_set import PatchError, kernel_version, patch_set_sha256
from kernels.patch_set import apply as apply_patches
from kernels.variants import FA_PAIRS, LLAMA_CPP_PYTHON_VERSION, VARIANTS

REPO = Path(__file__).resolve().parents[1]
HIP_ROOT_SCRIPT = REPO / "scripts" / "hip_root.sh"
# The targets the rocm-rdna3 variant compiles for: the proof covers exactly what that build ships.
DEFAULT_TARGETS = tuple(
    next(a for a in VARIANTS["rocm-rdna3"].cmake_args if a.startswith("-DGPU_TARGETS="))
    .split("=", 1)[1]
    .split(";")
)
DEFAULT_JSON = REPO / "docs" / "int8k-isa-report.json"
DEFAULT_TABLE = REPO / "docs" / "int8k-isa.md"
# The flags of one llama.cpp HIP object, minus what CMake adds for linking and warnings.
COMPILE_FLAGS = (
    "-O3",
    "-std=c++17",
    "-DGGML_USE_HIP",
    "-DGGML_HIP_NO_VMM",
    "-DGGML_HIP_NO_MMQ_MFMA",
    "-DNDEBUG",
)
HIPBLAS_INCLUDE = "/opt/hipblas/usr/include"  # where hip_root.sh unpacks libhipblas-dev
INSTANCE_DIR = "ggml/src/ggml-cuda/template-instances"
_TARGET = re.compile(r"^gfx[0-9a-f]{3,4}$")

Log = Callable[[str], None]


class IsaProofError(Exception):
    """Something outside the check failed (no root, no network, a compile error): one sentence."""


@dataclass(frozen=True)
class ProofRun:
    report: dict
    compiled: tuple[str, ...]  # instances compiled in this run (the others came from the cache)


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvstudio"


def default_root() -> Path:
    return cache_home() / "hip-root-trixie"


def instance_file(pair: str) -> str:
    return f"{INSTANCE_DIR}/fattn-vec-instance-{pair}.cu"


def check_targets(targets: Sequence[str]) -> tuple[str, ...]:
    bad = [t for t in targets if not _TARGET.match(t)]
    if bad or not targets:
        raise IsaProofError(
            f"not an AMD GPU target (like gfx1100): {', '.join(bad) or 'none given'}."
        )
    return tuple(dict.fromkeys(targets))


def ensure_root(root: Path | None = None, log: Log = print) -> Path:
    """The Debian 13 hipcc root, made by scripts/hip_root.sh when missing (about a minute)."""
    root = root or default_root()
    if (root / ".kvstudio-ready").is_file():
        return root
    if not HIP_ROOT_SCRIPT.is_file():
        raise IsaProofError(f"{HIP_ROOT_SCRIPT} is missing; isa-proof runs from a source checkout.")
    proc = subprocess.Popen(
        ["bash", str(HIP_ROOT_SCRIPT), str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = ""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("hip_root.sh: "):  # its one-sentence failure, raised below
            last = line.strip()
        elif line.strip():
            log(line.rstrip())
    if proc.wait() != 0:
        raise IsaProofError(last.removeprefix("hip_root.sh: ") or "scripts/hip_root.sh failed.")
    return root


def ensure_sdist(log: Log = print) -> Path:
    """The pinned llama-cpp-python sdist, downloaded once with pip into the cache."""
    folder = cache_home() / "sdist"
    path = folder / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    if path.is_file():
        return path
    log(f"Downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} source with pip...")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-binary",
        ":all:",
        "--no-deps",
        f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
        "-d",
        str(folder),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not path.is_file():
        raise IsaProofError(
            f"pip could not download the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist."
        )
    return path


def sha256_of(path: Path) -> str:
    return sha256_file(path)


def source_key(sha: str, patched: bool) -> str:
    """Names the sources: the sdist's hash, plus the patch set's when kernels/patches is applied."""
    return f"{sha[:16]}-{kernel_version()}-{patch_set_sha256()[:8]}" if patched else sha[:16]


def unpack_ggml(sdist: Path, sha: str, root: Path, patched: bool = False) -> str:
    """ggml's include/ and src/ from the sdist, inside the root, with our kernel patches when
    `patched`; returns the path as seen in the root."""
    inside = f"/kvstudio/src/{source_key(sha, patched)}"
    dest = root / inside.lstrip("/")
    if (dest / "ggml").is_dir():
        return inside
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by an interrupted run
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for member in tar:
            if member.name.startswith((prefix + "ggml/include/", prefix + "ggml/src/")):
                member.name = member.name[len(prefix) :]
                members.append(member)
        if not members:
            raise IsaProofError(f"{sdist.name} holds no vendor/llama.cpp/ggml sources.")
        # tarfile's "data" filter exists from Python 3.11.4 (Debian 12 has 3.11.2): check by
        # hand too.
        unsafe = [
            m.name for m in members if not (m.isfile() or m.isdir()) or ".." in Path(m.name).parts
        ]
        if unsafe:
            raise IsaProofError(f"{sdist.name} holds an unexpected entry: {unsafe[0]}.")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(partial, members=members, filter="data")
        else:
            tar.extractall(partial, members=members)
    if patched:
        try:
            apply_patches(partial)
        except PatchError as error:
            raise IsaProofError(str(error)) from None
    partial.rename(dest)
    return inside


def toolchain(root: Path) -> list[str]:
    """'package version' lines of hipcc, clang and the device libraries, as hip_root.sh
    recorded them."""
    lines = (root / ".kvstudio-ready").read_text().splitlines()
    return sorted(" ".join(line.split()) for line in lines if line.strip())


def _llvm_bin(root: Path) -> str:
    found = sorted(root.glob("usr/lib/llvm-*/bin/clang-offload-bundler"))
    if not found:
        raise IsaProofError(f"{root} has no LLVM tools; delete it and run again to remake it.")
    return "/" + str(found[-1].parent.relative_to(root))


def _need_root() -> None:
    if os.geteuid() != 0:
        raise IsaProofError(
            "isa-proof needs root: hipcc runs inside a Debian 13 root through chroot."
        )


def _in_root(root: Path, script: str, stdin: str | None = None) -> str:
    _need_root()
    env = [
        "/usr/bin/env",
        "-i",
        f"PATH={_llvm_bin(root)}:/usr/bin:/bin",
        "HOME=/root",
        "LC_ALL=C",
        # hipcc otherwise picks the NVIDIA platform when it sees an nvcc (it cannot in the root,
        # but say it anyway).
        "HIP_PLATFORM=amd",
    ]
    result = subprocess.run(
        ["chroot", str(root), *env, "sh", "-ec", script],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = [line for line in result.stderr.splitlines() if "error" in line.lower()]
        tail = (detail or result.stderr.strip().splitlines() or ["no output"])[-1]
        raise IsaProofError(f"a command in the HIP root failed: {tail.strip()}")
    return result.stdout


def compile_instance(root: Path, src: str, pair: str, targets: Sequence[str], out: str) -> None:
    """One hipcc call compiles the instance for every target into one fat object at `out`
    (in root)."""
    cmd = [
        "hipcc",
        *(f"--offload-arch={t}" for t in targets),
        *COMPILE_FLAGS,
        "-isystem",
        HIPBLAS_INCLUDE,
        "-Iggml/include",
        "-Iggml/src",
        "-Iggml/src/ggml-cuda",
        "-x",
        "hip",
        "-c",
        instance_file(pair),
        "-o",
        out + ".tmp",
    ]
    # hipcc's probe for GPUs (lspci) complains about the missing /proc; only the compiler's own
    # messages are worth passing on, and only when it failed.
    log = shlex.quote(out + ".log")
    _in_root(
        root,
        f"cd {shlex.quote(src)}; mkdir -p {shlex.quote(os.path.dirname(out))}; "
        f"if ! {shlex.join(cmd)} 2>{log}; then grep -v -e pcilib -e lspci {log} >&2; exit 1; fi; "
        f"rm -f {log}; mv {shlex.quote(out + '.tmp')} {shlex.quote(out)}",
    )


def disassemble(root: Path, obj: str, targets: Sequence[str]) -> dict[str, str]:
    """`llvm-objdump -d` of each target's code object in the fat object `obj` (a path in root)."""
    work = f"/kvstudio/work/{Path(obj).stem}"
    steps = [
        f"rm -rf {work}",
        f"mkdir -p {work}",
        f"llvm-objcopy --dump-section=.hip_fatbin={work}/fatbin {shlex.quote(obj)} /dev/null",
    ]
    for t in targets:
        steps += [
            (
                f"clang-offload-bundler --unbundle --type=o --input={work}/fatbin "
                f"--targets=hipv4-amdgcn-amd-amdhsa--{t} --output={work}/{t}.co"
            ),
            f"llvm-objdump -d --mcpu={t} {work}/{t}.co > {work}/{t}.s",
        ]
    _in_root(root, "; ".join(steps))
    listings = {t: (root / work.lstrip("/") / f"{t}.s").read_text() for t in targets}
    for t, text in listings.items():
        if not scan(text):
            raise IsaProofError(f"the {t} code object of {Path(obj).name} has no functions.")
    return listings


def demangle(root: Path, symbols: Sequence[str]) -> dict[str, str]:
    out = _in_root(root, "llvm-cxxfilt", stdin="\n".join(symbols) + "\n").splitlines()
    if len(out) != len(symbols):
        raise IsaProofError("llvm-cxxfilt returned a different number of names than it was given.")
    return dict(zip(symbols, out, strict=True))


def object_key(sha: str, pair: str, targets: Sequence[str], tools: list[str]) -> str:
    """Cached objects are reused only for the same source, instance, targets, flags and
    toolchain."""
    material = json.dumps([sha, pair, list(targets), COMPILE_FLAGS, HIPBLAS_INCLUDE, tools])
    return f"{pair}-{hashlib.sha256(material.encode()).hexdigest()[:20]}"


def kernel_counts(root: Path, listings: dict[str, str]) -> dict[str, list[KernelCount]]:
    per_target = {t: scan(text) for t, text in listings.items()}
    symbols = sorted({s for found in per_target.values() for s in found})
    names = demangle(root, [s for s in symbols if s]) | {"": "(code before the first symbol)"}
    return {
        t: [KernelCount(s, names[s], n, traps) for s, (n, traps) in found.items()]
        for t, found in per_target.items()
    }


def prove(
    root: Path | None = None,
    targets: Sequence[str] = DEFAULT_TARGETS,
    pairs: Sequence[str] = FA_PAIRS,
    use_cache: bool = True,
    log: Log = print,
) -> ProofRun:
    targets = check_targets(targets)
    _need_root()
    root = ensure_root(root, log)
    sdist = ensure_sdist(log)
    sha = sha256_of(sdist)
    # The kernels the rocm-rdna3 backend ships: llama.cpp's with our patches (kernels/patches).
    src = unpack_ggml(sdist, sha, root, patched=True)
    tools = toolchain(root)
    kernels: dict[str, dict[str, list[KernelCount]]] = {t: {} for t in targets}
    compiled = []
    for pair in pairs:
        obj = f"/kvstudio/objects/{object_key(source_key(sha, True), pair, targets, tools)}.o"
        if not use_cache or not (root / obj.lstrip("/")).is_file():
            log(f"Compiling {instance_file(pair)} for {', '.join(targets)}...")
            compile_instance(root, src, pair, targets, obj)
            compiled.append(pair)
        for target, counts in kernel_counts(root, disassemble(root, obj, targets)).items():
            kernels[target][pair] = counts
    report = build_report(
        version=LLAMA_CPP_PYTHON_VERSION,
        sdist_sha256=sha,
        toolchain=tools,
        flags=list(COMPILE_FLAGS),
        targets=list(targets),
        instance_files={pair: instance_file(pair) for pair in pairs},
        kernels=kernels,
    )
    report["kernel"] = kernel_version()
    return ProofRun(report, tuple(compiled))


def compile_fresh(root: Path | None, pair: str, target: str, log: Log = print) -> list[KernelCount]:
    """One instance for one target, compiled now, never cached: keeps the object cache honest."""
    _need_root()
    root = ensure_root(root, log)
    sdist = ensure_sdist(log)
    sha = sha256_of(sdist)
    src = unpack_ggml(sdist, sha, root, patched=True)
    obj = f"/kvstudio/fresh/{pair}-{target}.o"
    compile_instance(root, src, pair, [target], obj)
    return kernel_counts(root, disassemble(root, obj, [target]))[target]
