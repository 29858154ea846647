"""System programs started from the frozen app get the user's library path, not the app's."""

from __future__ import annotations

import sys

import pytest

from app.backends.system_programs import system_env


def test_outside_a_frozen_app_the_environment_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/mine")
    assert system_env()["LD_LIBRARY_PATH"] == "/opt/mine"


def test_in_a_frozen_app_the_users_own_library_path_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/kvstudio/_internal:/opt/mine")
    monkeypatch.setenv("LD_LIBRARY_PATH_ORIG", "/opt/mine")
    env = system_env()
    assert env["LD_LIBRARY_PATH"] == "/opt/mine" and "LD_LIBRARY_PATH_ORIG" not in env
    monkeypatch.delenv("LD_LIBRARY_PATH_ORIG")
    assert "LD_LIBRARY_PATH" not in system_env()  # the user had none
