"""Render the real app offscreen and save the Chat, Models and Dashboard pages at two sizes.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py            # docs/screenshots/
    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py --out /tmp/shots

Writes <page>-1280x800.png and <page>-1024x640.png for chat (a base model's continuation),
conversation (the same model through "Chat anyway"), models, dashboard and settings, and
dashboard-lesson.png: the Dashboard's lesson with its title, after the chat's tokens. The app is
built as `kvstudio gui` builds it (app.gui.build_app, the remembered theme's stylesheet) on a
fresh data folder, with the starter model loaded and one short reply in the chat; the Models
page shows a repo from a Hub look-alike on 127.0.0.1 (tests/hub_server.py) that publishes the
starter model, so its fit verdicts are real and nothing leaves this machine. Every wait is on
the app's own signals (a load, a reply, a listing), with a deadline, never a sleep.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SIZES = ((1280, 800), (1024, 640))
REPO = "kvstudio/gemma-3-270m-GGUF"
STARTER_FILE = "gemma-3-270m-Q4_K_M.gguf"
PROMPT = "The three things to know about a KV cache are"
QUESTION = "What is the capital of France?"  # the conversation's first chat
STORY = "The lighthouse keeper climbed the stairs every evening at dusk. One night,"


def wait_for(signals: list, done: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Run the event loop until `done()` holds, waking on `signals` (no polling), or fail
    after `timeout_s` saying `what` did not happen."""
    from PySide6.QtCore import QEventLoop, QTimer

    if done():
        return
    loop = QEventLoop()
    timer = QTimer(singleShot=True, interval=int(timeout_s * 1000))
    timer.timeout.connect(loop.quit)

    def check(*_args: object) -> None:
        if done():
            loop.quit()

    for signal in signals:
        signal.connect(check)
    timer.start()
    loop.exec()
    for signal in signals:
        signal.disconnect(check)
    if not done():
        raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def settle(app) -> None:
    """Let layouts that depend on other layouts finish (a few passes of posted events)."""
    for _ in range(5):
        app.processEvents()


def save_page(app, window, title: str, out: Path, name: str = "", suffix: str = "") -> list[Path]:
    window.show_page(title)
    written = []
    for width, height in SIZES:
        window.resize(width, height)
        settle(app)
        path = out / f"{name or title.lower()}-{width}x{height}{suffix}.png"
        if not window.grab().save(str(path)):
            raise OSError(f"could not write {path}")
        written.append(path)
    return written


def run_compare(window, timeout_s: float) -> None:
    """A small Compare on the loaded starter (2 chunks of 512 tokens: enough scored tokens for
    its quality figures to mean something), waited for on the runner's own signals."""
    from app.ui.dashboard.page import DashboardPage

    page = window.findChild(DashboardPage)
    runner = page.runner
    done: list[object] = []
    for signal in (runner.finished, runner.failed, runner.cancelled):
        signal.connect(lambda *a: done.append(a))
    page.start_compare(
        n_ctx=2048, depth=0, quality_chunks=2, chunk_tokens=512, n_prompt=128, n_gen=16
    )
    signals = [runner.finished, runner.failed, runner.cancelled]
    wait_for(signals, lambda: bool(done), timeout_s, "the comparison")


def save_compare(app, window, out: Path, suffix: str) -> list[Path]:
    """The Dashboard scrolled to the Compare section's table and sentence, at both sizes."""
    from app.ui.dashboard.page import DashboardPage

    page = window.findChild(DashboardPage)
    written = []
    for width, height in SIZES:
        window.resize(width, height)
        settle(app)
        page.scroll_area.ensureWidgetVisible(page.compare.gain, 0, 40)
        settle(app)
        path = out / f"dashboard-compare-{width}x{height}{suffix}.png"
        if not window.grab().save(str(path)):
            raise OSError(f"could not write {path}")
        written.append(path)
    page.scroll_area.verticalScrollBar().setValue(0)
    return written


def save_lesson(app, window, out: Path, suffix: str = "") -> Path:
    """The Dashboard's lesson (its title, sentences and chart) at the first size's width: the
    part of the scrolled page it takes, so its numbers are the chat's tokens in context."""
    from PySide6.QtCore import QPoint, QRect

    from app.ui.dashboard.page import DashboardPage

    page = window.findChild(DashboardPage)
    window.show_page("Dashboard")
    window.resize(*SIZES[0])
    settle(app)
    content, lesson = page.content, page.lesson
    top = page.lesson_title.mapTo(content, QPoint(0, 0)).y() - 4
    bottom = lesson.mapTo(content, QPoint(0, lesson.height())).y() + 12
    path = out / f"dashboard-lesson{suffix}.png"
    if not content.grab(QRect(0, top, content.width(), bottom - top)).save(str(path)):
        raise OSError(f"could not write {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per wait")
    parser.add_argument(
        "--theme", choices=("light", "dark"), default="light", help="dark: names end in -dark"
    )
    parser.add_argument("--chat-only", action="store_true", help="only the chat's two pages")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="measure a small Compare run first: the Dashboard shows its table and sentence",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    scratch = Path(tempfile.mkdtemp(prefix="kvstudio-shots-"))
    # A fresh app: its own data folder and HF cache, the Hub look-alike as the Hub.
    os.environ["KVSTUDIO_DATA_DIR"] = str(scratch / "data")
    os.environ["HF_HOME"] = str(scratch / "hf")
    os.environ["HF_HUB_CACHE"] = str(scratch / "hf" / "hub")
    os.environ["KVSTUDIO_NO_KEYRING"] = "1"
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(name, None)

    from PySide6.QtWidgets import QApplication

    from app.gui import build_app
    from app.models import starter
    from app.platform.paths import data_dir
    from app.ui.models.page import ModelsPage
    from app.ui.theme import ThemeController
    from tests.hub_server import HubServer

    app = QApplication.instance() or QApplication([])
    with HubServer() as hub:
        hub.add_repo(REPO, {STARTER_FILE: starter.starter_path()}, downloads=48211, likes=312)
        os.environ["HF_ENDPOINT"] = hub.url
        parts = build_app(data_dir())
        window, engine = parts.window, parts.engine
        theme = window.findChild(ThemeController)
        if theme is not None:
            theme.choose(args.theme)  # applied as open_app applies the remembered one
            theme.apply()
        suffix = "-dark" if args.theme == "dark" else ""
        window.resize(*SIZES[0])
        window.show()
        written: list[Path] = []
        try:
            loaded: list[object] = []
            engine.model_loaded.connect(loaded.append)
            failed: list[str] = []
            engine.load_failed.connect(failed.append)
            window.chat.load_model("starter")
            wait_for(
                [engine.model_loaded, engine.load_failed],
                lambda: bool(loaded or failed),
                args.timeout,
                "the starter model to load",
            )
            if failed:
                raise RuntimeError(f"the starter model did not load: {failed[0]}")
            replies: list[object] = []
            engine.reply_finished.connect(replies.append)
            engine.reply_failed.connect(replies.append)
            chat = window.chat
            sent = True
            if chat.completion_mode:  # the starter is a base model: show a continuation
                chat.completion.length_box.setValue(64)
                chat.completion.editor.setPlainText(STORY)
                chat.completion.continue_button.click()
            elif chat.send_button.isVisible() and chat.send_button.isEnabled():
                chat.input.setPlainText(PROMPT)
                chat.send_button.click()
            else:
                sent = False
            if sent:
                wait_for(
                    [engine.reply_finished, engine.reply_failed],
                    lambda: bool(replies),
                    args.timeout,
                    "the reply",
                )
            written += save_page(app, window, "Chat", args.out, suffix=suffix)
            if chat.completion_mode:  # and the same model in a conversation, as "Chat anyway"
                replies.clear()
                chat.completion.chat_anyway_button.click()
                chat.settings_panel.max_tokens.setValue(48)  # a reply that fits the window
                # The most likely words (temperature 0): the same reply on every run, not the
                # 270M model's sampled guess (Venus, Mars... as often as Jupiter).
                chat.settings_panel.temperature.setValue(0.0)
                chat.input.setPlainText(QUESTION)
                chat.send_button.click()
                wait_for(
                    [engine.reply_finished, engine.reply_failed],
                    lambda: bool(replies),
                    args.timeout,
                    "the chat reply",
                )
                written += save_page(
                    app, window, "Chat", args.out, name="conversation", suffix=suffix
                )
            if args.chat_only:
                return _report(written)

            models = window.findChild(ModelsPage)
            if models is None:
                raise RuntimeError("the window has no Models page")
            window.show_page("Models")
            models.search("gemma")
            view = models.search_view
            wait_for(
                [view.results.modelReset],
                lambda: view.results.rowCount() >= 1,
                args.timeout,
                "the search",
            )
            view.table.selectRow(0)
            wait_for(
                [models.runner.busy_changed],
                lambda: bool(models.repo_view.entry_names()) and not models.runner.is_busy(),
                args.timeout,
                "the repo's files and their fit",
            )
            models.repo_view.select_entry(STARTER_FILE)
            written += save_page(app, window, "Models", args.out, suffix=suffix)
            if args.compare:
                run_compare(window, args.timeout)
            written += save_page(app, window, "Dashboard", args.out, suffix=suffix)
            if args.compare:  # and scrolled down to the measured table and its sentence
                written += save_compare(app, window, args.out, suffix)
            written.append(save_lesson(app, window, args.out, suffix))
            written += save_page(app, window, "Settings", args.out, suffix=suffix)
        finally:
            window.close()
            parts.close()
    return _report(written)


def _report(written: list[Path]) -> int:
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
