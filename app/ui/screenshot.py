"""`kvstudio gui --screenshot PATH`: save a picture of the window once it has done what was asked
(shown; the --model loaded; the --send reply finished), then quit.

It makes the docs' screenshots from the real app, and lets the packaging check run the installed
app with no display and know, from the app's own signals rather than a timer, that it worked.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.services.engine_client import EngineClient
from app.ui.main_window import MainWindow


def save_when_ready(
    app: QApplication,
    window: MainWindow,
    engine: EngineClient,
    path: Path,
    *,
    wait_for_model: bool,
    wait_for_reply: bool,
) -> None:
    """Save `window` to `path` and end the event loop (exit 0) when it is ready; on a failed
    load, reply or engine, say so on stderr, save what the window shows and exit 1."""
    done = False

    def finish(problem: str | None = None) -> None:
        nonlocal done
        if done:
            return
        done = True
        if problem:
            print(f"kvstudio: {problem}", file=sys.stderr)
        saved = window.grab().save(str(path))
        if not saved:
            print(f"kvstudio: could not save the screenshot to {path}.", file=sys.stderr)
        app.exit(0 if saved and not problem else 1)

    window.chat.model_resolve_failed.connect(lambda message: finish(message))
    engine.load_failed.connect(lambda message: finish(f"the model did not load: {message}"))
    engine.reply_failed.connect(lambda message: finish(f"the reply failed: {message}"))
    engine.engine_crashed.connect(lambda message: finish(f"the engine stopped: {message}"))
    if wait_for_reply:
        engine.reply_finished.connect(lambda _reply: finish())
    elif wait_for_model:
        engine.model_loaded.connect(lambda _loaded: finish())
    else:
        # Once the event loop runs, the shown window has been laid out and painted.
        QTimer.singleShot(0, finish)
