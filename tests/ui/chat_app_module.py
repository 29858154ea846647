"""One app with the starter loaded, shared by the tests of a module that only chat with it
(each engine load costs seconds on two shared cores): `starter_chat_app(tmp_path_factory)`
builds it on a fresh data folder of its own, and `wait_for` waits on a signal without qtbot
(which is per test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer, SignalInstance

from tests.engine_threads import ENGINE_THREADS
from tests.ui.conftest import LOAD_TIMEOUT_MS


def wait_for(signal: SignalInstance, timeout_ms: int) -> tuple:
    """Run the event loop until `signal` is emitted; its arguments. Fails at the ceiling."""
    loop = QEventLoop()
    got: list[tuple] = []

    def on_signal(*args: object) -> None:
        got.append(args)
        loop.quit()

    signal.connect(on_signal)
    QTimer.singleShot(timeout_ms, loop.quit)
    try:
        loop.exec()
    finally:
        signal.disconnect(on_signal)
    assert got, f"no {signal} within {timeout_ms} ms"
    return got[0]


@contextmanager
def starter_chat_app(folder: Path) -> Iterator:
    """The real app on data folder `folder`, the starter loaded by its one-click offer."""
    from app.gui import build_app
    from app.state.settings import SettingsFile

    folder.mkdir(parents=True, exist_ok=True)
    before = os.environ.get("KVSTUDIO_DATA_DIR")
    os.environ["KVSTUDIO_DATA_DIR"] = str(folder)
    SettingsFile(folder).update(n_ctx=2048, n_threads=ENGINE_THREADS)
    parts = build_app(folder)
    try:
        parts.window.resize(1200, 800)
        parts.window.show()
        parts.window.chat.offer_button.click()
        wait_for(parts.engine.model_loaded, LOAD_TIMEOUT_MS)
        yield parts
    finally:
        parts.window.close()
        parts.close()
        if before is None:
            os.environ.pop("KVSTUDIO_DATA_DIR", None)
        else:
            os.environ["KVSTUDIO_DATA_DIR"] = before
