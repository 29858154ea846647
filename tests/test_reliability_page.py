"""docs/reliability.md is the rendering of docs/reliability.json (both written by the test run)."""

from __future__ import annotations

import json

import pytest

from tests.reliability_record import PAGE, RECORD, render_page


def test_the_page_is_the_recorded_facts() -> None:
    if not RECORD.exists():
        pytest.fail("docs/reliability.json is missing: run the test suite once and commit it")
    assert PAGE.read_text() == render_page(json.loads(RECORD.read_text()))
