"""The server's gateway over one EngineProcess (`kvstudio serve`): a thread that runs the
queued requests one after the other, in arrival order, and reloads the model after a crash
(also one that happened while no request ran, before the next request is sent)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field

from app.engine.messages import (
    ContextTrimmed,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    PromptStarted,
    Token,
)
from app.engine.process import EngineProcess, until
from app.platform.errors import EngineCrashedError, EngineFailedError
from app.server.gateway import EventSink, ModelInfo, cancelled_before_start

log = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 600.0
EVENT_TIMEOUT_S = 600.0
_REQUEST_EVENTS = (PromptStarted, ContextTrimmed, Token)


@dataclass
class _Job:
    command: Generate
    sink: EventSink
    cancelled: threading.Event = field(default_factory=threading.Event)


class ProcessGateway:
    """EngineGateway over `proc`, which has loaded `loaded` (the caller stops the process
    after close())."""

    def __init__(self, proc: EngineProcess, loaded: Loaded) -> None:
        self._proc = proc
        self._loaded = loaded
        self._info = ModelInfo.from_loaded(loaded, int(time.time()))
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._waiting: dict[str, _Job] = {}
        self._current: _Job | None = None
        self._needs_reload = False
        self._reloading = False
        self._thread = threading.Thread(target=self._run, name="server-engine", daemon=True)
        self._thread.start()

    def model(self) -> ModelInfo | None:
        return self._info

    def health(self) -> str:
        if self._reloading:
            return "The model is loading again after the engine stopped; try again shortly."
        if self._needs_reload or not self._proc.is_alive():
            return "The engine stopped; the next request loads the model again."
        return ""

    def submit(self, command: Generate, sink: EventSink) -> None:
        job = _Job(command, sink)
        with self._lock:
            self._waiting[command.request_id] = job
        self._jobs.put(job)

    def cancel(self, request_id: str) -> None:
        with self._lock:
            job = self._waiting.get(request_id)
            if job is None:
                return
            job.cancelled.set()
            if job is self._current:
                self._proc.cancel()

    def close(self) -> None:
        """Stop the running request, drop the waiting ones, end the thread."""
        with self._lock:
            for job in self._waiting.values():
                job.cancelled.set()
            if self._current is not None:
                self._proc.cancel()
        self._jobs.put(None)
        self._thread.join(timeout=10)

    # ---- the engine thread --------------------------------------------------------------

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            rid = job.command.request_id
            if job.cancelled.is_set():
                self._end(job, cancelled_before_start(rid))
                continue
            with self._lock:
                self._current = job
            try:
                self._end(job, self._generate(job))
            except (EngineCrashedError, EngineFailedError) as error:
                self._needs_reload = isinstance(error, EngineCrashedError)
                self._end(job, Failed(str(error), request_id=rid))

    def _generate(self, job: _Job) -> object:
        if not self._proc.is_alive() and not self._needs_reload:
            log.info("the engine stopped while idle: loading the model again")
            with suppress(EngineCrashedError):  # reads its death, so send() starts a fresh one
                self._proc.recv(0)
            self._needs_reload = True
        if self._needs_reload:
            self._reloading = True
            try:
                self._proc.send(Load(self._loaded.options))
                until(self._proc, "Loaded", LOAD_TIMEOUT_S)
            finally:
                self._reloading = False
            self._needs_reload = False
        rid = job.command.request_id
        self._proc.send(job.command)  # clears the cancel flag ...
        if job.cancelled.is_set():
            self._proc.cancel()  # ... so a cancel that came just before is set again
        while True:
            event = self._proc.recv(timeout=EVENT_TIMEOUT_S)
            if event is None:
                raise EngineFailedError(
                    f"The engine sent nothing for {EVENT_TIMEOUT_S:.0f} seconds."
                )
            if isinstance(event, (Finished, Failed)) and event.request_id == rid:
                return event
            if isinstance(event, _REQUEST_EVENTS) and event.request_id == rid:
                job.sink(event)

    def _end(self, job: _Job, last: object) -> None:
        with self._lock:
            self._waiting.pop(job.command.request_id, None)
            self._current = None
        job.sink(last)
