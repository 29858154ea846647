"""The engine process EngineClient talks to, and the thread that reads its events.

One process at a time. A plain Python reader thread blocks on its recv() and hands every
event (or the news that it died) to callbacks, together with the process's generation
number, so the GUI side can drop what a replaced engine still sends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from app.engine.process import EngineProcess
from app.platform.errors import EngineCrashedError

log = logging.getLogger(__name__)

# From the reader thread: an event or a crash sentence, with the generation it came from.
EventCallback = Callable[[object, int], None]
CrashCallback = Callable[[str, int], None]


class EngineHandle(Protocol):
    """What EngineClient needs of an engine process: app.engine.process.EngineProcess, or a
    stand-in such as tests/fake_engine.py."""

    @property
    def pid(self) -> int | None: ...

    def start(self) -> None: ...

    def is_alive(self) -> bool: ...

    def send(self, command: object) -> None: ...

    def recv(self, timeout: float | None = None) -> object | None: ...

    def cancel(self) -> None: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


def default_process() -> EngineHandle:
    return EngineProcess()


class EngineConnection:
    """Starts, feeds and ends the engine process; its reader thread only recv()s and calls
    `on_event(event, generation)` or `on_crash(sentence, generation)`, never touching state."""

    def __init__(
        self,
        factory: Callable[[], EngineHandle],
        on_event: EventCallback,
        on_crash: CrashCallback,
    ) -> None:
        self._factory = factory
        self._on_event = on_event
        self._on_crash = on_crash
        self.process: EngineHandle | None = None
        self.generation = 0  # counts processes started; a callback names the one it is from
        self._reader: threading.Thread | None = None
        self._reader_stop = threading.Event()

    def live_process(self) -> EngineHandle | None:
        """The process, when it runs."""
        proc = self.process
        return proc if proc is not None and proc.is_alive() else None

    def start(self) -> EngineHandle:
        """Start a fresh process and its reader. Raises what the process raises."""
        proc = self._factory()
        proc.start()
        self.generation += 1
        self.process = proc
        self._reader_stop = threading.Event()
        self._reader = threading.Thread(
            target=self._read_events,
            args=(proc, self.generation, self._reader_stop),
            name=f"engine-reader-{self.generation}",
            daemon=True,
        )
        self._reader.start()
        log.info("engine started (pid %s)", proc.pid)
        return proc

    def send(self, proc: EngineHandle, command: object) -> None:
        try:
            proc.send(command)
        except Exception as error:  # noqa: BLE001 - the pipe broke: the reader reports the crash
            log.warning("send to engine failed: %s", error)

    def close(self) -> None:
        """Stop the process and the reader thread, never blocking on a stuck engine."""
        proc, self.process = self.process, None
        self._reader_stop.set()
        if self._reader is not None:  # first, so it never reads the engine's exit as a crash
            self._reader.join(timeout=2)
            self._reader = None
        if proc is not None:
            try:
                proc.cancel()
                proc.stop()
            except Exception:  # the window is closing: never block that on the engine
                log.exception("engine did not stop cleanly; killing it")
                try:
                    proc.kill()
                except Exception:
                    log.exception("engine kill failed")

    def discard(self) -> None:
        """Let go of a process that died: its reader stops, its pipes are cleaned up."""
        self._reader_stop.set()
        proc, self.process = self.process, None
        if proc is not None:
            try:
                proc.kill()
                proc.stop()  # a dead process: only cleans up its pipes and stderr file
            except Exception:
                log.debug("cleanup after crash failed", exc_info=True)

    def _read_events(self, proc: EngineHandle, generation: int, stop: threading.Event) -> None:
        """Reader thread: only recv() and hand on."""
        while not stop.is_set():
            try:
                event = proc.recv(timeout=0.2)
            except EngineCrashedError as error:
                if not stop.is_set():
                    self._on_crash(str(error), generation)
                return
            except Exception as error:
                if not stop.is_set():
                    log.exception("engine reader failed")
                    self._on_crash(f"The engine stopped responding: {error}", generation)
                return
            if event is not None:
                self._on_event(event, generation)
