"""While the window is open, cyclic garbage is freed on the GUI thread only: a Qt object freed
by the collector in a worker thread can deadlock the window (seen: a library scan on the thread
pool collected an old window's widgets and the GUI thread waited on Qt's lock for good)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from tests.waits import HANG_GUARD_MS


class Cycle:
    """A cyclic object that notes which thread freed it."""

    freed_in: list[str] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        Cycle.freed_in.append(threading.current_thread().name)


def test_garbage_made_while_a_worker_allocates_is_freed_on_the_gui_thread(
    qtbot, tmp_path: Path
) -> None:
    from app.gui import build_app

    parts = build_app(tmp_path)
    try:
        Cycle.freed_in.clear()
        Cycle()  # garbage now: only the collector can free it
        done = threading.Event()

        def worker() -> None:
            # Far past generation 0's threshold: an automatic collection would run right here.
            keep = [[] for _ in range(50 * gc.get_threshold()[0])]
            del keep
            done.set()

        thread = threading.Thread(target=worker, name="worker")
        thread.start()
        thread.join()
        assert done.is_set() and Cycle.freed_in == []  # not in the worker
        qtbot.waitUntil(lambda: Cycle.freed_in != [], timeout=HANG_GUARD_MS)
        assert Cycle.freed_in == ["MainThread"]
    finally:
        parts.window.close()
        parts.close()
    assert gc.isenabled()  # automatic collection is back once the window has closed
