"""Build llama-cpp-python for one variant with pip, passing the variant's CMAKE_ARGS.

GPU variants (CUDA, HIP) are built from the pinned sdist with our kernel patches applied
(kernels/patches); the build then leaves a note beside the installed libraries saying which
kernel version it carries, which the app shows for its built-in backend. CPU and Vulkan builds
never compile the patched files, so they build the sdist as it is.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from app.backends.built_in import built_in_folder
from app.backends.manifest import KERNEL_NOTE
from kernels.isa_proof import ensure_sdist
from kernels.package import has_gpu_kernels
from kernels.patch_set import apply as apply_patches
from kernels.patch_set import kernel_version
from kernels.variants import LLAMA_CPP_PYTHON_VERSION, BuildVariant


def build_command(source: str | None, target: str | None, isolated: bool = False) -> list[str]:
    """The pip command; `source` is an sdist path/folder (default: PyPI's pinned version).
    A source given by the user builds with this env's scikit-build-core (no isolation, as on
    the GPU machine, which has no internet); `isolated` lets pip fetch it (our patched copy)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--force-reinstall"]
    if source and not isolated:
        cmd += ["--no-build-isolation", "--no-deps", source]
    elif source:
        cmd += ["--no-deps", source]
    else:
        cmd += [f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"]
    if target:
        cmd += ["--target", target]
    return cmd


def patched_source(source: str | None, workdir: Path) -> Path:
    """A copy of the sdist (a .tar.gz or an unpacked folder; default: the pinned one from PyPI)
    in workdir, with kernels/patches applied; returns the folder pip builds."""
    given = Path(source) if source else ensure_sdist(lambda line: print(line, file=sys.stderr))
    if given.is_dir():
        folder = workdir / given.name
        shutil.copytree(given, folder, symlinks=True)
    else:
        try:
            with tarfile.open(given, "r:gz") as tar:
                tops = {name.split("/", 1)[0] for name in tar.getnames()}
                if len(tops) != 1:
                    raise ValueError(f"{given.name} is not an sdist (one top-level folder).")
                if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                    tar.extractall(workdir, filter="data")
                else:
                    tar.extractall(workdir)
        except (tarfile.TarError, OSError) as error:
            raise ValueError(f"{given} could not be read as an sdist ({error}).") from None
        folder = workdir / tops.pop()
    apply_patches(folder)
    return folder


def installed_lib_folder(target: str | None) -> Path | None:
    """llama_cpp/lib of what pip just installed (into --target, or this environment)."""
    if target:
        return Path(target) / "llama_cpp" / "lib"
    importlib.invalidate_caches()
    return built_in_folder()


def build(variant: BuildVariant, source: str | None, target: str | None, jobs: int) -> int:
    env = dict(os.environ)
    env["CMAKE_ARGS"] = variant.cmake_args_text
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    patched = has_gpu_kernels(variant.cmake_args)
    with tempfile.TemporaryDirectory(prefix="kvstudio-build-") as workdir:
        if patched:
            folder = str(patched_source(source, Path(workdir)))
            cmd = build_command(folder, target, isolated=source is None)
            print(f"Kernel patches applied: {kernel_version()}", file=sys.stderr)
        else:
            cmd = build_command(source, target)
        print(f"CMAKE_ARGS={env['CMAKE_ARGS']!r}", file=sys.stderr)
        print(" ".join(cmd), file=sys.stderr)
        status = subprocess.call(cmd, env=env)
    lib = installed_lib_folder(target)
    if status == 0 and lib is not None and lib.is_dir():
        note = lib / KERNEL_NOTE
        if patched:
            note.write_text(kernel_version() + "\n", encoding="utf-8")
        else:
            note.unlink(missing_ok=True)
    return status
