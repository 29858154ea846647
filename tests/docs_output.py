"""Where the test run writes screenshots and generated pages: a temporary folder of the run,
never the checkout (tests/clean_tree.py fails a run that changes it). `scripts/refresh_docs.py`
runs the tests with KVSTUDIO_REFRESH_DOCS=1 to write them into docs/ on purpose.

    def test_settings_page(docs_folder, ...):
        save_screenshot(window, docs_folder, "settings.png")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.clean_tree import ROOT, refreshing_docs

if TYPE_CHECKING:  # Qt is not imported by the plugin itself: only tests that draw load it
    from PySide6.QtWidgets import QWidget


def docs_folder_for(config: pytest.Config) -> Path:
    """docs/ when refreshing, else `docs/` under the run's base temporary folder."""
    if refreshing_docs():
        return ROOT / "docs"
    folder: Path = config._tmp_path_factory.getbasetemp() / "docs"  # type: ignore[attr-defined]
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def docs_folder(request: pytest.FixtureRequest) -> Path:
    return docs_folder_for(request.config)


def save_screenshot(widget: QWidget, docs: Path, name: str) -> Path:
    """`widget` as docs/screenshots/`name` (under `docs`); fails on an empty picture."""
    target = docs / "screenshots" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(target)), target
    assert target.stat().st_size > 1000, f"{target} is nearly empty"
    return target


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that write into the docs folder, for `scripts/refresh_docs.py` (-m docs)."""
    for item in items:
        if "docs_folder" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docs)
