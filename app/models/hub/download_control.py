"""How a caller steers a running download and hears of it: pause and cancel flags the
transfer checks between chunks, the exceptions it stops with, and its progress callback."""

from __future__ import annotations

import threading
from collections.abc import Callable

ProgressFn = Callable[[int], None]  # called with the bytes of this file now on disk


class DownloadPaused(Exception):
    """The download stopped because pause was asked; the partial file is kept."""


class DownloadCancelled(Exception):
    """The download stopped because cancel was asked; the partial file is removed."""


class DownloadControl:
    """Pause / cancel flags a running download checks between chunks (thread-safe).

    Asking to stop also shuts the open connection's socket, so a download waiting on a
    stalled server stops at once rather than at its read timeout.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()
        self._on_stop: list[Callable[[], None]] = []

    def pause(self) -> None:
        self._request_stop()

    def cancel(self) -> None:
        self._cancelled = True
        self._request_stop()

    def _request_stop(self) -> None:
        with self._lock:
            self._stop.set()
            hooks = list(self._on_stop)
        for hook in hooks:
            hook()

    def on_stop(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run `hook` when a stop is asked (at once if it was); returns a function removing it."""
        with self._lock:
            self._on_stop.append(hook)
            already = self._stop.is_set()
        if already:
            hook()

        def remove() -> None:
            with self._lock:
                if hook in self._on_stop:
                    self._on_stop.remove(hook)

        return remove

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check(self) -> None:
        """Raise DownloadCancelled / DownloadPaused when asked to stop."""
        if self._stop.is_set():
            raise DownloadCancelled() if self._cancelled else DownloadPaused()

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`, but wake (and raise) at once on pause or cancel."""
        self._stop.wait(seconds)
        self.check()
