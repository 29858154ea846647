"""The first-run dialog, offscreen, on the real app: it shows what a fake RX 7900 XTX sysfs tree
(tests/gpu_sysfs.py) says, installs the real CPU package from a file (picked through the file
dialog) without any network connection, and it becomes the engine's backend on the Backends
page; a damaged package gets one sentence and changes nothing; a URL install downloads from a
real HTTP server on 127.0.0.1, and a download can be cancelled. The network guard is
tests/network_guard.py's."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from app.backends.gpu_detect import Gpu, detect_gpus
from app.backends.store import BUILT_IN, BackendStore
from app.ui.backends_page import BackendsPage
from tests.backends.package_edits import copy_package, flip_a_byte, repack
from tests.docs_output import save_screenshot
from tests.gpu_sysfs import RX_7900_XTX, fake_sysfs
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

TASK_MS = 180_000  # hashing and two test loads of the package on 2 shared cores
SENTENCE = "Radeon RX 7900 XTX found: the rocm-rdna3 backend runs the int8-K kernel on it."


def rx_7900_xtx(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Detection as the app does it, on a fake sysfs tree holding an RX 7900 XTX."""
    drm = fake_sysfs(tmp_path / "sys", RX_7900_XTX)

    def detect() -> list[Gpu]:
        return detect_gpus(drm, nvml=None, vulkaninfo=None, system="Linux", machine="x86_64")

    return detect


def open_dialog(qtbot, app, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.gui import offer_first_run_dialog

    dialog = offer_first_run_dialog(app, detect=rx_7900_xtx(tmp_path))
    assert dialog is not None
    with qtbot.waitSignal(dialog.detection_finished, timeout=HANG_GUARD_MS):
        pass
    return dialog


def test_installing_a_package_from_a_file_makes_it_the_backend_without_network(
    network_attempts, qtbot, chat_app, cpu_package, tmp_path, monkeypatch, docs_folder
):
    from app.gui import offer_first_run_dialog
    from app.ui import first_run

    dialog = open_dialog(qtbot, chat_app, tmp_path)
    assert dialog.isVisible()
    assert dialog.gpus.text() == "Found: Radeon RX 7900 XTX (gfx1100, 23.98 GiB, amdgpu sysfs)"
    assert dialog.advice.text() == SENTENCE
    assert "ROCm 6" in dialog.needs.text()
    assert chat_app.settings.settings.first_run_done
    assert offer_first_run_dialog(chat_app) is None  # once only
    save_screenshot(dialog, docs_folder, "first-run.png")

    monkeypatch.setattr(
        first_run.QFileDialog, "getOpenFileName", lambda *a, **k: (str(cpu_package), "")
    )
    with (
        qtbot.waitSignal(dialog.backend_chosen, timeout=TASK_MS) as chosen,
        qtbot.waitSignal(dialog.install_finished, timeout=TASK_MS) as finished,
    ):
        dialog.file_button.click()
    assert chosen.args == ["cpu"]
    assert finished.args == ["Installed the cpu backend; the engine now runs it."]
    assert dialog.message.text() == finished.args[0]
    assert dialog.keep_button.text() == "Done"

    store = BackendStore(chat_app.settings.folder)  # what the settings file on disk says
    assert [b.name for b in store.installed()] == [BUILT_IN, "cpu"]
    assert store.chosen_name() == "cpu"
    page = chat_app.window.findChild(BackendsPage)
    assert page.in_use.text() == "The engine runs the cpu backend."
    assert [page.table.item(r, 0).text() for r in range(page.table.rowCount())] == ["", "● in use"]
    assert network_attempts == []


def test_a_damaged_package_gets_one_sentence_and_changes_nothing(
    network_attempts, qtbot, chat_app, cpu_package, tmp_path
):
    dialog = open_dialog(qtbot, chat_app, tmp_path)
    folder = copy_package(cpu_package, tmp_path)
    flip_a_byte(folder / "libllama.so")
    tampered = repack(folder, tmp_path / "kvstudio-backend-cpu-tampered.tar.gz")
    with qtbot.waitSignal(dialog.install_finished, timeout=TASK_MS) as finished:
        dialog.install_from_file(tampered)
    assert finished.args == [
        "The cpu backend's files do not match its manifest: libllama.so does not match its "
        "sha256. The engine keeps the built-in backend."
    ]
    cut = tmp_path / "kvstudio-backend-cpu-cut.tar.gz"
    cut.write_bytes(cpu_package.read_bytes()[: cpu_package.stat().st_size // 2])
    with qtbot.waitSignal(dialog.install_finished, timeout=TASK_MS) as finished:
        dialog.install_from_file(cut)
    assert finished.args == [
        "kvstudio-backend-cpu-cut.tar.gz is damaged (it ends early). "
        "The engine keeps the built-in backend."
    ]
    store = BackendStore(chat_app.settings.folder)
    assert [b.name for b in store.installed()] == [BUILT_IN]
    assert store.chosen_name() == BUILT_IN
    assert dialog.keep_button.text() == "Keep the built-in CPU backend"
    assert network_attempts == []


class _Server(http.server.ThreadingHTTPServer):
    """A real HTTP server on 127.0.0.1 serving a folder; `stall` makes it send the first
    64 KiB of a file and then wait until it is set (a download to cancel)."""

    def __init__(self, folder: Path) -> None:
        self.requests: list[str] = []
        self.stall: threading.Event | None = None
        super().__init__(("127.0.0.1", 0), partial(_Handler, directory=str(folder)))


class _Handler(http.server.SimpleHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        self.server.requests.append(f"{self.command} {self.path}")

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        if self.server.stall is None:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(64 * 1024))
        outputfile.flush()
        self.server.stall.wait(60)


@pytest.fixture
def server(cpu_package: Path) -> Iterator[_Server]:
    served = _Server(cpu_package.parent)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    if served.stall is not None:
        served.stall.set()
    served.shutdown()
    served.server_close()
    thread.join(10)


def test_installing_from_a_url_downloads_checks_and_uses_it(
    qtbot, chat_app, cpu_package, tmp_path, server
):
    dialog = open_dialog(qtbot, chat_app, tmp_path)
    url = f"http://127.0.0.1:{server.server_address[1]}/{cpu_package.name}"
    dialog.url.setText(url)
    with (
        qtbot.waitSignal(dialog._progress.progressed, timeout=TASK_MS) as progressed,
        qtbot.waitSignal(dialog.install_finished, timeout=TASK_MS) as finished,
    ):
        dialog.url_button.click()
    assert progressed.args[1] == cpu_package.stat().st_size
    assert finished.args == ["Installed the cpu backend; the engine now runs it."]
    assert server.requests == [f"HEAD /{cpu_package.name}", f"GET /{cpu_package.name}"]
    store = BackendStore(chat_app.settings.folder)
    assert store.chosen_name() == "cpu"
    assert sorted(p.name for p in store.folder.iterdir()) == [".verified.json", "cpu"]


def test_a_download_can_be_cancelled_and_a_plain_http_address_is_refused(
    qtbot, chat_app, cpu_package, tmp_path, server
):
    dialog = open_dialog(qtbot, chat_app, tmp_path)
    with qtbot.waitSignal(dialog.install_finished, timeout=HANG_GUARD_MS) as finished:
        dialog.install_from_url("http://example.com/kvstudio-backend-cpu.tar.gz")
    assert finished.args == [
        "http://example.com/kvstudio-backend-cpu.tar.gz is not an https:// address; backend "
        "packages are downloaded over https only (or plain http from this machine). "
        "The engine keeps the built-in backend."
    ]
    assert server.requests == []

    server.stall = threading.Event()
    url = f"http://127.0.0.1:{server.server_address[1]}/{cpu_package.name}"
    with qtbot.waitSignal(
        dialog._progress.progressed,
        timeout=TASK_MS,
        check_params_cb=lambda done, total: 0 < done < total,
    ):
        dialog.install_from_url(url)
    assert dialog.cancel_button.isVisible() and dialog.progress.isVisible()
    with qtbot.waitSignal(dialog.install_finished, timeout=HANG_GUARD_MS) as finished:
        dialog.cancel_button.click()
    assert finished.args == [
        "The download was cancelled; nothing changed. The engine keeps the built-in backend."
    ]
    store = BackendStore(chat_app.settings.folder)
    assert [b.name for b in store.installed()] == [BUILT_IN]
    assert list(store.folder.iterdir()) == []  # the partial download is gone
