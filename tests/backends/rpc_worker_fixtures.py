"""`kvstudio worker` processes for the tests, on 127.0.0.1 ports the OS picked as free, started
and read as a user would (its stdout says when it listens)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.load.rpc_workers import free_port_pair
from tests.cli_runner import ROOT, kvstudio

__all__ = ["free_port_pair"]  # the tests import it from here with the other fixtures

PROMPT = "The capital of France is"


def greedy_run(folder: Path, *args: str, env: dict[str, str] | None = None):
    """`kvstudio run starter`, 16 greedy tokens of PROMPT at a 512-token context."""
    return kvstudio(
        "run",
        "starter",
        "-p",
        PROMPT,
        "-n",
        "16",
        "--temp",
        "0",
        "--ctx",
        "512",
        *args,
        env={"KVSTUDIO_DATA_DIR": str(folder), **(env or {})},
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Worker:
    def __init__(self, data_folder: Path, *args: str, sigint_ignored: bool = False) -> None:
        self.port = free_port_pair()
        self.address = f"127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), KVSTUDIO_DATA_DIR=str(data_folder)),
            # As a shell starts a background job of a script (`kvstudio worker &`).
            preexec_fn=_ignore_sigint if sigint_ignored else None,
        )
        assert self.process.stdout is not None
        self.banner: list[str] = []
        for line in self.process.stdout:  # until it says it listens, or exits
            self.banner.append(line.rstrip("\n"))
            if line.startswith("Stop it with Ctrl-C"):
                break

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """Send `sig` (Ctrl-C by default); (exit status, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=30)
        return self.process.returncode, err


@contextmanager
def workers(data_folder: Path, count: int) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    try:
        for _ in range(count):
            started.append(Worker(data_folder))
        yield started
    finally:
        for worker in started:
            worker.stop()


def f16_only_data(cpu_package: Path, tmp: Path) -> Path:
    """A data folder whose chosen backend is a package built with Flash Attention for f16-f16
    only (as a GPU package without the int8-K pairs): the CPU package, its manifest saying so."""
    from dataclasses import replace

    from app.backends.manifest import MANIFEST_NAME, parse_manifest
    from app.backends.store import BackendStore
    from app.engine.backend_probe import probe
    from tests.backends.package_edits import copy_package, repack, sign

    folder = copy_package(cpu_package, tmp)
    manifest = parse_manifest((folder / MANIFEST_NAME).read_text())
    (folder / MANIFEST_NAME).write_text(replace(manifest, fa_pairs=("f16-f16",)).to_json())
    sign(folder)  # a package built and signed that way
    data = tmp / "data"
    store = BackendStore(data)
    store.add(repack(folder, tmp / "kvstudio-backend-cpu-f16-only.tar.gz"), probe)
    store.use("cpu", probe)
    return data
