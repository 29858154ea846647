"""Worker addresses for loading across machines (llama.cpp's RPC backend), checked before any
engine is spawned: `host:port` with a port in range, and reachable over TCP."""

from __future__ import annotations

import ipaddress
import math
import socket

from app.platform.errors import BadInputError

DEFAULT_PORT = 50052
MAX_WORKERS = 16  # GGML_RPC_MAX_SERVERS in ggml-rpc.h
CONNECT_TIMEOUT_S = 3.0


class WorkerUnreachableError(BadInputError, ConnectionError):
    """A worker address that does not answer: nothing listens there, or the host is down."""


def parse_workers(text: str) -> tuple[str, ...]:
    """`HOST:PORT[,HOST:PORT...]` as a tuple of addresses, or BadInputError with one sentence."""
    workers = tuple(part.strip() for part in text.split(","))
    if not text.strip() or any(not w for w in workers):
        raise BadInputError(f"--rpc needs HOST:PORT[,HOST:PORT...], not '{text[:80]}'.")
    if len(workers) > MAX_WORKERS:
        raise BadInputError(f"llama.cpp takes at most {MAX_WORKERS} workers, not {len(workers)}.")
    for worker in workers:
        check_address(worker)
    if len(set(workers)) != len(workers):
        raise BadInputError(f"--rpc names a worker twice: '{text[:80]}'.")
    return workers


def parse_layer_split(text: str, name: str = "--split") -> tuple[float, ...]:
    """`1,3`: each device's share of the layers (llama.cpp's tensor_split), as numbers that
    are not negative and not all zero, or BadInputError with one sentence naming `name`."""
    try:
        shares = tuple(float(part.strip()) for part in text.split(","))
    except ValueError:
        shares = ()
    if not good_layer_split(shares):
        raise BadInputError(
            f"{name} needs a share per device, like 1,3 (numbers not below 0, not all 0), "
            f"not '{text[:80]}'."
        )
    if len(shares) > MAX_WORKERS:
        raise BadInputError(
            f"llama.cpp splits over at most {MAX_WORKERS} devices, not {len(shares)}."
        )
    return shares


def good_layer_split(shares: tuple[float, ...]) -> bool:
    """Shares llama.cpp can split by: some, each a finite number not below 0, not all 0."""
    return (
        bool(shares)
        and all(math.isfinite(x) and x >= 0 for x in shares)
        and any(x > 0 for x in shares)
    )


def check_layer_split(split: tuple[float, ...], device_labels: list[str]) -> None:
    """BadInputError unless `split` has one share per device of the load, in llama.cpp's order."""
    if split and len(split) != len(device_labels):
        raise BadInputError(
            f"The layer split gives {len(split)} shares but the load has {len(device_labels)} "
            f"devices, in this order: {', '.join(device_labels)}."
        )


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A port P with P + 1 free as well: a worker's rpc-server and its build report."""
    while True:
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if port >= 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((host, port + 1))
            except OSError:
                continue
        return port


def check_address(worker: str) -> tuple[str, int]:
    """(host, port) of one `host:port` address, or BadInputError."""
    host, sep, port_text = worker.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:50052
    if not sep or not host or not port_text.isdigit():
        raise BadInputError(f"The worker address '{worker[:80]}' is not HOST:PORT.")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise BadInputError(f"The worker address '{worker[:80]}' has a port outside 1-65535.")
    if any(c.isspace() or not c.isprintable() for c in host):
        raise BadInputError(f"The worker address '{worker[:80]}' is not HOST:PORT.")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int, *, here: bool) -> str:
    """What a worker on a network address exposes, in one sentence: for `kvstudio worker`
    listening on `host` (`here`), or for the app using a worker at host:port on another
    machine. rpc-server has no authentication: the same words wherever it is said."""
    who, devices = (
        (f"the worker listens on {host}", "this machine's devices")
        if here
        else (f"the worker at {host}:{port} is reached over the network", "that machine's devices")
    )
    return (
        f"{who}: anyone who can reach that address can run code on {devices} and read what it "
        "computes (the model and your prompts), because llama.cpp's RPC server has no "
        "authentication or encryption. Use it only on a private network you trust, or keep "
        "the worker on 127.0.0.1 and reach it through an SSH tunnel "
        f"(ssh -N -L {port}:127.0.0.1:{port} -L {port + 1}:127.0.0.1:{port + 1} "
        f"{'this-machine' if here else 'worker-machine'})."
    )


def first_unreachable(
    workers: tuple[str, ...], timeout: float = CONNECT_TIMEOUT_S
) -> tuple[str, str] | None:
    """(address, why) for the first worker nothing answers at, or None when every one accepts
    a TCP connection. A worker serving another client still accepts (into its backlog)."""
    for worker in workers:
        host, port = check_address(worker)
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError as error:
            return worker, _why(error)
    return None


def check_reachable(workers: tuple[str, ...]) -> None:
    """WorkerUnreachableError naming the first worker that does not answer."""
    down = first_unreachable(workers)
    if down is not None:
        worker, why = down
        raise WorkerUnreachableError(
            f"The worker at {worker} does not answer ({why}); start it there with "
            "'kvstudio worker' or leave it out of --rpc."
        )


def _why(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "nothing listens on that port"
    if isinstance(error, socket.timeout | TimeoutError):
        return f"no reply within {CONNECT_TIMEOUT_S:.0f} seconds"
    if isinstance(error, socket.gaierror):
        return "the host name is not known"
    return error.strerror or type(error).__name__
