"""A download survives the app being killed: the real `kvstudio gui` process (offscreen)
continues a saved download from the test Hub, which sends part of the file and holds; the app
is SIGKILLed once those bytes are on its disk, and reopened on the same data it resumes from
there: the server sends every byte of the file exactly once.

This already held when written (downloads.json is saved on every change and the queue resumes
from the partial file; tests/core/test_download_faults.py kills a queue alone): this test
proves it for the whole app, killed with its engine."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.models.hub import list_gguf_files
from app.models.hub.downloader import partial_paths
from tests.waits import HANG_GUARD_MS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="waits on the file through inotify"),
]

AREA = "Kills and crashes"
ROOT = Path(__file__).resolve().parents[2]
REPO, NAME = "acme/tiny-GGUF", "tiny-Q8_0.gguf"
HELD_AT = 600_000  # bytes the server sends before it holds (the file is ~2.4 MB)
APP_TIMEOUT_S = 120
IN_MODIFY, IN_CREATE = 0x2, 0x100


def wait_for_size(path: Path, size: int, timeout: float) -> int:
    """Block until `path` (created in its existing folder) holds `size` bytes, woken by the
    kernel on each write (inotify), not by a timer. Returns the size it has."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    try:
        libc.inotify_add_watch(fd, str(path.parent).encode(), IN_MODIFY | IN_CREATE)
        while not (path.exists() and path.stat().st_size >= size):
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                break
            while True:  # drain the events; only the size matters
                try:
                    os.read(fd, 64 * 1024)
                except BlockingIOError:
                    break
        return path.stat().st_size if path.exists() else 0
    finally:
        os.close(fd)


def test_a_download_running_when_the_app_is_killed_resumes_where_it_was(
    qtbot, hub_env, tiny_gguf, tmp_path, reliability
) -> None:
    hub = hub_env
    source = tiny_gguf(NAME, n_layer=8)
    served = hub.add_repo(REPO, {NAME: source}).files[NAME]
    entry = list_gguf_files(REPO).pick("Q8_0")
    folder = Path(os.environ["KVSTUDIO_DATA_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    # The queue as the app saves it while this download runs (resume at the next start).
    record = {"entry": entry.to_json(), "folder": None, "resume": True}
    (folder / "downloads.json").write_text(json.dumps({"version": 1, "downloads": [record]}))
    (partial,) = partial_paths(entry)
    partial.parent.mkdir(parents=True, exist_ok=True)  # watched before the app writes into it
    hub.faults.hold_after[NAME] = [HELD_AT]

    model = tiny_gguf("chat.gguf")  # a model to open with, so it is not a first start
    app = subprocess.Popen(
        [sys.executable, "-m", "app", "gui", "--model", str(model)],
        cwd=ROOT,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the app and its engine
    )
    # The app's stderr is read on a thread, so a full pipe never stalls it.
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(app.stderr.read()), daemon=True)
    reader.start()
    try:
        assert hub.faults.held.wait(APP_TIMEOUT_S), "the app never resumed the download"
        kept_before_kill = wait_for_size(partial, HELD_AT, APP_TIMEOUT_S)
        assert kept_before_kill == HELD_AT
        os.killpg(app.pid, signal.SIGKILL)  # no warning, no chance to save anything more
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
        app.wait(30)
        hub.faults.release.set()  # the held request ends
        reader.join(10)
    assert app.returncode == -signal.SIGKILL, b"".join(errors)[-3000:]
    kept = partial.stat().st_size
    saved = json.loads((folder / "downloads.json").read_text())["downloads"]
    assert [d["resume"] for d in saved] == [True]  # still marked to continue

    # Reopened, the app continues from the bytes on disk and finishes.
    from app.gui import build_app

    parts = build_app(folder)
    try:
        models = parts.window.pages.widget(1)
        with qtbot.waitSignal(
            models.downloads.download_finished, timeout=HANG_GUARD_MS
        ) as finished:
            parts.window.show()
        _, done = finished.args
        assert hashlib.sha256(Path(done.path).read_bytes()).hexdigest() == served.sha256
    finally:
        parts.window.close()
        parts.close()
    gets = [r for r in hub.log if r.method == "GET" and "/cdn/" in r.path]
    assert [r.range for r in gets][-1] == f"bytes={kept}-"
    fetched_twice = hub.bytes_sent(served.sha256) - served.size
    assert fetched_twice == 0
    reliability.record(AREA, "app SIGKILLs while a download ran", 1)
    reliability.record(
        AREA,
        "download after the app was killed",
        f"resumed at byte {kept:,} of {served.size:,}; bytes fetched twice: {fetched_twice}",
    )
