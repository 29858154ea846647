"""Find NVIDIA's binary tools (nvcc, cuobjdump, nvdisasm) and a C++ demangler.

They live in many places: on PATH, in a CUDA toolkit (CUDA_HOME, /usr/local/cuda), in the PyPI
wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm installed into some Python (nvidia/cu13/bin),
or in the copy `python -m kernels isa-proof --cuda` downloads into the kvstudio cache.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kernels.isa_proof import cache_home

# The wheels isa-proof --cuda fetches when no cuobjdump is installed (5.5 MB together).
TOOL_WHEELS = ("nvidia-cuda-cuobjdump==13.5.37", "nvidia-cuda-nvdisasm==13.5.37")
DEMANGLERS = ("c++filt", "llvm-cxxfilt", "cu++filt")
INSTALL_HINT = (
    "the CUDA toolkit has them, or `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`"
)

Log = Callable[[str], None]


def tools_cache() -> Path:
    return cache_home() / "cuda-tools"


def _candidate_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs += [Path("/usr/local/cuda/bin"), *sorted(Path("/usr/local").glob("cuda-*/bin"))]
    nvcc = shutil.which("nvcc")
    if (
        nvcc
    ):  # /usr/local/bin/nvcc may be a wrapper script; the toolkit's bin is beside the real one
        dirs.append(Path(nvcc).resolve().parent)
    # pip's wheels put them in site-packages/nvidia/<cu13|cuda_cuobjdump|...>/bin.
    for entry in [*sys.path, str(tools_cache())]:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            dirs += sorted(base.glob("*/bin"))
    return list(dict.fromkeys(dirs))


def find(name: str) -> str | None:
    for folder in _candidate_dirs():
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def find_demangler() -> str | None:
    return next((path for name in DEMANGLERS if (path := find(name))), None)


def missing(names: Sequence[str]) -> list[str]:
    return [name for name in names if not find(name)]


def missing_sentence(names: Sequence[str], purpose: str) -> str:
    """One sentence naming what is missing, e.g. 'cuobjdump and nvdisasm are missing ...'."""
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = "is" if len(names) == 1 else "are"
    return f"{listed} {verb} missing, so {purpose} ({INSTALL_HINT})."


def cuobjdump_env() -> dict[str, str]:
    """cuobjdump runs nvdisasm, which it looks for on PATH or in NVDISASM_PATH."""
    env = dict(os.environ)
    nvdisasm = find("nvdisasm")
    if nvdisasm:
        env["NVDISASM_PATH"] = str(Path(nvdisasm).parent)
        env["PATH"] = str(Path(nvdisasm).parent) + os.pathsep + env.get("PATH", "")
    return env


def ensure_cuobjdump(log: Log = print) -> None:
    """cuobjdump and nvdisasm from PyPI into the kvstudio cache, when none is installed."""
    if not missing(("cuobjdump", "nvdisasm")):
        return
    folder = tools_cache()
    log(f"Downloading cuobjdump and nvdisasm ({', '.join(TOOL_WHEELS)}) with pip...")
    wheels = folder / "wheels"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    result = subprocess.run(
        [*cmd, *TOOL_WHEELS, "-d", str(wheels)], capture_output=True, text=True, check=False
    )
    found = sorted(wheels.glob("*.whl"))
    if result.returncode != 0 or len(found) < len(TOOL_WHEELS):
        raise OSError(f"pip could not download {' and '.join(TOOL_WHEELS)}.")
    for wheel in found:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith("nvidia/") and "/bin/" in member and ".." not in member:
                    archive.extract(member, folder)
                    path = folder / member
                    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def version_line(tool: str) -> str:
    """'release 13.0, V13.0.88' from `tool --version`, or '' when it says nothing useful."""
    result = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if "release" in line]
    return lines[-1].split("tools, ", 1)[-1].strip() if lines else ""


def demangle(demangler: str, symbols: Sequence[str]) -> dict[str, str]:
    result = subprocess.run(
        [demangler], input="\n".join(symbols) + "\n", capture_output=True, text=True, check=False
    )
    names = result.stdout.splitlines()
    if result.returncode != 0 or len(names) != len(symbols):
        raise OSError(f"{Path(demangler).name} did not demangle the kernel names.")
    return dict(zip(symbols, names, strict=True))
