"""Workers started on this computer from the load dialog ("Start a worker on this computer"):
`kvstudio worker` on 127.0.0.1 and a free port, for trying a split without a second machine.
They run until the app closes (stop_all), and die with it if it is killed (Linux's
parent-death signal, as rpc-server dies with its worker).

Signals:
    started(str address): a worker listens at address ("127.0.0.1:PORT") and reports its build.
    failed(str message): a worker did not start, or stopped on its own (one sentence).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QSocketNotifier, Signal

from app.load.rpc_workers import free_port_pair
from app.platform.child_process import die_with

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # never another address: this button is for trying it out
READY_LINE = "Stop it with Ctrl-C"  # the last line `kvstudio worker` prints once it listens
STOP_TIMEOUT_S = 10.0


def worker_command(port: int) -> list[str]:
    """`kvstudio worker` as this install runs it: the frozen app's own executable, else this
    Python with the app's package."""
    base = [sys.executable] if getattr(sys, "frozen", False) else [sys.executable, "-m", "app"]
    return [*base, "worker", "--host", HOST, "--port", str(port)]


@dataclass
class _Running:
    address: str
    process: subprocess.Popen[bytes]
    notifier: QSocketNotifier
    pending: bytes = b""
    lines: list[str] = field(default_factory=list)
    ready: bool = False


class LocalWorkers(QObject):
    """The workers this app started; see the module docstring for the signals."""

    started = Signal(str)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: list[_Running] = []

    @property
    def addresses(self) -> list[str]:
        """The workers that listen now."""
        return [w.address for w in self._running if w.ready]

    def start(self) -> str:
        """Start one worker; `started` or `failed` follows. Returns its address."""
        port = free_port_pair(HOST)
        address = f"{HOST}:{port}"
        process = subprocess.Popen(
            worker_command(port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # its one-line errors, read with its output
            preexec_fn=die_with(os.getpid()),
        )
        assert process.stdout is not None
        os.set_blocking(process.stdout.fileno(), False)
        notifier = QSocketNotifier(process.stdout.fileno(), QSocketNotifier.Type.Read, self)
        running = _Running(address, process, notifier)
        notifier.activated.connect(lambda *_: self._on_output(running))
        self._running.append(running)
        log.info("starting a local worker at %s", address)
        return address

    def _on_output(self, worker: _Running) -> None:
        assert worker.process.stdout is not None
        try:
            chunk = os.read(worker.process.stdout.fileno(), 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._on_ended(worker)
            return
        worker.pending += chunk
        *complete, worker.pending = worker.pending.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", "replace").strip()
            if line:
                worker.lines.append(line)
                log.debug("local worker %s: %s", worker.address, line)
            if line.startswith(READY_LINE) and not worker.ready:
                worker.ready = True
                self.started.emit(worker.address)

    def _on_ended(self, worker: _Running) -> None:
        worker.notifier.setEnabled(False)
        worker.notifier.deleteLater()
        if worker.process.stdout is not None:
            worker.process.stdout.close()
        try:
            code = worker.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            code = worker.process.wait()
        if worker in self._running:
            self._running.remove(worker)
            said = worker.lines[-1].removeprefix("kvstudio: ") if worker.lines else ""
            what = "stopped" if worker.ready else "did not start"
            self.failed.emit(
                f"The worker at {worker.address} {what} (exit {code})"
                + (f": {said.rstrip('.')}." if said else ".")
            )

    def stop_all(self) -> None:
        """Stop every worker started here (Ctrl-C, as a user would), waiting for each."""
        running, self._running = self._running, []
        for worker in running:
            worker.notifier.setEnabled(False)
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGINT)
        for worker in running:
            try:
                worker.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
            if worker.process.stdout is not None:
                worker.process.stdout.close()
            log.info("stopped the local worker at %s", worker.address)
