"""The `kvstudio` entry point itself: what it does when the install is incomplete."""

from __future__ import annotations


def test_a_command_missing_from_the_install_is_said_not_silently_dropped(monkeypatch, capsys):
    import app.cli

    monkeypatch.setattr(app.cli, "COMMAND_MODULES", ("ls", "not_packaged"))
    modules = app.cli._command_modules()
    assert list(modules) == ["ls"]
    assert capsys.readouterr().err == (
        "kvstudio: warning: the 'not_packaged' command is missing from this install "
        "(app/commands/not_packaged.py is not there); reinstall KV Studio to get it back.\n"
    )
