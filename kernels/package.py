"""Build a backend package: llama.cpp's shared libraries for one variant, portable, with a manifest.

`python -m kernels package cpu` compiles llama.cpp from the pinned llama-cpp-python sdist with
CMake (not pip: the package holds only the libraries) and writes `<out>/<name>/` plus
`<out>/kvstudio-backend-<name>-<version>-<platform>.tar.gz`. Portable means no `-march=native`
(GGML_NATIVE=OFF: an x86-64 AVX2/FMA/F16C baseline, Intel Haswell and AMD Zen onwards) and
explicit GPU architecture lists. Every package is built with GGML_RPC and ships `ggml-rpc-server`.

GPU variants that this machine cannot compile natively run their CMake inside a Debian root
(`--root`, e.g. the forky root of scripts/rocm_root.sh for HIP 6.x) through chroot. The build
folder is kept in the cache, keyed on the sdist and the CMake arguments, so a second run only
relinks; the manifest records how long the compile took and on how many cores.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from app.backends.manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    BackendManifest,
    PackageFile,
    allowed_file_name,
    sha256_file,
)
from kernels.isa_proof import cache_home, ensure_sdist, sha256_of, source_key
from kernels.patch_set import PatchError, kernel_version
from kernels.patch_set import apply as apply_patches
from kernels.variants import FA_PAIRS, LLAMA_CPP_PYTHON_VERSION, BuildVariant

Log = Callable[[str], None]

# What every package is built with, besides the variant's own arguments.
COMMON_CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_RPC=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",  # for tools/mtmd (libmtmd) and tools/rpc (ggml-rpc-server)
    # The libraries find each other next to themselves, wherever the package is unpacked.
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
    # One file per library (libggml.so, not libggml.so -> .so.0 -> .so.0.25.3).
    "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
)
# What a package is, where the pip variant's words do not fit (the pip CPU build is -march=native).
PACKAGE_SUMMARIES = {
    "cpu": "CPU only, portable: x86-64 with AVX2, FMA and F16C (Intel Haswell, AMD Zen and newer)",
}
BUILD_TARGETS = ("llama", "mtmd", "ggml-rpc-server")
_GPU_TARGETS = re.compile(r"^-D(GPU_TARGETS|AMDGPU_TARGETS|CMAKE_CUDA_ARCHITECTURES)=(.+)$")
_FA_QUANTS = re.compile(r"^-DGGML_CUDA_FA_QUANTS=(.+)$")


class PackageBuildError(Exception):
    """The build could not finish: one sentence (the failing step's last error line)."""


def platform_tag() -> str:
    return f"{platform.system().lower()}-{platform.machine()}"


def archive_name(name: str) -> str:
    return f"kvstudio-backend-{name}-{LLAMA_CPP_PYTHON_VERSION}-{platform_tag()}.tar.gz"


def cmake_args(variant: BuildVariant) -> tuple[str, ...]:
    return (*COMMON_CMAKE_ARGS, *variant.cmake_args)


def gpu_targets(args: Sequence[str]) -> tuple[str, ...]:
    for arg in args:
        match = _GPU_TARGETS.match(arg)
        if match:
            return tuple(t for t in match.group(2).split(";") if t)
    return ()


def fa_pairs(args: Sequence[str]) -> tuple[str, ...]:
    """The CUDA/HIP FA pairs the build compiles; () for backends that take every pair."""
    if not has_gpu_kernels(args):
        return ()
    for arg in args:
        match = _FA_QUANTS.match(arg)
        if match:
            return tuple(p for p in match.group(1).split(";") if p)
    return ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")  # llama.cpp's default list


def with_targets(variant: BuildVariant, targets: Sequence[str]) -> BuildVariant:
    """The variant built for fewer GPU targets (a reduced build, named in the manifest)."""
    args = []
    for arg in variant.cmake_args:
        match = _GPU_TARGETS.match(arg)
        args.append(f"-D{match.group(1)}={';'.join(targets)}" if match else arg)
    return BuildVariant(variant.name, variant.summary, tuple(args))


def host_tool(name: str) -> str:
    """A build tool from this Python's environment (the cmake and ninja wheels of the test
    extra) before the system's."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


class Runner:
    """Runs the build's commands on this machine, or inside a Debian root through chroot."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def host_path(self, inside: str) -> Path:
        return (self.root / inside.lstrip("/")) if self.root else Path(inside)

    def run(self, argv: Sequence[str], log_file: Path) -> None:
        if self.root is None:
            cmd = [host_tool(argv[0]), *argv[1:]]
        else:
            env = ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"]
            # hipconfig (run by HIP's CMake files) reads /proc/self/exe: mount /proc in the root,
            # in a private mount namespace so nothing stays mounted if the build is killed.
            cmd = [
                "unshare",
                "--mount",
                "--fork",
                "sh",
                "-c",
                'mount -t proc proc "$1/proc" && exec chroot "$@"',
                "sh",
                str(self.root),
                *env,
                "HIP_PLATFORM=amd",
                "LC_ALL=C",
                *argv,
            ]
        with log_file.open("a") as out:
            out.write(f"$ {shlex.join(cmd)}\n")
            out.flush()
            code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
        if code != 0:
            lines = log_file.read_text(errors="replace").splitlines()
            errors = [line for line in lines if "error" in line.lower()] or lines or ["no output"]
            raise PackageBuildError(
                f"{Path(argv[0]).name} failed (log: {log_file}): {errors[-1].strip()[:300]}"
            )


def has_gpu_kernels(args: Sequence[str]) -> bool:
    """Whether the build compiles llama.cpp's CUDA/HIP kernels, the ones kernels/patches changes."""
    return any(a in ("-DGGML_HIP=ON", "-DGGML_CUDA=ON") for a in args)


def kernel_of(args: Sequence[str]) -> str:
    """The kernel version a build with these CMake arguments carries ("" without GPU kernels)."""
    return kernel_version() if has_gpu_kernels(args) else ""


def unpack_llama_cpp(sdist: Path, sha: str, dest: Path, patched: bool = False) -> Path:
    """The sdist's vendor/llama.cpp tree at dest (once per sdist), with kernels/patches applied
    when `patched` (dest must then be a folder for patched sources, see source_key)."""
    if (dest / "CMakeLists.txt").is_file():
        return dest
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for member in tar:
            if not member.name.startswith(prefix) or member.name == prefix:
                continue
            if not (member.isfile() or member.isdir()) or ".." in Path(member.name).parts:
                continue  # links and odd entries: none is needed to build the libraries
            member.name = member.name[len(prefix) :]
            members.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(partial, members=members, filter="data")
        else:
            tar.extractall(partial, members=members)
    if not (partial / "CMakeLists.txt").is_file():
        raise PackageBuildError(f"{sdist.name} holds no vendor/llama.cpp sources.")
    if patched:
        try:
            apply_patches(partial)
        except PatchError as error:
            raise PackageBuildError(str(error)) from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(dest)
    return dest


def ggml_version(src: Path) -> str:
    text = (src / "ggml" / "CMakeLists.txt").read_text()
    parts = [
        re.search(rf"set\(GGML_VERSION_{p} (\d+)\)", text) for p in ("MAJOR", "MINOR", "PATCH")
    ]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


def collect(bin_dir: Path, dest: Path) -> dict[str, PackageFile]:
    """Copy the package's files out of the build's bin folder; their names and hashes."""
    dest.mkdir(parents=True)
    files: dict[str, PackageFile] = {}
    for path in sorted(bin_dir.iterdir()):
        if path.is_symlink() or not path.is_file() or not allowed_file_name(path.name):
            continue
        shutil.copy2(path, dest / path.name)
        files[path.name] = PackageFile(sha256_file(dest / path.name), path.stat().st_size)
    if "libllama.so" not in files:
        raise PackageBuildError(f"the build left no libllama.so in {bin_dir}.")
    return files


def count_instructions(folder: Path) -> dict[str, dict[str, int]]:
    """{arch: {pair: dot instructions}} for a HIP or CUDA library in the package; {} otherwise."""
    from kernels import lib_isa

    counts: dict[str, dict[str, int]] = {}
    for backend in ("hip", "cuda"):
        library = lib_isa.find_library(folder, backend)
        if library is None:
            continue
        for pair in FA_PAIRS:
            isa = lib_isa.count_library(library, backend, pair)
            if isa.missing:
                raise PackageBuildError(
                    f"cannot count instructions in {library.name}: {isa.missing}"
                )
            for report in isa.reports:
                for target, kernels in report["kernels"].items():
                    per = counts.setdefault(target, {})
                    for pair_name, entries in kernels.items():
                        per[pair_name] = sum(e["count"] for e in entries)
    return counts


def build_package(
    variant: BuildVariant,
    out: Path,
    *,
    root: Path | None = None,
    jobs: int = os.cpu_count() or 2,
    note: str = "",
    log: Log = print,
) -> Path:
    """Build (or relink from the cached build) and write <out>/<name>/ and its archive (not yet
    signed: scripts/release.py signs it, with the release's version); returns the folder.
    One build at a time on this machine: two processes building into one cached folder at once
    (the test workers, when pytest runs without scripts/test_builds.py first) left a
    libllama.so with undefined symbols, and they share the unpacked source tree too."""
    with _held(cache_home() / "backend-build.lock"):
        return _build_package(variant, out, root=root, jobs=jobs, note=note, log=log)


@contextmanager
def _held(lock: Path) -> Iterator[None]:
    """An exclusive OS lock on `lock` while the block runs: waits for the holder, and the OS lets
    go when a holder dies, so a killed build never leaves the cache locked."""
    import fcntl  # the package builds run on Linux only

    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        yield


def _forget_foreign_configure(build_dir: Path, runner: Runner) -> None:
    """Drop a cached CMake configure made with a cmake that is gone (another checkout's venv,
    since deleted: CI's clone shares this cache), over which reconfiguring fails in
    configure_file. The compiled objects stay, so the build after it still only relinks."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return
    found = re.search(r"^CMAKE_COMMAND:INTERNAL=(.+)$", cache.read_text(errors="replace"), re.M)
    if found and not runner.host_path(found.group(1).strip()).exists():
        cache.unlink()
        shutil.rmtree(build_dir / "CMakeFiles", ignore_errors=True)


def _build_package(
    variant: BuildVariant, out: Path, *, root: Path | None, jobs: int, note: str, log: Log
) -> Path:
    if root is not None and os.geteuid() != 0:
        raise PackageBuildError("building inside a Debian root needs root (chroot).")
    sdist = ensure_sdist(log)
    sha = sha256_of(sdist)
    args = cmake_args(variant)
    key = hashlib.sha256("\n".join(args).encode()).hexdigest()[:10]
    runner = Runner(root)
    # GPU builds compile llama.cpp's CUDA/HIP kernels with our patches; the others never compile
    # the patched files, so they keep the plain sources (and their cached build).
    patched = has_gpu_kernels(args)
    source = source_key(sha, patched)
    src_inside = (
        f"/kvstudio/backend-src/{source}" if root else str(cache_home() / "backend-src" / source)
    )
    build_inside = (
        f"/kvstudio/backend-build/{variant.name}-{source}-{key}"
        if root
        else str(cache_home() / "backend-build" / f"{variant.name}-{source}-{key}")
    )
    src = unpack_llama_cpp(sdist, sha, runner.host_path(src_inside), patched)
    build_dir = runner.host_path(build_inside)
    build_dir.mkdir(parents=True, exist_ok=True)
    log_file = build_dir / "kvstudio-build.log"
    _forget_foreign_configure(build_dir, runner)
    fresh = not (build_dir / "CMakeCache.txt").exists()  # else the cached build only relinks
    if root is not None:
        generator = ["-G", "Ninja"] if (root / "usr/bin/ninja").exists() else []
    else:
        ninja = host_tool("ninja")
        has_ninja = Path(ninja).is_file()
        generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if has_ninja else []
    started = time.monotonic()
    log(f"Configuring llama.cpp ({variant.name}): {' '.join(variant.cmake_args) or 'CPU only'}")
    runner.run(["cmake", "-S", src_inside, "-B", build_inside, *generator, *args], log_file)
    log(f"Compiling {', '.join(BUILD_TARGETS)} with {jobs} jobs (log: {log_file})...")
    runner.run(
        ["cmake", "--build", build_inside, "--parallel", str(jobs), "--target", *BUILD_TARGETS],
        log_file,
    )
    seconds = round(time.monotonic() - started, 1)
    name = variant.name
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    files = collect(build_dir / "bin", folder)
    targets = gpu_targets(args)
    manifest = BackendManifest(
        name=name,
        summary=PACKAGE_SUMMARIES.get(name, variant.summary),
        platform=platform_tag(),
        llama_cpp_python=LLAMA_CPP_PYTHON_VERSION,
        ggml_version=ggml_version(src),
        source_sha256=sha,
        cmake_args=args,
        gpu_targets=targets,
        fa_pairs=fa_pairs(args),
        kernel=kernel_of(args),
        files=files,
        instruction_counts=count_instructions(folder),
        build={
            "seconds": seconds,
            "fresh": fresh,  # False: the build folder was cached, so seconds is a relink
            "cores": jobs,
            "date": time.strftime("%Y-%m-%d"),
            "toolchain": _toolchain(root),
            **({"note": note} if note else {}),
        },
    )
    (folder / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
    write_archive(folder, out / archive_name(name))
    log(f"Wrote {folder} and {archive_name(name)} ({seconds} s).")
    return folder


def _toolchain(root: Path | None) -> list[str]:
    if root is None:
        return []
    ready = root / ".kvstudio-ready"
    return ready.read_text().splitlines() if ready.is_file() else []


def write_archive(folder: Path, archive: Path) -> None:
    """A .tar.gz holding the folder (one top-level directory, plain files only): the manifest
    first, then its signature when the folder has one (scripts/release.py sign), then the files;
    the app reads and checks the first two before it unpacks anything else."""
    first = [folder / MANIFEST_NAME, folder / SIGNATURE_NAME]
    rest = sorted(p for p in folder.iterdir() if p not in first)
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in [p for p in first if p.exists()] + rest:
            tar.add(path, arcname=f"{folder.name}/{path.name}", recursive=False)
    os.replace(tmp, archive)
