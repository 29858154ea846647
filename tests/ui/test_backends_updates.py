"""The Backends page, offscreen, with the real CPU package: it says when the index (published
with scripts/release.py, served on 127.0.0.1) has a newer version of an installed package and
offers it, never installing it on its own; and Add asks before it installs an unsigned package
(the GUI's --allow-unsigned)."""

from __future__ import annotations

import pytest

from app.backends.index_install import INDEX_ENV
from app.backends.manifest import read_manifest
from app.backends.signing import DEV_KEYS_ENV
from app.engine.backend_probe import probe
from tests.backends.publish import publish
from tests.backends.release_server import ReleaseServer
from tests.docs_output import save_screenshot
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

TASK_MS = 180_000


def backends_page(qtbot, store):  # type: ignore[no-untyped-def]
    from app.ui.backends_page import BackendsPage

    page = BackendsPage(store)
    page.offer.detect = lambda: []  # this machine's GPUs are not the point here
    qtbot.addWidget(page)
    page.resize(1000, 700)
    page.show()
    return page


def test_a_newer_package_is_offered_and_installed_only_when_asked(
    qtbot, store, unsigned_cpu_package, tmp_path, monkeypatch, docs_folder
):
    old_assets, new_assets = tmp_path / "0.2.0", tmp_path / "0.3.0"
    with ReleaseServer(new_assets) as server:
        old_keys = publish([unsigned_cpu_package], old_assets, server.url, "0.2.0")
        new_keys = publish([unsigned_cpu_package], new_assets, server.url, "0.3.0")
        keys = tmp_path / "keys.txt"
        keys.write_text(old_keys.read_text() + new_keys.read_text())
        monkeypatch.setenv(DEV_KEYS_ENV, str(keys))
        monkeypatch.setenv(INDEX_ENV, f"{server.url}/backends.json")
        store.add(old_assets / unsigned_cpu_package.name, probe)
        store.use("cpu", probe)
        page = backends_page(qtbot, store)
        assert server.log == []

        with qtbot.waitSignal(page.offer.index_shown, timeout=HANG_GUARD_MS):
            page.offer.look_button.click()
        assert page.offer.sentence.text() == (
            "A newer cpu package is available: 0.3.0 (installed: 0.2.0)."
        )
        assert page.offer.update_button.isVisible()
        assert page.offer.update_button.text() == "Update cpu to 0.3.0"
        assert not page.offer.install_button.isVisible()
        assert server.gets(unsigned_cpu_package.name) == []  # never on its own
        assert read_manifest(store.folder / "cpu").version == "0.2.0"
        save_screenshot(page, docs_folder, "backends-update.png")

        with (
            qtbot.waitSignal(page.backend_switched, timeout=TASK_MS) as switched,
            qtbot.waitSignal(page.task_finished, timeout=TASK_MS) as finished,
        ):
            page.offer.update_button.click()
        assert finished.args == ["Installed the cpu backend; the engine now runs it."]
        assert switched.args == ["cpu"]
        assert read_manifest(store.folder / "cpu").version == "0.3.0"
        assert page.in_use.text() == "The engine runs the cpu backend."
        page.table.selectRow(1)
        assert "Version: 0.3.0; signed" in page.details.toPlainText()

        with qtbot.waitSignal(page.offer.index_shown, timeout=HANG_GUARD_MS):
            page.offer.look_button.click()
        assert page.offer.sentence.text() == (
            "The installed packages (cpu) are the newest the index has."
        )
        assert not page.offer.update_button.isVisible()


@pytest.mark.parametrize("answer", ["No", "Yes"])
def test_adding_an_unsigned_package_asks_first(
    qtbot, store, unsigned_cpu_package, monkeypatch, answer
):
    from app.ui import package_offer

    asked: list[str] = []

    def warning(_parent, _title, text, *_args):  # type: ignore[no-untyped-def]
        asked.append(text)
        return getattr(package_offer.QMessageBox.StandardButton, answer)

    monkeypatch.setattr(package_offer.QMessageBox, "warning", warning)
    page = backends_page(qtbot, store)
    with qtbot.waitSignal(page.task_finished, timeout=TASK_MS) as finished:
        page.add(unsigned_cpu_package)
    assert len(asked) == 1 and "Install it only if you built it yourself." in asked[0]
    if answer == "No":
        assert "is not signed, so it was not installed" in finished.args[0]
        assert [b.name for b in store.installed()] == ["built-in"]
    else:
        assert finished.args == [
            "Added the cpu backend. Select it and press Use to run the engine on it."
        ]
        page.table.selectRow(1)
        assert "not signed" in page.details.toPlainText()
