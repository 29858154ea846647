"""What the import-linter contracts in pyproject.toml (run by ./quickstart.sh test: layers, no
circles, no Qt below the services, kernels/ never imported by the app) cannot say by themselves:
that every part of the app is in a layer; that the CLI's commands import Qt only inside
functions (the lazy --plot path), so a command starts without it; that every module in app/ui
imports Qt (logic that runs without Qt lives below); and that importing the CLI and the engine
pulls in no Qt at all, transitively.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QT = ("PySide6", "pyqtgraph", "shiboken6")


def _imports(path: Path, top_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_every_part_of_the_app_is_in_a_layer() -> None:
    """The layers contract names every package and top module of app/, so a new one cannot sit
    outside the rule unnoticed (import-linter ignores modules no layer names)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    named = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    parts = {
        f"app.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "app").iterdir()
        if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
        or (path / "__init__.py").is_file()
    }
    assert parts - named == set(), "not in any layer of pyproject.toml's layers contract"
    assert named - parts == set(), "named in the layers contract but not in app/"


def test_cli_commands_import_qt_only_lazily() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name} at module level"
        for path in _files("app/commands") + [ROOT / "app/cli.py"]
        for name in _imports(path, top_level_only=True)
        if name.split(".")[0] in QT or name.startswith(("app.ui", "app.services", "app.gui"))
    ]
    assert not offenders, "\n".join(offenders)


def test_every_ui_module_is_qt() -> None:
    """A module in app/ui that imports no Qt holds logic that belongs in a package below
    (or a service): it would run, and be tested, without the widgets."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in _files("app/ui")
        if path.name != "__init__.py" and not any(n.split(".")[0] in QT for n in _imports(path))
    ]
    assert not offenders, "no Qt import in: " + ", ".join(offenders)


def test_cli_and_engine_load_without_qt() -> None:
    """Transitively too: importing every command and the engine worker pulls in no Qt."""
    import subprocess
    import sys

    code = (
        "import sys, app.cli, app.engine.worker, app.engine.compare;"
        "[app.cli.command_module(name) for name in app.cli.COMMANDS];"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {QT!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
