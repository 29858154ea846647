"""A real local server on a real engine, for the server tests: `kvstudio serve`'s parts
(EngineProcess, ProcessGateway, LocalServer) on a thread, on any free port."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.messages import Load, Loaded
from app.engine.process import EngineProcess, until
from app.load.profile import LoadProfile
from app.server.options import ServerOptions
from app.server.process_gateway import ProcessGateway
from app.server.request_log import RequestLog, RequestRecord
from app.server.server_runner import LocalServer


class Records:
    """The request log's records as they come; `wait_for` blocks on the log's own call."""

    def __init__(self, log: RequestLog) -> None:
        self.all: list[RequestRecord] = []
        self._changed = threading.Condition()
        log.listen(self._on_record)

    def _on_record(self, record: RequestRecord) -> None:
        with self._changed:
            self.all.append(record)
            self._changed.notify_all()

    def wait_for(
        self, found: Callable[[RequestRecord], bool], timeout: float = 60
    ) -> RequestRecord:
        with self._changed:
            matched: list[RequestRecord] = []

            def seen() -> bool:
                matched[:] = [r for r in self.all if found(r)]
                return bool(matched)

            assert self._changed.wait_for(seen, timeout), "no such request in the log"
            return matched[0]


@dataclass
class Served:
    server: LocalServer
    gateway: ProcessGateway
    loaded: Loaded
    records: Records
    engine: EngineProcess | None = None  # serve()'s engine process (None: another()'s view)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @contextlib.contextmanager
    def another(self, **options: object) -> Iterator[Served]:
        """A second server on the same engine (its own port and options)."""
        server = LocalServer(self.gateway, replace(ServerOptions(port=0), **options))  # type: ignore[arg-type]
        server.start()
        try:
            yield Served(server, self.gateway, self.loaded, Records(server.requests))
        finally:
            server.stop()


@contextlib.contextmanager
def serve(model: Path, n_ctx: int = 4096, **options: object) -> Iterator[Served]:
    proc = EngineProcess()
    try:
        proc.send(Load(LoadProfile(model_path=str(model), n_ctx=n_ctx, n_gpu_layers=0)))
        loaded = until(proc, "Loaded", 300)
        gateway = ProcessGateway(proc, loaded)
        server = LocalServer(gateway, replace(ServerOptions(port=0), **options))  # type: ignore[arg-type]
        server.start()
        try:
            yield Served(server, gateway, loaded, Records(server.requests), proc)
        finally:
            server.stop()
            gateway.close()
    finally:
        proc.stop()
