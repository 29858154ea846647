"""A worker's build report: what `kvstudio worker` can run, told to the machine that loads a
model across it, so a K/V mode the worker's build lacks is refused before any load.

llama.cpp's RPC protocol says nothing about which Flash Attention K/V pairs a device's kernels
were compiled for (a CUDA/HIP build without `q8_0-f16` converts K and V to f16, slowly, or
fails), so the worker answers on a second port, the one after rpc-server's, bound to the same
host: every connection gets one JSON line and is closed; nothing is read from the client.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from dataclasses import asdict, dataclass

from app.backends.manifest import handles_pair
from app.kv.kv_types import KvMode
from app.load.rpc_workers import check_address
from app.platform.errors import BadInputError

REPORT_PORT_OFFSET = 1  # the report listens on rpc-server's port + 1
REPORT_FORMAT = 1
ASK_TIMEOUT_S = 3.0
_MAX_REPORT = 64 * 1024  # a report is a few hundred bytes; a bigger answer is not ours

log = logging.getLogger(__name__)


class WorkerCannotRunModeError(BadInputError):
    """A worker's build has no Flash Attention kernel for the K/V pair asked for."""


@dataclass(frozen=True)
class WorkerBuild:
    """What a worker reported about its build."""

    address: str  # the rpc-server's HOST:PORT
    backend: str  # the backend package's name: "cpu", "rocm-rdna3", ...
    rpc_server: str  # rpc-server's protocol version, "v7.0.0"
    # K-V pairs its GPU Flash Attention kernels are compiled for; () when every pair runs
    # (CPU, Vulkan), as in the package manifest.
    fa_pairs: tuple[str, ...]
    devices: tuple[str, ...]  # rpc-server's device lines, "CPU: AMD EPYC (24105 MiB, ...)"

    def runs_pair(self, mode: KvMode) -> bool:
        return handles_pair(self.fa_pairs, mode)

    def pairs_text(self) -> str:
        return ", ".join(self.fa_pairs) if self.fa_pairs else "every pair"

    def to_json(self) -> str:
        return json.dumps({"format": REPORT_FORMAT, **asdict(self)}) + "\n"


def report_address(worker: str) -> tuple[str, int]:
    """(host, port) of the build report of the worker whose rpc-server is at `worker`."""
    host, port = check_address(worker)
    return host, port + REPORT_PORT_OFFSET


def parse_report(text: str, worker: str) -> WorkerBuild:
    """The WorkerBuild in a report, or BadInputError naming the worker."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("format") != REPORT_FORMAT:
            raise ValueError("not a format-1 report")
        pairs, devices = raw["fa_pairs"], raw["devices"]
        if not all(isinstance(p, str) for p in [*pairs, *devices]):
            raise ValueError("lists of text expected")
        return WorkerBuild(
            address=worker,  # the address we asked, never one the answer names
            backend=str(raw["backend"])[:80],
            rpc_server=str(raw["rpc_server"])[:40],
            fa_pairs=tuple(p[:40] for p in pairs),
            devices=tuple(d[:200] for d in devices),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise BadInputError(
            f"The worker at {worker} sent a build report that cannot be read ({error})."
        ) from None


def ask_worker(worker: str, timeout: float = ASK_TIMEOUT_S) -> WorkerBuild | None:
    """The build the worker at `worker` reports, or None when nothing answers on its report
    port (an rpc-server not started by `kvstudio worker`, or an older KV Studio)."""
    host, port = report_address(worker)
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            data = b""
            while len(data) <= _MAX_REPORT:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError as error:
        log.info("no build report from %s (%s)", worker, error)
        return None
    return parse_report(data[:_MAX_REPORT].decode("utf-8", "replace"), worker)


def check_workers_run_mode(builds: list[WorkerBuild], mode: KvMode) -> None:
    """WorkerCannotRunModeError, one sentence naming the first worker whose build has no
    Flash Attention kernel for `mode`."""
    k, v = mode.k.name, mode.v.name
    for build in builds:
        if not build.runs_pair(mode):
            raise WorkerCannotRunModeError(
                f"The worker at {build.address} ({build.backend} backend) cannot run "
                f"K={k}/V={v}: its Flash Attention is built for {build.pairs_text()} only; "
                f"choose one of those K/V modes or a worker whose backend has {mode.pair}."
            )


class ReportServer:
    """Answers every connection on `host:port` with `build`'s report, on a daemon thread."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host.strip("[]"), port))
        except OSError as error:
            self._socket.close()
            raise BadInputError(
                f"The worker's build report needs port {port} on {host} as well, which "
                f"cannot be used ({error.strerror or error}); choose another --port."
            ) from None
        self._socket.listen(8)
        self._report = b""

    def start(self, build: WorkerBuild) -> None:
        self._report = build.to_json().encode()
        threading.Thread(target=self._serve, name="worker-build-report", daemon=True).start()

    def close(self) -> None:
        self._socket.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return  # closed: the worker is stopping
            with conn:
                conn.settimeout(2.0)  # a client that never reads does not hold the thread
                try:
                    conn.sendall(self._report)
                except OSError as error:
                    log.debug("build report not sent: %s", error)
