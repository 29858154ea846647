"""Load a backend once in a child process: does it load, what is it, which devices does it see.

Used before a backend becomes the choice (`kvstudio backend use/add/verify`, the Backends
panel): a package whose libraries do not load (a missing system library, another CPU, a
broken file) fails here, in a throwaway process, and never in the engine. The child is spawned
like the engine (app.engine.child_answer.spawn_environment), so it loads exactly what the engine
would. It also confirms that the libllama it mapped is the package's own, not the built-in one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from app.backends.manifest import BadPackageError
from app.backends.system_programs import system_env
from app.engine.build_info import BuildInfo, parse_system_info
from app.engine.child_answer import ask_child
from app.platform.units import size

PROBE_TIMEOUT_S = 120.0  # a GPU backend initialising its driver can take a while


class BackendLoadError(BadPackageError):
    """The backend's libraries do not load: one sentence."""


@dataclass(frozen=True)
class ProbeResult:
    library: str  # the libllama file the child mapped
    llama_cpp: str  # llama_version()
    system_info: str
    devices: tuple[str, ...]  # "CPU: AMD EPYC (24.0 GiB)"
    gpu_devices: tuple[str, ...] = ()  # names of the GPU devices found ("CUDA0", "Vulkan0")

    @property
    def build(self) -> BuildInfo:
        return parse_system_info(self.system_info)


def _child(conn: Connection[object, object]) -> None:
    """In the child: quiet, import llama_cpp (which loads the libraries), report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        import llama_cpp  # loads LLAMA_CPP_LIB_PATH's libllama (or the wheel's)

        # It imports llama_cpp too: here, inside the try, so a library that does not load is
        # reported by this child, and never imported in the app.
        from app.engine import devices

        found = devices.loaded_library("llama")
        listed = devices.list_devices()
        conn.send(
            {
                "library": str(found or ""),
                "llama_cpp": devices.versions().llama_cpp,
                "system_info": devices.system_info(),
                "devices": [f"{d.name}: {d.description} ({size(d.memory_total)})" for d in listed],
                "gpu_devices": [d.name for d in listed if d.kind in ("GPU", "integrated GPU")],
            }
        )
        del llama_cpp
    except Exception as error:  # noqa: BLE001 - the message is the answer
        folder = os.environ.get("LLAMA_CPP_LIB_PATH")
        missing = missing_system_libraries(Path(folder)) if folder else []
        conn.send("; ".join(missing) if missing else _reason(error))
    finally:
        conn.close()


def missing_system_libraries(folder: Path) -> list[str]:
    """ "libggml-cpu.so needs libgomp.so.1, which this system lacks" for each library in `folder`
    the dynamic loader cannot find (Linux, through ldd; elsewhere an empty list). The load error
    alone does not say it: a frozen app's ctypes replaces it with "Failed to load dynlib/dll"."""
    if not sys.platform.startswith("linux") or shutil.which("ldd") is None:
        return []
    missing: dict[str, str] = {}  # each missing library once, named by the first that needs it
    for library in sorted(folder.glob("lib*.so")):
        result = subprocess.run(
            ["ldd", str(library)], capture_output=True, text=True, env=system_env()
        )
        for line in result.stdout.splitlines():
            name, _, target = line.strip().partition(" => ")
            if target.startswith("not found") and name not in missing:
                missing[name] = f"{library.name} needs {name}, which this system lacks"
    return list(missing.values())


def _reason(error: Exception) -> str:
    """llama-cpp-python's "Failed to load shared library '/long/path/libllama.so': why" as
    "libllama.so: why"."""
    text = " ".join(str(error).split()) or type(error).__name__
    match = re.match(r"Failed to load shared library '([^']*)': (.*)", text)
    if match:
        text = f"{Path(match.group(1)).name}: {match.group(2)}"
    return text[:400]


def probe(folder: Path | None, *, timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Load the backend in `folder` (None: the built-in one) in a child process."""

    name = folder.name if folder is not None else "built-in"
    answer, exitcode = ask_child(_child, (), folder, name="kvstudio-backend-probe", timeout=timeout)
    if isinstance(answer, str):
        raise BackendLoadError(f"The {name} backend does not load: {answer.rstrip('.')}.")
    if not isinstance(answer, dict):
        how = (
            f"was killed by signal {-exitcode}"
            if exitcode is not None and exitcode < 0
            else f"exited with code {exitcode}"
            if exitcode is not None
            else f"gave no answer in {timeout:.0f} s"
        )
        raise BackendLoadError(f"The {name} backend does not load: the test process {how}.")
    result = ProbeResult(
        library=answer["library"],
        llama_cpp=answer["llama_cpp"],
        system_info=answer["system_info"],
        devices=tuple(answer["devices"]),
        gpu_devices=tuple(answer["gpu_devices"]),
    )
    if folder is not None and result.library:
        loaded = Path(result.library).resolve()
        if loaded.parent != folder.resolve():
            raise BackendLoadError(
                f"The {name} backend did not load its own libllama (got {loaded}); "
                "is LLAMA_CPP_LIB_PATH set to something else?"
            )
    return result
