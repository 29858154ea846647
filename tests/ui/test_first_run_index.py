"""The first-run dialog and the published index, offscreen on the real app: on a fake RX 7900 XTX
sysfs tree (tests/gpu_sysfs.py) it reads nothing until asked, then offers the rocm-rdna3 package
from a local index (published with scripts/release.py, served on 127.0.0.1) and installs it
through the release's path: downloaded, sha256 and signature checked, unpacked, test-loaded. The
package (tests/backends/fake_rocm.py) needs ROCm's libamdhip64.so.6, which this machine lacks:
the dialog says so in one sentence and the built-in backend stays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backends.index_install import INDEX_ENV
from app.backends.signing import DEV_KEYS_ENV
from app.backends.store import BUILT_IN
from tests.backends.fake_rocm import rocm_rdna3_package
from tests.backends.publish import publish
from tests.backends.release_server import ReleaseServer
from tests.docs_output import save_screenshot
from tests.ui.test_first_run import TASK_MS, rx_7900_xtx
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rocm_release(cpu_package, tmp_path_factory) -> Iterator[tuple[ReleaseServer, Path]]:
    work = tmp_path_factory.mktemp("rocm-release")
    archive = rocm_rdna3_package(cpu_package, work / "built")
    assets = work / "assets"
    with ReleaseServer(assets) as server:
        keys = publish([archive], assets, server.url, "0.2.0")
        yield server, keys


def test_first_run_offers_the_rocm_package_from_the_index_and_says_why_it_does_not_load(
    qtbot, store, tmp_path, rocm_release, monkeypatch, docs_folder
):
    from app.ui.first_run import FirstRunDialog

    server, keys = rocm_release
    monkeypatch.setenv(DEV_KEYS_ENV, str(keys))
    monkeypatch.setenv(INDEX_ENV, f"{server.url}/backends.json")
    dialog = FirstRunDialog(store, rx_7900_xtx(tmp_path))
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.detection_finished, timeout=HANG_GUARD_MS):
        dialog.show()
    offer = dialog.offer
    assert offer.isVisible() and offer.look_button.text() == "Look for packages online"
    assert server.log == []  # nothing is read before the user asks

    with qtbot.waitSignal(offer.index_shown, timeout=HANG_GUARD_MS):
        offer.look_button.click()
    assert offer.sentence.text().startswith("The index offers rocm-rdna3 0.2.0 (")
    assert offer.sentence.text().endswith(" MiB) for your Radeon RX 7900 XTX.")
    assert offer.install_button.isVisible()
    assert offer.install_button.text() == "Install rocm-rdna3 0.2.0"
    save_screenshot(dialog, docs_folder, "first-run-index.png")

    with qtbot.waitSignal(dialog.install_finished, timeout=TASK_MS) as finished:
        offer.install_button.click()
    assert finished.args == [
        "The rocm-rdna3 backend does not load: libggml-hip.so needs libamdhip64.so.6, which "
        "this system lacks. The engine keeps the built-in backend."
    ]
    assert offer.sentence.text() == finished.args[0]
    archive = "kvstudio-backend-rocm-rdna3-0.3.36-linux-x86_64.tar.gz"
    assert server.gets("backends.json") == [""] and server.gets(archive) == [""]
    assert [b.name for b in store.installed()] == [BUILT_IN]
    assert store.chosen_name() == BUILT_IN
    assert list(store.folder.iterdir()) == []  # the download and the staging folder are gone
