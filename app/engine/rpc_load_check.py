"""The checks before a load across RPC workers (CLI and GUI alike), in the order a user would
want to hear about a problem: every worker answers, every worker's build runs the K/V mode,
and the model at that context fits on every device, the CPU's share included.

Blocking (connections, a child process that reads the devices): the GUI calls it off its thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.backends.store import BackendStore, library_folder
from app.engine.split_devices import read_split_devices
from app.kv.rpc_fit import SplitFit
from app.kv.split_device import SplitDevice
from app.load.load_check import CLI_ADVICE, check_split_fits
from app.load.profile import LoadProfile
from app.load.rpc_workers import check_layer_split, check_reachable
from app.load.worker_hello import WorkerBuild, ask_worker, check_workers_run_mode
from app.models.gguf_read import read_gguf_header
from app.models.model_files import model_size
from app.platform.errors import BadInputError, ContextTooLargeError
from app.platform.probes import read_free_memory


@dataclass(frozen=True)
class RpcLoadCheck:
    """What the checks found, for the caller to show."""

    builds: tuple[WorkerBuild, ...]  # the workers that reported their build
    unreported: tuple[str, ...]  # workers with no build report: their K/V support is unknown
    devices: tuple[SplitDevice, ...]  # llama.cpp's devices for the split, in its order
    fit: SplitFit  # each device's share (weights, KV cache, compute)

    def notices(self) -> list[str]:
        return [
            f"The worker at {worker} does not report its build (it was not started with "
            "'kvstudio worker'), so whether it runs this K/V mode is not checked."
            for worker in self.unreported
        ]


CLI_BACKEND_ADVICE = "kvstudio backend use cpu, or your GPU's"


def backend_with_rpc(data_folder: Path, how: str = CLI_BACKEND_ADVICE) -> Path:
    """The folder of the chosen backend's libraries (a package's, or the built-in one's), or
    BadInputError with one sentence when that build lacks llama.cpp's RPC client; `how` says
    how to choose a package ("kvstudio backend use cpu", "the Backends page")."""

    backend, notice = BackendStore(data_folder).for_engine()
    folder = library_folder(backend)
    if folder is None or not (folder / "libggml-rpc.so").is_file():
        rebuild = (
            "run ./quickstart.sh again, which builds llama-cpp-python with GGML_RPC, or "
            if backend.folder is None
            else ""
        )
        raise BadInputError(
            (f"{notice} " if notice else "")
            + f"The {backend.name} backend was built without RPC support: {rebuild}choose a "
            f"backend package ({how}) to load across workers."
        )
    return folder


def check_rpc_load(
    options: LoadProfile, backend_folder: Path, *, force: bool = False, advice: str = CLI_ADVICE
) -> RpcLoadCheck:
    """Raise with one sentence (WorkerUnreachableError, WorkerCannotRunModeError,
    NotEnoughMemoryError naming the device that runs out first) when loading `options` across
    its workers cannot work; `force` skips only the memory and trained-context checks."""

    workers = options.rpc_workers
    check_reachable(workers)
    answers = [(worker, ask_worker(worker)) for worker in workers]
    builds = [build for _, build in answers if build is not None]
    check_workers_run_mode(builds, options.kv)
    devices = read_split_devices(backend_folder, workers)
    check_layer_split(options.layer_split, [device.label for device in devices])
    path = Path(options.model_path)
    fit = check_split_fits(
        read_gguf_header(path),
        options,
        list(devices),
        read_free_memory(gpu=False),
        file_size=model_size(path),
        force=force,
        advice=advice,
    )
    return RpcLoadCheck(
        builds=tuple(builds),
        unreported=tuple(worker for worker, build in answers if build is None),
        devices=devices,
        fit=fit,
    )


@dataclass(frozen=True)
class WorkersCheck:
    """check_rpc_load's answer for the settings shown: the devices' shares (None when a check
    before the fit refused), and the sentence a load would be refused with, if any."""

    check: RpcLoadCheck | None
    refusal: str | None
    forceable: bool  # the refusal is the memory one: "Load anyway" can override it


def check_workers(options: LoadProfile, data_folder: Path, how: str, advice: str) -> WorkersCheck:
    """The load dialog's check (blocking: off the GUI thread): the fit on every device
    (forced, so the table always has it), then whether the load would be refused for memory
    or the trained context. A worker that does not answer or cannot run the K/V mode raises
    (one sentence, not forceable); `how` says how to choose a backend with RPC."""

    folder = backend_with_rpc(data_folder, how)
    checked = check_rpc_load(options, folder, force=True, advice=advice)
    path = Path(options.model_path)
    try:  # pure arithmetic again on the devices just read: no second child process
        check_split_fits(
            read_gguf_header(path),
            options,
            list(checked.devices),
            read_free_memory(gpu=False),
            file_size=model_size(path),
            advice=advice,
        )
    except ContextTooLargeError as error:
        return WorkersCheck(checked, str(error), error.forceable)
    return WorkersCheck(checked, None, True)
