"""`kvstudio worker`: lend this machine's devices to another KV Studio through llama.cpp's RPC
backend, by running the chosen backend's `ggml-rpc-server` until Ctrl-C: a backend package's,
or the built-in one's (compiled beside llama-cpp-python's libraries by ./quickstart.sh)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from app.backends.manifest import read_manifest
from app.backends.store import BackendStore, library_folder
from app.commands import print_error
from app.engine.build_info import read_build_info
from app.load.rpc_workers import exposure_warning, is_loopback
from app.load.worker_hello import REPORT_PORT_OFFSET, ReportServer, WorkerBuild
from app.platform.child_process import die_with
from app.platform.errors import AppError, BadInputError
from app.platform.paths import data_dir

if TYPE_CHECKING:
    from app.load.worker_hello import ReportServer


INTERRUPTED_EXIT = 130
SERVER_PROGRAM = "ggml-rpc-server"
_READY_TRIES = 200  # x 25 ms: rpc-server binds within microseconds of its last banner line

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=50052,
        help="port (default 50052); the next port answers with the worker's build report",
    )
    parser.add_argument(
        "--device", help="comma-separated devices to lend (default: all the backend sees)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for a CPU device (default: all)"
    )


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65534:
        raise BadInputError(
            f"--port must be within 1-65534 (the next port carries the worker's build report), "
            f"not {args.port}."
        )
    if args.threads is not None and args.threads <= 0:
        raise BadInputError(f"--threads must be positive, not {args.threads}.")
    host = args.host.strip()
    if not host or any(c.isspace() or not c.isprintable() for c in host):
        raise BadInputError(f"--host must be an address or host name, not '{args.host[:80]}'.")
    backend_name, program, fa_pairs = _server_program()
    if not is_loopback(host):
        print_error(f"warning: {exposure_warning(host, args.port, here=True)}")
    command = [str(program), "--host", host, "--port", str(args.port)]
    command += ["--threads", str(args.threads or os.cpu_count() or 1)]
    if args.device:
        command += ["--device", args.device]
    return _serve(command, f"{host}:{args.port}", backend_name, fa_pairs)


def _server_program() -> tuple[str, Path, tuple[str, ...]]:
    """The chosen backend's name, its rpc-server and its Flash Attention pairs."""

    backend, notice = BackendStore(data_dir()).for_engine()
    folder = library_folder(backend)
    program = folder / SERVER_PROGRAM if folder is not None else None
    if program is None or not program.is_file():
        how = (
            "build it with `python -m kernels rpc-server` (./quickstart.sh does), or choose a "
            "backend package (kvstudio backend add kvstudio-backend-cpu-*.tar.gz --use)"
            if backend.folder is None
            else "reinstall its package"
        )
        raise BadInputError(
            (f"{notice} " if notice else "")
            + f"The {backend.name} backend has no {SERVER_PROGRAM}: {how} to run a worker."
        )
    if backend.folder is not None:
        return backend.name, program, read_manifest(backend.folder).fa_pairs

    return backend.name, program, read_build_info().fa_pairs or ()


def _serve(
    command: list[str],
    address: str,
    backend_name: str,
    fa_pairs: tuple[str, ...],
) -> int:
    # A terminal for its output: rpc-server writes its banner with printf and, into a pipe, would
    # hold it in its buffer until it exits. Its own session, so Ctrl-C reaches us, and we stop it.
    master, slave = os.openpty()
    try:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=die_with(os.getpid()),
        )
    finally:
        os.close(slave)
    lines = _Lines(master)
    # A service manager's SIGTERM stops the worker as Ctrl-C does, rpc-server included.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    report: ReportServer | None = None
    try:
        banner = lines.until_banner()
        if banner is None or not _wait_listening(address, child):
            child.wait()
            last = lines.last or "it printed nothing"
            raise AppError(f"The worker did not start ({last[:200]}).")
        version, devices = banner
        build = WorkerBuild(address, backend_name, version, fa_pairs, tuple(devices))
        # Bound once rpc-server listens, so a host that is not this machine's is its error.
        host, _, port = address.rpartition(":")
        report = ReportServer(host, int(port) + REPORT_PORT_OFFSET)
        report.start(build)
        print(f"Worker listening at {address} (backend {backend_name}, rpc-server {version})")
        print("Devices:")
        for device in devices:
            print(f"  {device}")
        print(f"Flash Attention K/V pairs: {build.pairs_text()} (reported on the next port)")
        print("Stop it with Ctrl-C.", flush=True)
        lines.drain()
        code = child.wait()
        raise AppError(f"The worker at {address} stopped on its own (exit {code}): {lines.last}.")
    except KeyboardInterrupt:
        child.terminate()
        child.wait()
        print_error(f"worker at {address} stopped.")
        return INTERRUPTED_EXIT
    finally:
        signal.signal(signal.SIGTERM, previous)
        if report is not None:
            report.close()
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(master)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _wait_listening(address: str, child: subprocess.Popen[bytes]) -> bool:
    """Whether the server accepts connections. It prints nothing once it listens, so its last
    banner line is followed by a connection attempt, retried only while the child lives."""
    host, _, port = address.rpartition(":")
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]") else host.strip("[]")
    for _ in range(_READY_TRIES):
        try:
            with socket.create_connection((host, int(port)), timeout=2.0):
                return True
        except OSError:
            try:
                child.wait(timeout=0.025)
                return False
            except subprocess.TimeoutExpired:
                continue
    return False


class _Lines:
    """The child's terminal output, line by line."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = b""
        self.last = ""

    def __iter__(self) -> Iterator[str]:
        while True:
            while b"\n" not in self._pending:
                try:
                    chunk = os.read(self._fd, 4096)
                except OSError:  # EIO: the child closed its terminal (exited)
                    chunk = b""
                if not chunk:
                    if self._pending.strip():
                        yield self._keep(self._pending)
                    self._pending = b""
                    return
                self._pending += chunk
            line, self._pending = self._pending.split(b"\n", 1)
            yield self._keep(line)

    def _keep(self, raw: bytes) -> str:
        text = raw.decode("utf-8", "replace").strip()
        if text:
            self.last = text
            log.debug("rpc-server: %s", text)
        return text

    def until_banner(self) -> tuple[str, list[str]] | None:
        """(version, device lines) once rpc-server printed its banner; None if it exited."""
        version, in_devices = "", False
        devices: list[str] = []
        for line in self:
            if line.startswith("Starting RPC server"):
                version = line.rsplit(" ", 1)[-1]
            elif line == "Devices:":
                in_devices = True
            elif line.startswith("transport"):
                return version, devices
            elif in_devices and not line.startswith(("endpoint", "local cache")):
                devices.append(line)
        return None

    def drain(self) -> None:
        for _line in self:
            pass  # logged with -v; read so the child never blocks on a full terminal
