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

from tests.cli_runner import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Worker:
    def __init__(self, data_folder: Path, *args: str) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), KVSTUDIO_DATA_DIR=str(data_folder)),
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
