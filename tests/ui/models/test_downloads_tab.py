"""The Downloads tab: the queue as the user drives it (pause, resume, cancel, quit and
restart), failures in one sentence (checksum, gated repo, full disk)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.platform.errors import DiskFullError, GatedRepoError
from app.services.downloads import DownloadState
from tests.hub_fixtures import SMALL_DISK_KINDS, make_small_disk
from tests.ui.models.page_driver import (
    F16,
    GATED,
    Q8,
    SPLIT,
    WAIT,
    make_page,
    open_repo,
    sent_since,
    shut,
    start_download,
)

# ---- downloads --------------------------------------------------------------------------------


def test_download_pause_resume_finishes_without_refetching(qtbot, env, gguf_files, hub):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    size = gguf_files["f16"].stat().st_size
    hub.faults.rate_limit[F16] = size / 3  # about three seconds, so there is time to pause
    mark = len(hub.log)
    key = start_download(qtbot, page, F16)
    assert page.tabs.currentIndex() == page.TAB_DOWNLOADS
    manager, view = page.downloads, page.downloads_view
    qtbot.waitUntil(lambda: manager.item(key).done_bytes > 0, timeout=WAIT)
    assert manager.item(key).state is DownloadState.DOWNLOADING
    # Bytes, speed and time left show while it runs.
    row = view.model.row_of(key)

    def cell(col: int) -> str:
        return view.model.index(row, col).data()

    qtbot.waitUntil(lambda: cell(3).endswith("/s") and cell(4).endswith(" s"), timeout=WAIT)
    from app.platform import units as fmt

    assert cell(2) == f"{fmt.size(manager.item(key).done_bytes)} of {fmt.size(size)}"

    with qtbot.waitSignal(manager.download_paused, timeout=WAIT):
        qtbot.mouseClick(view.pause_button, Qt.LeftButton)
    paused_at = manager.item(key).done_bytes
    assert 0 < paused_at < size
    assert view.model.index(row, 5).data() == "Paused"

    hub.faults.rate_limit.pop(F16)
    with qtbot.waitSignal(manager.download_finished, timeout=WAIT) as finished:
        qtbot.mouseClick(view.resume_button, Qt.LeftButton)
    path = finished.args[1].path
    assert path.read_bytes() == gguf_files["f16"].read_bytes()
    # Resumed from the bytes on disk: the server sent the file about once, not twice.
    assert size <= sent_since(hub, mark, F16) < size + size // 4
    assert view.model.index(row, 5).data() == "Done"

    # The finished model appears in My models.
    lib = page.library_view
    qtbot.waitUntil(lambda: any(Path(p).name == F16 for p in lib.model.paths()), timeout=WAIT)
    shut(page)


def test_cancel_removes_the_partial_file(qtbot, env, gguf_files, hub):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    size = gguf_files["q8"].stat().st_size
    hub.faults.rate_limit[Q8] = size / 4
    key = start_download(qtbot, page, Q8)
    manager = page.downloads
    qtbot.waitUntil(lambda: manager.item(key).done_bytes > 0, timeout=WAIT)
    from app.models.hub import partial_paths

    with qtbot.waitSignal(manager.download_cancelled, timeout=WAIT):
        qtbot.mouseClick(page.downloads_view.cancel_button, Qt.LeftButton)
    assert manager.item(key).state is DownloadState.CANCELLED
    assert not any(p.exists() for p in partial_paths(manager.item(key).entry))
    assert not list((env / "hf" / "hub").rglob(Q8))
    shut(page)


def test_at_most_two_downloads_run_at_once(qtbot, env, hub, gguf_files):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    for name in (Q8, F16, SPLIT[0], SPLIT[1]):
        hub.faults.rate_limit[name] = 50_000
    keys = [start_download(qtbot, page, name) for name in (Q8, F16, SPLIT[0])]
    manager = page.downloads
    states = [manager.item(k).state for k in keys]
    assert states.count(DownloadState.DOWNLOADING) == 2 and states[2] is DownloadState.QUEUED
    assert page.tabs.tabText(page.TAB_DOWNLOADS) == "Downloads (3)"
    shut(page)


def test_quit_and_restart_resumes_from_bytes_on_disk(qtbot, env, hub, gguf_files):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    size = gguf_files["f16"].stat().st_size
    hub.faults.rate_limit[F16] = size / 3
    mark = len(hub.log)
    key = start_download(qtbot, page, F16)
    qtbot.waitUntil(lambda: page.downloads.item(key).done_bytes > size // 10, timeout=WAIT)
    page.shutdown()  # quitting: running downloads stop, partial files stay
    page.close()
    hub.faults.rate_limit.pop(F16)

    page2 = make_page(qtbot, env)
    manager = page2.downloads
    assert [i.key for i in manager.items()] == [key]
    restored_from = manager.item(key).done_bytes
    assert restored_from > 0
    with qtbot.waitSignal(manager.download_finished, timeout=WAIT) as finished:
        pass
    assert finished.args[1].path.read_bytes() == gguf_files["f16"].read_bytes()
    assert size <= sent_since(hub, mark, F16) < size + size // 4
    shut(page2)


def test_checksum_mismatch_fails_in_words_and_keeps_library_clean(qtbot, env, hub):
    hub.faults.wrong_sha256(Q8)
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    key = start_download(qtbot, page, Q8)
    with qtbot.waitSignal(page.downloads.download_failed, timeout=WAIT) as failed:
        pass
    assert "checksum" in str(failed.args[1])
    view = page.downloads_view
    assert view.model.index(view.model.row_of(key), 5).data().startswith("Failed: ")
    page.library_view.refresh()
    qtbot.waitUntil(lambda: page.library_view.refresh_button.isEnabled(), timeout=WAIT)
    assert not any(Path(p).name == Q8 for p in page.library_view.model.paths())
    shut(page)


def test_gated_repo_asks_for_a_token_then_downloads(qtbot, env, hub):
    page = make_page(qtbot, env)
    open_repo(qtbot, page, GATED)
    # The header cannot be read without a token: the repo view says so and offers the dialog.
    qtbot.waitUntil(lambda: page.repo_view.gate_box.isVisible(), timeout=WAIT)
    assert "token" in page.repo_view.gate_label.text()
    key = start_download(qtbot, page, "gated-Q8_0.gguf")
    with qtbot.waitSignal(page.downloads.download_failed, timeout=WAIT):
        pass
    assert isinstance(page.downloads.item(key).error, GatedRepoError)
    dialog = page.token_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT)
    dialog.token_edit.setText("hf_test_token_with_access")
    dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    token_file = env / "hf" / "token"
    assert token_file.read_text() == "hf_test_token_with_access"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    view = page.downloads_view
    view.select(key)
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT):
        qtbot.mouseClick(view.resume_button, Qt.LeftButton)
    # The repo view re-reads the header with the token: verdicts, no more gate message.
    qtbot.waitUntil(lambda: page.repo_view.fit_for("gated-Q8_0.gguf") is not None, timeout=WAIT)

    # The saved token is never shown again: the dialog only names a masked form.
    qtbot.mouseClick(page.token_button, Qt.MouseButton.LeftButton)
    dialog = page.token_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT)
    assert dialog.token_edit.text() == ""
    assert "hf_test_token_with_access" not in dialog.current_label.text()
    assert "hf_…cess" in dialog.current_label.text()
    dialog.reject()
    shut(page)


@pytest.fixture(params=SMALL_DISK_KINDS)
def small_disk(request, env, monkeypatch):
    """A 4 MiB disk as the HF cache: a real tmpfs where this user may mount one, and,
    everywhere, a simulated one (tests/hub_fixtures.py SimulatedSmallDisk)."""
    import subprocess

    mounts: list[Path] = []
    point = make_small_disk(request.param, env / "small-disk", 4 * 1024 * 1024, monkeypatch, mounts)
    monkeypatch.setenv("HF_HUB_CACHE", str(point / "hub"))
    yield point
    for mounted in mounts:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


def test_disk_full_mid_download_fails_in_words_and_resumes(qtbot, env, hub, gguf_files, small_disk):
    import shutil

    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    size = gguf_files["f16"].stat().st_size
    hub.faults.rate_limit[F16] = size / 3
    key = start_download(qtbot, page, F16)
    manager = page.downloads
    qtbot.waitUntil(lambda: manager.item(key).done_bytes > size // 10, timeout=WAIT)
    # Something else fills the disk while the model downloads.
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 64 * 1024))
    with qtbot.waitSignal(manager.download_failed, timeout=WAIT) as failed:
        pass
    assert isinstance(manager.item(key).error, DiskFullError), failed.args[1]
    view = page.downloads_view
    assert view.model.index(view.model.row_of(key), 5).data() == f"Failed: {failed.args[1]}"
    kept = manager.item(key).done_bytes
    assert kept > 0  # the partial file stays for a resume

    filler.unlink()
    hub.faults.rate_limit.pop(F16)
    mark = len(hub.log)
    view.select(key)
    with qtbot.waitSignal(manager.download_finished, timeout=WAIT) as finished:
        qtbot.mouseClick(view.resume_button, Qt.LeftButton)
    assert finished.args[1].path.read_bytes() == gguf_files["f16"].read_bytes()
    assert sent_since(hub, mark, F16) <= size - kept
    shut(page)


def test_not_enough_disk_space_refuses_before_downloading(qtbot, env, hub, small_disk):
    import shutil

    (small_disk / "filler").write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 1024 * 1024))
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    mark = len(hub.log)
    key = start_download(qtbot, page, F16)
    with qtbot.waitSignal(page.downloads.download_failed, timeout=WAIT) as failed:
        pass
    assert str(failed.args[1]).startswith("Not enough disk space")
    assert page.downloads.item(key).state is DownloadState.FAILED
    assert sent_since(hub, mark, F16) == 0
    shut(page)
