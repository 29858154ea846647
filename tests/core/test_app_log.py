"""start_log_file: the GUI's log file in the data folder, capped in size, and what it leaves on
stderr. Real files and the real logging module; each test puts the root logger back."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import __version__
from app.backends.store import BackendStore
from app.platform.app_log import log_file_path, start_log_file
from tests.read_only import read_only_folder


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, its handlers' levels and the 'app' logger's level restored after."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    levels = [h.level for h in handlers]
    app_level = logging.getLogger("app").level
    yield root
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler, level in zip(handlers, levels, strict=True):
        handler.setLevel(level)
    logging.getLogger("app").setLevel(app_level)


def test_the_first_line_names_version_platform_and_backend(tmp_path: Path, root_logger) -> None:
    path = start_log_file(tmp_path, BackendStore(tmp_path).chosen_name())  # as the GUI starts it
    assert path == tmp_path / "logs" / "kvstudio.log"
    logging.getLogger("app.somewhere").info("an app event")
    logging.getLogger("some_library").info("a library's chatter")
    logging.getLogger("some_library").warning("a library's warning")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert f"KV Studio {__version__} started on " in lines[0]
    assert lines[0].endswith("backend built-in")
    assert [line.split(": ", 1)[1] for line in lines[1:]] == ["an app event", "a library's warning"]
    assert start_log_file(tmp_path, "built-in") == path  # a second call adds no second handler
    logging.getLogger("app.somewhere").info("once")
    assert path.read_text(encoding="utf-8").count("once") == 1


def test_the_log_rotates_and_keeps_at_most_its_cap(tmp_path: Path, root_logger) -> None:
    start_log_file(tmp_path, "built-in", max_bytes=2000, backup_count=2)
    for n in range(500):
        logging.getLogger("app.busy").info("event number %d of a busy session", n)
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["kvstudio.log", "kvstudio.log.1", "kvstudio.log.2"]
    assert all((tmp_path / "logs" / f).stat().st_size <= 2000 for f in files)
    assert "event number 499 " in log_file_path(tmp_path).read_text(encoding="utf-8")


def test_stderr_keeps_showing_only_what_it_showed(
    tmp_path: Path, root_logger, capsys: pytest.CaptureFixture[str]
) -> None:
    stderr = logging.StreamHandler(sys.stderr)
    root_logger.addHandler(stderr)
    start_log_file(tmp_path, "built-in")
    logging.getLogger("app.somewhere").info("only in the file")
    logging.getLogger("app.somewhere").warning("in both")
    assert capsys.readouterr().err == "in both\n"
    assert "only in the file" in log_file_path(tmp_path).read_text(encoding="utf-8")


def test_a_read_only_logs_folder_gives_one_warning_and_no_file(
    tmp_path: Path, root_logger, caplog: pytest.LogCaptureFixture
) -> None:
    logs = tmp_path / "logs"
    handlers = list(root_logger.handlers)
    with read_only_folder(logs):
        assert start_log_file(tmp_path, "built-in") is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"KV Studio cannot write its log file {logs / 'kvstudio.log'} (")
    assert warning.endswith("); it runs on without one.")
    assert root_logger.handlers == handlers
