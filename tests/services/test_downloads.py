"""The GUI's download queue (DownloadManager): the core queue's reports as signals on the GUI
thread, against the fake Hub. The queue's own faults are tested in tests/core."""

from __future__ import annotations

import pytest

from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")
from PySide6.QtCore import QCoreApplication, QThread

from app.models.hub import list_gguf_files, partial_paths
from app.models.library import LibraryModel
from app.models.model_folders import ModelFolders
from app.platform.errors import ChecksumMismatchError
from app.services.downloads import DownloadManager, DownloadState

REPO = "acme/tiny-GGUF"
WAIT = HANG_GUARD_MS


@pytest.fixture
def manager(qtbot, hub_env, tiny_gguf, tmp_path):
    hub_env.add_repo(
        REPO, {"tiny-Q8_0.gguf": tiny_gguf("a.gguf"), "tiny-F16.gguf": tiny_gguf("b.gguf", seed=2)}
    )
    manager = DownloadManager(ModelFolders.of_app(), state_file=tmp_path / "downloads.json")
    yield manager
    manager.shutdown()


def test_reports_arrive_on_the_gui_thread_and_the_finished_model_comes_with_them(
    qtbot, manager
) -> None:
    threads = []
    manager.download_changed.connect(lambda _key: threads.append(QThread.currentThread()))
    with qtbot.waitSignal(manager.download_added, timeout=WAIT):
        key = manager.enqueue(list_gguf_files(REPO).pick("Q8_0"))
    with qtbot.waitSignal(manager.download_finished, timeout=WAIT) as finished:
        pass
    model = finished.args[1]
    assert finished.args[0] == key and isinstance(model, LibraryModel)
    assert model.repo_id == REPO and model.path == manager.item(key).model.path
    assert threads and set(threads) == {QCoreApplication.instance().thread()}


def test_a_failure_comes_as_the_error_itself(qtbot, manager, hub_env) -> None:
    hub_env.faults.wrong_sha256("tiny-F16.gguf")
    key = manager.enqueue(list_gguf_files(REPO).pick("F16"))
    with qtbot.waitSignal(manager.download_failed, timeout=WAIT) as failed:
        pass
    assert isinstance(failed.args[1], ChecksumMismatchError)
    assert manager.item(key).state is DownloadState.FAILED and manager.item(key).message == str(
        failed.args[1]
    )


def test_removing_a_running_download_cancels_it_and_nothing_more_is_heard(
    qtbot, manager, hub_env
) -> None:
    entry = list_gguf_files(REPO).pick("Q8_0")
    hub_env.faults.rate_limit["tiny-Q8_0.gguf"] = 200_000
    key = manager.enqueue(entry)
    qtbot.waitUntil(lambda: manager.item(key).done_bytes > 0, timeout=WAIT)
    heard: list[str] = []
    removed: list[str] = []
    manager.download_changed.connect(heard.append)
    manager.download_removed.connect(removed.append)
    manager.remove(key)
    assert removed == [key] and manager.items() == []  # at once, for the table
    qtbot.waitUntil(lambda: not any(p.exists() for p in partial_paths(entry)), timeout=WAIT)
    assert heard == []


def test_shutdown_then_restore_continues_from_the_bytes_on_disk(
    qtbot, manager, hub_env, tmp_path
) -> None:
    entry = list_gguf_files(REPO).pick("Q8_0")
    hub_env.faults.rate_limit["tiny-Q8_0.gguf"] = 300_000
    key = manager.enqueue(entry)
    qtbot.waitUntil(lambda: manager.item(key).done_bytes > 100_000, timeout=WAIT)
    manager.shutdown()  # quitting: the partial file stays, the queue file says "resume"
    hub_env.faults.clear()
    again = DownloadManager(ModelFolders.of_app(), state_file=tmp_path / "downloads.json")
    try:
        with qtbot.waitSignal(again.download_finished, timeout=WAIT) as finished:
            assert again.restore() == 1
        assert finished.args[1].path.stat().st_size == entry.total_size
        ranges = [r.range for r in hub_env.log if r.method == "GET" and "/cdn/" in r.path]
        assert ranges[-1] is not None and ranges[-1].startswith("bytes=")
    finally:
        again.shutdown()
