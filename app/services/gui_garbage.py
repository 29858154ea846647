"""Python's cyclic garbage collection, run on the GUI thread only.

Left automatic, the collector runs in whichever thread happens to allocate: a worker thread
reading a model header could then free a Qt object from a cycle, and freeing it takes Qt's
connection lock while the GUI thread holds the interpreter lock and waits for that same Qt lock:
the window freezes for good (seen in the test suite: a library scan on the thread pool collected
an old window's widgets). So automatic collection is off while the window is open, and a timer on
the GUI thread collects instead, generation by generation as the thresholds say, as often as the
automatic collector would have.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 500


class GuiThreadGarbageCollector(QObject):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(INTERVAL_MS)

    def collect(self) -> int:
        """Collect the generations whose counts passed their thresholds (what the automatic
        collector would have done by now); returns the number of objects freed."""
        thresholds = gc.get_threshold()
        counts = gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > thresholds[generation]:
                return gc.collect(generation)
        return 0

    def stop(self) -> None:
        """Back to automatic collection (the window has closed)."""
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
