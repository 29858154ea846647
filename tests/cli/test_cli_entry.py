"""The `kvstudio` entry point itself: what it does when the install is incomplete, and that it
imports only the module of the command that runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_command_missing_from_the_install_is_said_not_silently_dropped(monkeypatch, capsys):
    import app.cli

    monkeypatch.setitem(app.cli.COMMANDS, "not_packaged", "a command this install lacks")
    assert app.cli.main(["not_packaged"]) == 1
    assert capsys.readouterr().err == (
        "kvstudio: the 'not_packaged' command is missing from this install "
        "(app/commands/not_packaged.py is not there); reinstall KV Studio to get it back.\n"
    )


def test_only_the_command_that_runs_is_imported(tmp_path: Path) -> None:
    """`kvstudio ls` imports app.commands.ls and no other command (each imports what it needs
    at its top), and --help lists every command without importing any."""
    code = (
        "import sys, contextlib, io, app.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        app.cli.main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('app.commands.')))\n"
        "print(all(name in out.getvalue() for name in app.cli.COMMANDS))\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    app.cli.main(['ls', '--json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('app.commands.')))\n"
    )
    env = {**os.environ, "KVSTUDIO_DATA_DIR": str(tmp_path), "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    after_help, listed, after_ls = result.stdout.splitlines()
    assert after_help == "[]"
    assert listed == "True"
    assert after_ls == "['app.commands.ls']"
