"""Driving the Models page in tests: build it on the test Hub, open a repo, start a download.

Shared by the tests of its three tabs (test_discover_tab.py, test_downloads_tab.py,
test_my_models_tab.py); the fixtures (the Hub with its repos, the environment) are in
conftest.py beside them.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.platform.probes import FreeMemory
from tests.waits import HANG_GUARD_MS

REPO = "acme/tiny-llama-GGUF"
OTHER = "zeta/tiny-gemma-GGUF"
GATED = "acme/gated-tiny-GGUF"
Q8 = "tiny-llama-Q8_0.gguf"
F16 = "tiny-llama-F16.gguf"
SPLIT = ("tiny-llama-Q4_K_M-00001-of-00002.gguf", "tiny-llama-Q4_K_M-00002-of-00002.gguf")
GIB = 1024**3
WAIT = HANG_GUARD_MS  # ms


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
    row = next(
        r
        for r in range(page.search_view.results.rowCount())
        if page.search_view.results.row_at(r).repo_id == repo_id
    )
    page.search_view.table.selectRow(row)
    qtbot.waitUntil(lambda: bool(page.repo_view.entry_names()), timeout=WAIT)
    # Header range reads finish before a test slows the server down for downloads.
    qtbot.waitUntil(lambda: not page.runner.is_busy(), timeout=WAIT)


def sent_since(hub, mark: int, name: str) -> int:
    """CDN body bytes of file `name` sent after request number `mark` of hub.log."""
    sha = hub.repos[REPO].files[name].sha256
    return sum(
        r.sent for r in hub.log[mark:] if r.method == "GET" and r.path.startswith(f"/cdn/{sha}")
    )


def wait_fits(qtbot, page) -> None:
    qtbot.waitUntil(
        lambda: all(page.repo_view.fit_for(n) for n in page.repo_view.entry_names()), timeout=WAIT
    )


def start_download(qtbot, page, first_file: str) -> str:
    entry = next(e for n, (e, _row) in page.repo_view._entries.items() if n == first_file)
    page.repo_view.select_entry(first_file)
    qtbot.mouseClick(page.repo_view.download_button, Qt.MouseButton.LeftButton)
    return f"{entry.repo_id}/{entry.first_file}"


def download_q8(qtbot, page) -> Path:
    open_repo(qtbot, page)
    start_download(qtbot, page, Q8)
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT) as finished:
        pass
    lib = page.library_view
    path = finished.args[1].path
    qtbot.waitUntil(lambda: lib.select_path(str(path)), timeout=WAIT)
    return path
