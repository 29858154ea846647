"""Render the Dashboard's lesson panel (Flash Attention and the int8 K cache in the loaded
model's numbers) with the starter model loaded and a short continuation generated, into
docs/screenshots/dashboard-lesson.png. `save_lesson(app, window, out)` is what
scripts/screenshots.py can call with its own window.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_lesson.py [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WIDTH = 1180


def save_lesson(app, window, out: Path) -> Path:
    """The lesson panel of `window`'s Dashboard alone (it sits below the fold)."""
    from app.ui.dashboard.page import DashboardPage

    window.show_page("Dashboard")
    for _ in range(5):
        app.processEvents()
    panel = window.findChild(DashboardPage).lesson
    panel.resize(WIDTH, panel.layout().totalHeightForWidth(WIDTH))  # the text wrapped at WIDTH
    path = out / "dashboard-lesson.png"
    if not panel.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    return path


def _wait(app, done, what: str, timeout_s: float = 600) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise TimeoutError(f"gave up waiting for {what}")
        app.processEvents()
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["KVSTUDIO_DATA_DIR"] = tempfile.mkdtemp(prefix="kvstudio-lesson-")

    from PySide6.QtWidgets import QApplication

    from app.engine.messages import Generate, SamplingSettings
    from app.gui import build_app
    from app.platform.paths import data_dir
    from app.ui.theme import ThemeController

    app = QApplication.instance() or QApplication([])
    parts = build_app(data_dir())
    window, engine = parts.window, parts.engine
    theme = window.findChild(ThemeController)
    if theme is not None:
        theme.apply()
    window.resize(1280, 800)
    window.show()
    try:
        loaded: list[object] = []
        engine.model_loaded.connect(loaded.append)
        window.chat.load_model("starter")
        _wait(app, lambda: bool(loaded), "the starter model to load")
        finished: list[object] = []
        engine.reply_finished.connect(finished.append)
        prompt = "The three things to know about a KV cache are"
        engine.generate(Generate("lesson", SamplingSettings(max_tokens=48), prompt=prompt))
        _wait(app, lambda: bool(finished), "the continuation")
        print(f"wrote {save_lesson(app, window, args.out)}")
    finally:
        window.close()
        parts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
