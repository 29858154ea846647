"""The app's log file: <data folder>/logs/kvstudio.log, for the GUI.

An installed app has no terminal, so without a file nothing it logs is kept. The file takes
KV Studio's own INFO records and every library's warnings, and is capped in size (it rotates to
kvstudio.log.1 ... .3 and drops the oldest). The CLI does not call this: a command's log stays
on stderr.
"""

from __future__ import annotations

import logging
import logging.handlers
import platform
from pathlib import Path

from app import __version__
from app.platform.redact import RedactingFormatter

log = logging.getLogger(__name__)

LOGS_FOLDER = "logs"
LOG_NAME = "kvstudio.log"
MAX_BYTES = 1 << 20
BACKUP_COUNT = 3
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_file_path(data_folder: Path) -> Path:
    return data_folder / LOGS_FOLDER / LOG_NAME


def start_log_file(
    data_folder: Path,
    backend: str,
    *,
    max_bytes: int = MAX_BYTES,
    backup_count: int = BACKUP_COUNT,
) -> Path | None:
    """Log to `data_folder`/logs/kvstudio.log from now on and write the start line (version,
    platform, and `backend`, the one the engine runs). Returns the file, or None when it cannot
    be written: then one warning goes to stderr and the app runs on without a file. Calling it
    again for the same file changes nothing."""
    path = log_file_path(data_folder)
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == path:
            return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
        )
    except OSError as error:
        log.warning(
            "KV Studio cannot write its log file %s (%s); it runs on without one.",
            path,
            error.strerror or error,
        )
        return None
    file_handler.setLevel(logging.INFO)
    file_handler.setFormatter(RedactingFormatter(LOG_FORMAT))
    # The app's INFO records must reach the file, but stderr must keep showing what it showed
    # (warnings; everything with -v): so the handlers already there keep the root's level, and
    # only the "app" loggers are opened up to INFO. The root itself stays as it was, because
    # the engine process is started at the root's level and would flood its stderr otherwise.
    for handler in root.handlers:
        if handler.level == logging.NOTSET:
            handler.setLevel(root.level)
    app_logger = logging.getLogger("app")
    if app_logger.getEffectiveLevel() > logging.INFO:
        app_logger.setLevel(logging.INFO)
    root.addHandler(file_handler)
    log.info(
        "KV Studio %s started on %s (Python %s), backend %s",
        __version__,
        platform.platform(),
        platform.python_version(),
        backend,
    )
    return path
