"""Uncaught errors become a report in <data>/logs/ and a sentence: a dialog with the report's path
in the GUI, one stderr line in the CLI. Real exceptions through the real paths: a Qt slot run by
the event loop, a worker thread, Qt's own critical and fatal messages, a segfault.

Before: a slot's or a thread's exception printed a traceback to a terminal an installed app does
not have, and the window carried on as if nothing happened; a segfault left nothing at all; the
CLI printed a bare traceback for anything that was not an AppError.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer, qCritical

from tests.cli_runner import ROOT
from tests.waits import HANG_GUARD_MS

AREA = "State files"
pytestmark = pytest.mark.qt_no_exception_capture  # the app's own hooks must see them


@pytest.fixture
def app_parts(qtbot, tmp_path: Path):
    from app.gui import build_app

    parts = build_app(tmp_path)
    parts.window.show()
    yield parts
    parts.window.close()
    parts.close()


def _reports(folder: Path) -> list[Path]:
    return sorted((folder / "logs").glob("crash-*.txt"))


def _assert_dialog(parts, summary: str, report: Path) -> None:
    box = parts.crash.last_box
    assert box is not None and box.isVisible()
    assert box.text() == f"KV Studio hit an unexpected error: {summary}"
    assert str(report) in box.informativeText()


def test_a_qt_slot_that_raises_writes_a_report_and_shows_it(
    qtbot, app_parts, tmp_path: Path, reliability
) -> None:
    def on_timer_timeout() -> None:
        empty: dict[str, str] = {}
        empty["model path"]  # a KeyError in a slot the event loop runs

    with qtbot.waitSignal(app_parts.crash.report_written, timeout=HANG_GUARD_MS) as written:
        QTimer.singleShot(0, on_timer_timeout)
    report = Path(written.args[0])
    assert _reports(tmp_path) == [report]
    text = report.read_text(encoding="utf-8")
    assert "what: KeyError: 'model path'" in text and "in on_timer_timeout" in text
    qtbot.waitUntil(lambda: app_parts.crash.last_box is not None, timeout=HANG_GUARD_MS)
    _assert_dialog(app_parts, "KeyError: 'model path'", report)
    reliability.record(AREA, "crash in a Qt slot", "report written, dialog with its path")


def test_a_worker_thread_that_raises_writes_a_report_and_shows_it(
    qtbot, app_parts, tmp_path: Path, reliability
) -> None:
    def download_worker() -> None:
        raise OSError(28, "No space left on device")

    with qtbot.waitSignal(app_parts.crash.report_written, timeout=HANG_GUARD_MS) as written:
        threading.Thread(target=download_worker, name="download worker").start()
    report = Path(written.args[0])
    text = report.read_text(encoding="utf-8")
    assert "where: uncaught exception in thread download worker" in text
    assert "in download_worker" in text
    qtbot.waitUntil(lambda: app_parts.crash.last_box is not None, timeout=HANG_GUARD_MS)
    _assert_dialog(app_parts, "OSError: [Errno 28] No space left on device", report)
    reliability.record(AREA, "crash in a worker thread", "report written, dialog with its path")


def test_a_qt_critical_message_writes_a_report(qtbot, app_parts, tmp_path: Path) -> None:
    with qtbot.waitSignal(app_parts.crash.report_written, timeout=HANG_GUARD_MS) as written:
        qCritical("QPainter::begin: Paint device returned engine == 0")
    report = Path(written.args[0])
    assert "where: Qt critical message" in report.read_text(encoding="utf-8")
    qtbot.waitUntil(lambda: app_parts.crash.last_box is not None, timeout=HANG_GUARD_MS)
    _assert_dialog(app_parts, "QPainter::begin: Paint device returned engine == 0", report)


# The app's start, then a fatal Qt message (Qt aborts the process after its handler returns).
_FATAL = """
import sys
from pathlib import Path
from PySide6.QtCore import qFatal
from PySide6.QtWidgets import QApplication
from app.gui import build_app
app = QApplication([])
parts = build_app(Path(sys.argv[1]))
qFatal("QXcbConnection: could not connect to display")
"""


@pytest.mark.slow
def test_a_fatal_error_leaves_a_report_and_the_next_start_shows_it(
    qtbot, tmp_path: Path, reliability
) -> None:
    from app.gui import build_app

    died = subprocess.run(
        [sys.executable, "-c", _FATAL, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen"),
    )
    assert died.returncode == -signal.SIGABRT, died.stderr
    (qt_report,) = _reports(tmp_path)
    # PySide6 hands Qt its own text for a qFatal() made from Python; Qt's C++ fatals keep theirs.
    assert "where: Qt fatal message" in qt_report.read_text(encoding="utf-8")
    # faulthandler caught the abort too; the next start turns its dump into a report and says so.
    (faults,) = (tmp_path / "logs").glob("faults-*.log")
    assert "Fatal Python error: Aborted" in faults.read_text(encoding="utf-8")
    parts = build_app(tmp_path)
    try:
        qtbot.waitUntil(lambda: parts.crash.last_box is not None, timeout=HANG_GUARD_MS)
        reports = _reports(tmp_path)
        assert len(reports) == 2
        dump = next(p for p in reports if p != qt_report)
        text = dump.read_text(encoding="utf-8")
        assert "Fatal Python error: Aborted" in text
        assert "stopped unexpectedly the last time" in parts.crash.last_box.text()
        assert str(dump) in parts.crash.last_box.informativeText()
        assert not faults.exists()  # reported once, not again at every start
    finally:
        parts.window.close()
        parts.close()
    reliability.record(
        AREA, "fatal Qt message / abort", "report written before the abort; next start shows it"
    )


def test_the_cli_says_one_sentence_and_keeps_a_report_for_an_unexpected_error(
    tmp_path: Path, reliability
) -> None:
    # A command with a bug in it, run through the real entry point.
    code = (
        "import sys, app.commands.ls as ls\n"
        "def run(args): return {}['no such key']\n"
        "ls.run = run\n"
        "from app.cli import main\n"
        "sys.exit(main(['ls']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), KVSTUDIO_DATA_DIR=str(tmp_path)),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (report,) = _reports(tmp_path)
    assert result.stderr.strip().splitlines() == [
        f"kvstudio: unexpected error (KeyError: 'no such key'); a report was saved to {report}."
    ]
    assert "in run" in report.read_text(encoding="utf-8")
    reliability.record(AREA, "CLI unexpected exception", "one line on stderr + report, exit 1")


def test_a_token_in_an_error_never_reaches_the_report_the_dialog_or_the_log(
    qtbot, app_parts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability
) -> None:
    """An error whose message carries the Hugging Face token (a URL with it, a header echoed by a
    server) is reported with the token hidden: users attach these files to bug reports."""
    token = "hf_CanaryCanaryCanaryCanaryCanary1234"
    odd_token = "my-own-endpoint-secret-42"  # a private endpoint's token of another shape
    monkeypatch.setenv("HF_TOKEN", odd_token)
    import logging

    from app.platform.app_log import start_log_file

    log_file = start_log_file(tmp_path, "built-in")
    assert log_file is not None

    def on_timer_timeout() -> None:
        logging.getLogger("app.test").warning("calling the Hub with %s", token)
        raise ValueError(f"401 for https://hub/?token={token}&other={odd_token}")

    with qtbot.waitSignal(app_parts.crash.report_written, timeout=HANG_GUARD_MS) as written:
        QTimer.singleShot(0, on_timer_timeout)
    report = Path(written.args[0]).read_text(encoding="utf-8")
    qtbot.waitUntil(lambda: app_parts.crash.last_box is not None, timeout=HANG_GUARD_MS)
    box = app_parts.crash.last_box
    for text in (report, box.text(), box.informativeText(), log_file.read_text(encoding="utf-8")):
        assert token not in text and odd_token not in text
    assert "hf_…(hidden)" in report
    reliability.record(
        AREA, "token in a crash's message", "hidden in the report, the dialog and the log file"
    )
