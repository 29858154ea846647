"""The GUI's side of crash reports: a dialog with the report's path and a one-line summary, and
Qt's own critical and fatal messages turned into reports (app/platform/crash_report.py writes them).

A report may come from any thread; the dialog is opened on the GUI thread through a queued
signal. One dialog at a time: an exception raised on every repaint writes reports (up to the
reporter's cap) but does not stack windows.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import (
    QMessageLogContext,
    QObject,
    Qt,
    QtMsgType,
    Signal,
    qInstallMessageHandler,
)
from PySide6.QtWidgets import QMessageBox, QWidget

from app.platform.crash_report import CrashReporter

log = logging.getLogger(__name__)
qt_log = logging.getLogger("app.qt")


class CrashDialogs(QObject):
    """Installs the crash hooks for the GUI and shows each report.

    Signals:
    report_written(str, str): a report's path ('' when it could not be written) and summary.
    """

    report_written = Signal(str, str)

    def __init__(self, data_folder: Path, parent_window: QWidget | None = None) -> None:
        super().__init__()
        self.window = parent_window
        self.reporter = CrashReporter(data_folder, self._on_reporter_report)
        self.last_box: QMessageBox | None = None
        self.report_written.connect(self._show, Qt.ConnectionType.QueuedConnection)

    def install(self) -> list[Path]:
        """Hook everything; returns reports made from earlier runs' fatal errors (shown too)."""
        earlier = self.reporter.install()
        qInstallMessageHandler(self._on_qt_message)
        for path in earlier:
            self.report_written.emit(str(path), "KV Studio stopped unexpectedly the last time.")
        return earlier

    def uninstall(self) -> None:
        qInstallMessageHandler(None)
        self.reporter.uninstall()

    def _on_reporter_report(self, path: Path | None, summary: str) -> None:
        self.report_written.emit(str(path) if path else "", summary)

    def _on_qt_message(
        self, kind: QtMsgType, context: QMessageLogContext, message: str | None
    ) -> None:
        text = message or ""
        if kind in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
            # A fatal message aborts the process when this returns: the report is written first.
            where = f"Qt {'fatal' if kind == QtMsgType.QtFatalMsg else 'critical'} message"
            origin = f"{context.file}:{context.line} {context.function}" if context.file else ""
            self.reporter.report_text(
                text.splitlines()[0] if text else where, where, f"{text}\n{origin}\n"
            )
        elif kind == QtMsgType.QtWarningMsg:
            qt_log.warning("%s", text)
        else:
            qt_log.debug("%s", text)

    def _show(self, path: str, summary: str) -> None:
        if self.last_box is not None and self.last_box.isVisible():
            return
        where = f"A report was saved to {path}" if path else "No report could be saved"
        box = QMessageBox(
            QMessageBox.Icon.Critical,
            "KV Studio",
            f"KV Studio hit an unexpected error: {summary}",
            QMessageBox.StandardButton.Ok,
            self.window,
        )
        box.setTextFormat(Qt.TextFormat.PlainText)  # the summary is an exception's text
        box.setInformativeText(
            f"{where}; your conversations are saved. Please include it if you report the problem."
        )
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.open()  # not exec(): the app keeps running
        self.last_box = box
