"""Adds llama.cpp RPC workers' devices to the engine's device registry, so the next model load
(devices left to llama.cpp's default choice) splits its layers across them.

llama-cpp-python 0.3.36 has no `rpc_servers` argument and leaves `llama_model_params.devices`
unused, so this calls the backend's libggml-rpc.so the way llama.cpp's `--rpc` does
(ggml_backend_rpc_add_server, then ggml_backend_register). Runs only in the engine process.
A device cannot leave the registry again: EngineProcess starts a fresh engine when the workers
change (app/engine/process.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path

from app.backends.built_in import built_in_folder
from app.platform.errors import EngineFailedError

log = logging.getLogger(__name__)

_added: list[str] = []  # the workers this process registered, in order


def add_workers(workers: tuple[str, ...]) -> None:
    """Register each worker's devices once per process. EngineFailedError with one sentence
    when the backend was built without RPC or the workers differ from those added."""
    if not workers or list(workers) == _added:
        return
    if _added:
        raise EngineFailedError(
            "This engine already loaded across other workers; start a fresh engine to change them."
        )
    folder = os.environ.get("LLAMA_CPP_LIB_PATH") or built_in_folder()
    library = Path(folder) / "libggml-rpc.so" if folder else None
    if library is None or not library.is_file():
        raise EngineFailedError(
            "This backend was built without RPC support: choose a backend package "
            "(kvstudio backend use cpu, or your GPU's) to load across workers."
        )
    # The same files libllama already mapped (one folder), so these are its own copies.
    rpc = ctypes.CDLL(str(library))
    ggml = ctypes.CDLL(str(library.with_name("libggml.so")))
    rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
    rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_register.restype = None
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    for worker in workers:
        # Connects and shakes hands; llama.cpp aborts the process when that fails, so the
        # caller checked the worker answers first (app.load.rpc_workers).
        registry = rpc.ggml_backend_rpc_add_server(worker.encode())
        if not registry:
            raise EngineFailedError(f"llama.cpp could not add the worker at {worker}.")
        ggml.ggml_backend_register(registry)
        _added.append(worker)
        log.info("added the RPC worker at %s", worker)
