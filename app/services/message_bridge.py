"""The message bridge: how code without widgets tells the user something.

Services and controllers call `bridge.error(...)`, `bridge.warning(...)` or
`bridge.info(...)` with one sentence; the main window shows it (status bar for info,
a message box for errors). Nobody below the UI ever opens a widget or shows a traceback.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.platform.errors import AppError

log = logging.getLogger(__name__)


class MessageBridge(QObject):
    """Signals:
    error_reported(str): something failed; the window shows a message box.
    warning_reported(str): the user should know (shown in the status bar, highlighted).
    info_reported(str): a passing note (shown in the status bar for a few seconds).
    """

    error_reported = Signal(str)
    warning_reported = Signal(str)
    info_reported = Signal(str)

    def error(self, text: str) -> None:
        log.error("%s", text)
        self.error_reported.emit(text)

    def warning(self, text: str) -> None:
        log.warning("%s", text)
        self.warning_reported.emit(text)

    def info(self, text: str) -> None:
        log.info("%s", text)
        self.info_reported.emit(text)

    def exception(self, error: BaseException, context: str = "") -> None:
        """Report an exception as a sentence: AppError text as is, others generically
        (with the traceback in the log, not on screen)."""
        if isinstance(error, AppError):
            text = str(error)
        else:
            log.error("unexpected error%s", f" while {context}" if context else "", exc_info=error)
            text = f"Something went wrong{f' while {context}' if context else ''}: {error}"
        self.error(text)
