"""The devices llama.cpp would split a model across, with the memory it reads on each (RPC
workers' devices over the network, local GPUs), read before any load in a throwaway child
process that registers the workers as the engine would (app.engine.rpc_devices).

The numbers are llama.cpp's own (ggml_backend_dev_memory, which for a worker's device asks its
rpc-server), so the layer split predicted from them (app.kv.rpc_fit) is the one it makes.
Spawned like backend_probe, so the GUI and CLI processes never load libggml themselves.
"""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.child_answer import ask_child
from app.kv.split_device import SplitDevice
from app.platform.errors import AppError
from app.platform.probes import free_memory_cap

if TYPE_CHECKING:
    from app.engine.devices import Device

READ_TIMEOUT_S = 60.0


def split_order(found: list[Device]) -> list[Device]:
    """llama.cpp's default device list (llama_prepare_model_devices): RPC workers' devices
    first, then GPUs, then integrated GPUs only when there is no GPU; never the CPU."""
    rpc = [d for d in found if d.backend == "RPC"]
    gpus = [d for d in found if d.kind == "GPU" and d.backend != "RPC"]
    igpus = [d for d in found if d.kind == "integrated GPU"]
    return rpc + gpus + (igpus if not gpus else [])


def as_split_devices(found: list[Device]) -> tuple[SplitDevice, ...]:
    """The devices in split order as SplitDevice. A device that reports no memory at all is
    read as the CPU's, as llama.cpp does for the split."""
    cpu = next((d for d in found if d.kind == "CPU"), None)
    result = []
    for device in split_order(found):
        free, total = device.memory_free, device.memory_total
        if free == 0 and total == 0 and cpu is not None:
            free, total = cpu.memory_free, cpu.memory_total
        result.append(SplitDevice(device.name, device.description, free, total))
    return tuple(result)


def _child(conn: Connection[object, object], workers: tuple[str, ...]) -> None:
    """In the child: quiet, register the workers, list the devices."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        import llama_cpp  # noqa: F401  # loads LLAMA_CPP_LIB_PATH's libraries, before numpy

        # These import llama_cpp: only in this child, never in the app or the CLI.
        from app.engine import devices, rpc_devices

        rpc_devices.add_workers(workers)
        # SplitDevice, not Device: unpickling a Device would import llama_cpp in the parent.
        conn.send(as_split_devices(devices.list_devices()))
    except Exception as error:  # noqa: BLE001 - the message is the answer
        conn.send(str(error) or type(error).__name__)
    finally:
        conn.close()


def read_split_devices(
    folder: Path, workers: tuple[str, ...], *, timeout: float = READ_TIMEOUT_S
) -> tuple[SplitDevice, ...]:
    """The devices a load across `workers` on the backend in `folder` would split over, with
    $KVSTUDIO_FREE_MEMORY's cap as their budget. AppError with one sentence when they cannot be
    read (call check_reachable first: llama.cpp aborts on a worker it cannot reach)."""

    cap = free_memory_cap()
    answer, exitcode = ask_child(
        _child, (workers,), folder, name="kvstudio-split-devices", timeout=timeout
    )
    if isinstance(answer, tuple):
        return tuple(
            replace(d, budget_bytes=min(d.free_bytes, cap) if cap is not None else None)
            for d in answer
        )
    why = answer if isinstance(answer, str) else f"the process ended with code {exitcode}"
    raise AppError(f"The workers' devices could not be read ({why.rstrip('.')}).")
