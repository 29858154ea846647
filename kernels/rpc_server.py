"""`python -m kernels rpc-server`: give the built-in backend llama.cpp's `ggml-rpc-server`, so a
pip install of KV Studio can be a worker (`kvstudio worker`) as a backend package can.

llama-cpp-python's build (with -DGGML_RPC=ON, as ./quickstart.sh asks) installs libggml-rpc.so
but not llama.cpp's tools. rpc-server is one source file that only talks to libggml's backend
registry, so it is compiled here from the same pinned sdist against the libraries pip built,
and placed beside them (its rpath is $ORIGIN): the worker then runs exactly the build the
engine runs. About 20 s with a C++ compiler; nothing is downloaded when the sdist is cached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.backends.built_in import built_in_folder
from app.platform.errors import AppError
from kernels.isa_proof import IsaProofError, ensure_sdist
from kernels.variants import LLAMA_CPP_PYTHON_VERSION

PROGRAM = "ggml-rpc-server"
_SOURCE = "tools/rpc/rpc-server.cpp"
_HEADERS = "ggml/include/"


class RpcServerBuildError(AppError, ValueError):
    """rpc-server could not be built: one sentence (a ValueError: `python -m kernels` exits 2)."""


def _unpack(sdist: Path, dest: Path) -> Path:
    """rpc-server.cpp and ggml's public headers from the sdist into dest; the source's path."""
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            name = member.name.removeprefix(prefix)
            if name == member.name or not member.isfile() or ".." in Path(name).parts:
                continue
            if name == _SOURCE or (name.startswith(_HEADERS) and name.endswith(".h")):
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular file
                target.write_bytes(source.read())
    if not (dest / _SOURCE).is_file():
        raise RpcServerBuildError(f"{sdist.name} holds no {_SOURCE}.")
    return dest / _SOURCE


def build_rpc_server(log: Callable[[str], None] = print, sdist: Path | None = None) -> Path:
    """Compile ggml-rpc-server into the built-in backend's folder; its path."""
    lib = built_in_folder()
    if lib is None or not (lib / "libggml.so").is_file():
        raise RpcServerBuildError("llama-cpp-python is not installed in this Python.")
    if not (lib / "libggml-rpc.so").is_file():
        raise RpcServerBuildError(
            "This llama-cpp-python was built without GGML_RPC: reinstall it with "
            'CMAKE_ARGS="-DGGML_RPC=ON" (./quickstart.sh does) first.'
        )
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        raise RpcServerBuildError("No C++ compiler found (install build-essential).")
    if sdist is None:
        try:
            sdist = ensure_sdist(log)
        except IsaProofError as error:  # pip could not download it
            raise RpcServerBuildError(str(error)) from error
    target = lib / PROGRAM
    with tempfile.TemporaryDirectory(prefix="kvstudio-rpc-server-") as tmp:
        source = _unpack(sdist, Path(tmp))
        built = Path(tmp) / PROGRAM
        command = [
            compiler,
            "-std=c++17",
            "-O2",
            f"-I{Path(tmp) / _HEADERS}",
            str(source),
            "-o",
            str(built),
            f"-L{lib}",
            "-l:libggml.so",
            "-l:libggml-base.so",
            "-Wl,-rpath,$ORIGIN",  # the libraries beside it, wherever the folder moves
        ]
        log(f"Compiling {PROGRAM} against {lib} ...")
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RpcServerBuildError(f"The compiler failed on {PROGRAM}: {last[:300]}")
        partial = target.with_name(PROGRAM + ".partial")
        shutil.copy2(built, partial)
        partial.chmod(0o755)
        partial.replace(target)
    log(f"{PROGRAM} is at {target}")
    return target
