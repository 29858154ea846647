"""Crash reports: an exception nobody caught becomes a file in <data folder>/logs/ and a sentence.

`CrashReporter.install` hooks `sys.excepthook` (the main thread, and Qt slots, which PySide6
hands to it) and `threading.excepthook` (worker threads), and turns on `faulthandler` into
logs/faults-<pid>.log for what Python cannot catch (a segfault, an abort): a dump left by a
process that is gone is turned into a report at the next start. Each report is
`crash-<time>-<pid>-<n>.txt` with the version, the platform and the traceback;
`on_report(path, summary)` then tells the user (the GUI: a dialog, app/ui/crash_dialog.py; the
CLI: one line on stderr). No Qt here.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

import psutil

from app import __version__
from app.platform.app_log import LOGS_FOLDER
from app.platform.redact import redact

log = logging.getLogger(__name__)

FAULTS_PREFIX = "faults-"
MAX_REPORTS = 20  # per run: an exception raised on every repaint must not fill the disk
MAX_SUMMARY = 200

OnReport = Callable[[Path | None, str], None]


def summary_of(error: BaseException) -> str:
    """One line: 'ValueError: the message' (the first line, cut to MAX_SUMMARY characters)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    line = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return line if len(line) <= MAX_SUMMARY else line[: MAX_SUMMARY - 1] + "…"


class CrashReporter:
    """Writes crash reports for one data folder. `on_report` is called with the report's path
    (None when it could not be written) and a one-line summary, on the thread that failed."""

    def __init__(self, data_folder: Path, on_report: OnReport | None = None) -> None:
        self.folder = data_folder / LOGS_FOLDER
        self.on_report = on_report
        self.reports: list[Path] = []
        self._count = 0
        self._lock = threading.Lock()
        self._faults: IO[str] | None = None
        self._faults_before = False
        self._previous: (
            tuple[
                Callable[[type[BaseException], BaseException, TracebackType | None], object],
                Callable[[threading.ExceptHookArgs], object],
            ]
            | None
        ) = None

    # ---- hooks ---------------------------------------------------------------------------

    def install(self, faults: bool = True) -> list[Path]:
        """Hook uncaught exceptions and (with `faults`) fatal signals. Returns the reports made
        from faulthandler dumps that earlier runs left (they died without a word)."""
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._on_uncaught
        threading.excepthook = self._on_thread_uncaught
        if not faults:
            return []
        earlier = self._report_earlier_faults()
        self._faults_before = faulthandler.is_enabled()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # One file per process: a second window must not truncate the first one's.
            path = self.folder / f"{FAULTS_PREFIX}{os.getpid()}.log"
            self._faults = path.open("w", encoding="utf-8")
            faulthandler.enable(file=self._faults, all_threads=True)
        except OSError as error:
            log.warning("no fault log in %s (%s)", self.folder, error.strerror or error)
        return earlier

    def uninstall(self) -> None:
        if self._previous is not None:
            sys.excepthook, threading.excepthook = self._previous
            self._previous = None
        if self._faults is not None:
            faulthandler.disable()
            if self._faults_before and sys.__stderr__ is not None:
                faulthandler.enable(file=sys.__stderr__)  # as it was (pytest, python -X)
            path = Path(self._faults.name)
            self._faults.close()
            self._faults = None
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:
                    path.unlink()  # a clean exit leaves no fault log behind

    def _on_uncaught(
        self, kind: type[BaseException], error: BaseException, tb: TracebackType | None
    ) -> None:
        if issubclass(kind, KeyboardInterrupt):
            assert self._previous is not None
            self._previous[0](kind, error, tb)
            return
        self.report(error, "uncaught exception in the main thread")

    def _on_thread_uncaught(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or issubclass(args.exc_type, SystemExit):
            return
        name = args.thread.name if args.thread is not None else "?"
        self.report(args.exc_value, f"uncaught exception in thread {name}")

    # ---- reports -------------------------------------------------------------------------

    def report(self, error: BaseException, where: str) -> Path | None:
        """Write a report for `error` and tell the user; returns the report's path."""
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return self.report_text(summary_of(error), where, text)

    def report_text(self, summary: str, where: str, details: str) -> Path | None:
        summary, details = redact(summary), redact(details)  # a report may be sent to us
        log.info("crash report: %s: %s", where, summary)  # the user is told by on_report
        path = self._write(summary, where, details)
        if self.on_report is not None:
            try:
                self.on_report(path, summary)
            except Exception:  # telling the user must never raise into the failing code
                log.exception("could not show the crash report")
        return path

    def _write(self, summary: str, where: str, details: str) -> Path | None:
        with self._lock:
            self._count += 1
            n = self._count
        if n > MAX_REPORTS:
            return None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.folder / f"crash-{stamp}-{os.getpid()}-{n}.txt"
        body = (
            f"KV Studio {__version__} crash report\n"
            f"when: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
            f"platform: {platform.platform()} (Python {platform.python_version()})\n"
            f"where: {where}\n"
            f"what: {summary}\n\n{details}"
        )
        body = redact(body)  # every path to a report file passes here, earlier faults included
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        except OSError as error:
            log.warning("could not write the crash report %s (%s)", path, error.strerror)
            return None
        self.reports.append(path)
        return path

    def _report_earlier_faults(self) -> list[Path]:
        reports = []
        for faults in sorted(self.folder.glob(f"{FAULTS_PREFIX}*.log")):
            pid = faults.stem.removeprefix(FAULTS_PREFIX)
            if not pid.isdigit() or psutil.pid_exists(int(pid)):
                continue  # a window still running (or a name not ours)
            try:
                dump = faults.read_text(encoding="utf-8", errors="replace")
                faults.unlink()
            except OSError:
                continue
            if dump.strip():
                first = dump.strip().splitlines()[0]
                where = f"a fatal error in an earlier run (process {pid})"
                path = self._write(f"KV Studio stopped: {first}", where, dump)
                if path is not None:
                    reports.append(path)
        return reports
