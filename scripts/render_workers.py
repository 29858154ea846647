"""Render the load dialog with two local workers and the Dashboard's per-device view, from the
real app offscreen, into docs/screenshots/workers.png and dashboard-devices.png.

    QT_QPA_PLATFORM=offscreen python scripts/render_workers.py [--out DIR]

A fresh data folder whose chosen backend is the CPU package (built with `python -m kernels
package cpu`, which only relinks when its CMake folder is cached), the starter model, two
workers started with the dialog's own "Start a worker on this computer" button (real
`kvstudio worker` processes on 127.0.0.1), Load, one reply, then the Dashboard. Every wait is
on the app's signals (scripts/screenshots.wait_for), never a sleep.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # its neighbour screenshots.py, as a script's module
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from screenshots import settle, wait_for  # noqa: E402

PROMPT = "The capital of France is"


def _cpu_backend(data: Path, scratch: Path) -> None:
    from app.backends.store import BackendStore
    from app.engine.backend_probe import probe
    from kernels.package import archive_name, build_package
    from kernels.variants import VARIANTS

    build_package(VARIANTS["cpu"], scratch, log=lambda line: None)
    store = BackendStore(data)
    store.add(scratch / archive_name("cpu"), probe, allow_unsigned=True)  # built just above
    store.use("cpu", probe)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per wait")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="kvstudio-workers-shots-"))
    data = scratch / "data"
    data.mkdir()
    os.environ["KVSTUDIO_DATA_DIR"] = str(data)

    from PySide6.QtWidgets import QApplication

    from app.gui import build_app
    from app.state.settings import SettingsFile
    from app.ui.theme import ThemeController

    SettingsFile(data).update(n_ctx=2048, n_threads=2)
    _cpu_backend(data, scratch)
    app = QApplication.instance() or QApplication([])
    parts = build_app(data)
    window, engine = parts.window, parts.engine
    theme = window.findChild(ThemeController)
    if theme is not None:
        theme.apply()
    window.resize(1280, 800)
    window.show()
    written = []
    try:
        chat = window.chat
        chat.open_load_dialog("starter")
        dialog = chat.load_dialog
        assert dialog is not None
        wait_for([dialog.model_read], lambda: dialog.facts is not None, args.timeout, "the model")
        box = dialog.workers_box
        for count in (1, 2):
            box.start_button.click()

            def started(count: int = count) -> bool:
                return len(box.workers) == count or box.error.isVisible()

            wait_for(
                [chat.local_workers.started, chat.local_workers.failed],
                started,
                args.timeout,
                "a local worker",
            )
            if box.error.isVisible():
                raise RuntimeError(box.error.text())
        wait_for(
            [box.checked],
            lambda: box.result is not None and box.result.check is not None,
            args.timeout,
            "the fit on every device",
        )
        dialog.resize(dialog.width(), dialog.sizeHint().height())
        settle(app)
        path = args.out / "workers.png"
        dialog.grab().save(str(path))
        written.append(path)

        loaded: list[object] = []
        failed: list[str] = []
        engine.model_loaded.connect(loaded.append)
        engine.load_failed.connect(failed.append)
        dialog.load_button.click()
        wait_for(
            [engine.model_loaded, engine.load_failed],
            lambda: bool(loaded or failed),
            args.timeout,
            "the load across workers",
        )
        if failed:
            raise RuntimeError(failed[0])
        replies: list[object] = []
        engine.reply_finished.connect(replies.append)
        engine.reply_failed.connect(replies.append)
        if chat.completion_mode:
            chat.completion.chat_anyway_button.click()
        chat.session.new_conversation()
        chat.session.set_conversation_settings("", {"max_tokens": 24, "temperature": 0.0})
        chat.input.setPlainText(PROMPT)
        chat.send_button.click()
        wait_for(
            [engine.reply_finished, engine.reply_failed],
            lambda: bool(replies),
            args.timeout,
            "the reply",
        )
        window.show_page("Dashboard")
        settle(app)
        path = args.out / "dashboard-devices.png"
        window.grab().save(str(path))
        written.append(path)
    finally:
        window.close()
        parts.close()
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
