"""What the installed llama.cpp is: versions, and the devices ggml's backends found.

llama-cpp-python does not bind ggml's device registry, so the few functions needed are
declared here with ctypes on its own libggml. Importing this module imports llama_cpp
(first, before numpy: see docs/llama-cpp-notes.md).
"""

from __future__ import annotations

import ctypes
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import llama_cpp

if TYPE_CHECKING:
    from _ctypes import CFuncPtr, _CDataType  # typeshed's name for any ctypes type

log = logging.getLogger(__name__)

_DEVICE_TYPES = {0: "CPU", 1: "GPU", 2: "integrated GPU", 3: "accelerator", 4: "meta"}


@dataclass(frozen=True)
class Device:
    name: str  # "CPU", "CUDA0", "ROCm0", "Vulkan0"
    description: str
    kind: str  # "CPU" | "GPU" | "integrated GPU" | "accelerator"
    backend: str  # the registry it belongs to: "CPU", "CUDA", ...
    memory_free: int
    memory_total: int


@dataclass(frozen=True)
class Versions:
    llama_cpp_python: str
    llama_cpp: str  # llama_version(), e.g. "0.5.0-dev"
    ggml: str | None
    ggml_commit: str | None


def loaded_library(stem: str, pid: int | None = None) -> Path | None:
    """The file this process (or process `pid`) mapped for lib<stem> (libllama, libggml), read
    from /proc/<pid>/maps; None where there is no such file (other systems) or nothing is mapped."""
    maps = Path(f"/proc/{pid}/maps" if pid is not None else "/proc/self/maps")
    if not maps.is_file():
        return None
    name = re.compile(rf"lib{re.escape(stem)}\.(so|dylib)(\.[\d.]+)?")
    for line in maps.read_text(errors="replace").splitlines():
        # address perms offset dev inode path: the path is the rest of the line, spaces and all
        # (the default data folder is ".../KVStudio/KV Studio/", where backend packages live).
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            path = Path(fields[5])
            if name.fullmatch(path.name):
                return path
    return None


def _lib() -> ctypes.CDLL:
    """The libggml that libllama itself linked. llama_cpp._ggml would load the wheel's own copy
    by path, which is a second ggml (with its own device registry) when LLAMA_CPP_LIB_PATH points
    at a backend package, and even a second copy of the same build (the wheel ships the file
    three times under different names)."""
    loaded = loaded_library("ggml")
    if loaded is not None:
        return ctypes.CDLL(str(loaded))
    from llama_cpp._ggml import libggml

    lib: ctypes.CDLL = libggml  # llama_cpp leaves it untyped
    return lib


def _declare(
    lib: ctypes.CDLL, name: str, restype: type[_CDataType] | None, argtypes: list[type[_CDataType]]
) -> CFuncPtr | None:
    """The library's function `name` with its C signature set; None if the build lacks it."""
    fn: CFuncPtr | None = getattr(lib, name, None)
    if fn is None:
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value else ""


def versions() -> Versions:
    lib = _lib()
    ggml_version = _declare(lib, "ggml_version", ctypes.c_char_p, [])
    ggml_commit = _declare(lib, "ggml_commit", ctypes.c_char_p, [])
    return Versions(
        llama_cpp_python=llama_cpp.__version__,
        llama_cpp=_text(llama_cpp.llama_version()),
        ggml=_text(ggml_version()) if ggml_version else None,
        ggml_commit=_text(ggml_commit()) if ggml_commit else None,
    )


def list_devices() -> list[Device]:
    """Every device ggml's registered backends report (the CPU is always one)."""
    lib = _lib()
    p = ctypes.c_void_p
    count = _declare(lib, "ggml_backend_dev_count", ctypes.c_size_t, [])
    get = _declare(lib, "ggml_backend_dev_get", p, [ctypes.c_size_t])
    name = _declare(lib, "ggml_backend_dev_name", ctypes.c_char_p, [p])
    description = _declare(lib, "ggml_backend_dev_description", ctypes.c_char_p, [p])
    dev_type = _declare(lib, "ggml_backend_dev_type", ctypes.c_int, [p])
    memory = _declare(
        lib,
        "ggml_backend_dev_memory",
        None,
        [p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
    )
    dev_reg = _declare(lib, "ggml_backend_dev_backend_reg", p, [p])
    reg_name = _declare(lib, "ggml_backend_reg_name", ctypes.c_char_p, [p])
    if (
        count is None
        or get is None
        or name is None
        or description is None
        or dev_type is None
        or memory is None
    ):
        log.warning("this llama.cpp build does not expose ggml's device registry")
        return []
    llama_cpp.llama_backend_init()
    devices = []
    for i in range(count()):
        dev = get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        memory(dev, ctypes.byref(free), ctypes.byref(total))
        backend = ""
        if dev_reg and reg_name:
            backend = _text(reg_name(dev_reg(dev)))
        devices.append(
            Device(
                name=_text(name(dev)),
                description=_text(description(dev)),
                kind=_DEVICE_TYPES.get(dev_type(dev), "unknown"),
                backend=backend,
                memory_free=int(free.value),
                memory_total=int(total.value),
            )
        )
    return devices


def system_info() -> str:
    return _text(llama_cpp.llama_print_system_info()).strip()


def has_amx() -> bool:
    """Whether this build's CPU backend runs Intel AMX kernels (built for a CPU that has them)."""
    return "AMX_INT8 = 1" in system_info()


def supports_gpu_offload() -> bool:
    """Whether a GPU is there to offload to. llama_supports_gpu_offload() alone also says yes
    for a CPU build with RPC compiled in (every backend package has it), where no layer can
    leave the CPU unless a worker is named."""
    if not llama_cpp.llama_supports_gpu_offload():
        return False
    return any(d.kind in ("GPU", "integrated GPU") for d in list_devices())
