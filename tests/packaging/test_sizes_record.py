"""docs/install.md's size table says what the recorded build measured, and that build is under the
budget (CI's packaging stage checks the budget again on the app it builds each run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"
sys.path.insert(0, str(PACKAGING))

import sizes  # noqa: E402


def test_the_size_table_is_the_recorded_one() -> None:
    record = json.loads(sizes.RECORD.read_text())
    page = sizes.PAGE.read_text()
    assert sizes.render_page(page, sizes.render_table(record)) == page, (
        "docs/install.md's size table differs from docs/packaging-sizes.json: "
        "run python packaging/sizes.py --record dist/sizes.json"
    )


def test_the_recorded_linux_app_is_under_budget() -> None:
    artifacts = json.loads(sizes.RECORD.read_text())["artifacts"]
    for name in ("kvstudio", "KVStudio.AppDir"):
        assert artifacts[name]["unpacked_bytes"] < sizes.BUDGET_MIB * sizes.MIB
    deb = next(v for k, v in artifacts.items() if k.endswith(".deb"))
    assert deb["bytes"] < artifacts["kvstudio"]["unpacked_bytes"] / 2  # zstd did compress it
