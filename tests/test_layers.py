"""The layering rule of docs/architecture.md, checked on the source: imports only point down.

app/core, app/engine and app/server never import Qt (so the CLI, the engine process and the GPU
bench run without PySide6); app/core never imports app/engine, app/services or app/ui;
app/services never imports app/ui; the CLI's command modules never import app/ui, and Qt only
inside functions (the lazy --plot path); every module in app/ui imports Qt (logic that runs
without Qt lives below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("app/core", QT + ("app.engine", "app.services", "app.ui", "app.commands")),
        ("app/engine", QT + ("app.services", "app.ui", "app.commands")),
        ("app/services", ("app.ui",)),
        ("app/server", QT + ("app.services", "app.ui", "app.commands")),
        ("kernels", QT + ("app.services", "app.ui")),
    ],
)
def test_imports_only_point_down(package: str, forbidden: tuple[str, ...]) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files(package)
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]
    assert not offenders, "\n".join(offenders)


def test_cli_commands_import_qt_only_lazily() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name} at module level"
        for path in _files("app/commands") + [ROOT / "app/cli.py"]
        for name in _imports(path, top_level_only=True)
        if name.split(".")[0] in QT or name.startswith(("app.ui", "app.services", "app.gui"))
    ]
    assert not offenders, "\n".join(offenders)


def test_commands_never_import_the_ui() -> None:
    """Not even lazily: what a command needs from Qt (bench --plot) lives in app/services."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files("app/commands") + [ROOT / "app/cli.py"]
        for name in _imports(path)
        if name == "app.ui" or name.startswith("app.ui.")
    ]
    assert not offenders, "\n".join(offenders)


def test_every_ui_module_is_qt() -> None:
    """A module in app/ui that imports no Qt holds logic that belongs in app/core (or a
    service): it would run, and be tested, without the widgets."""
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
        "app.cli._command_modules();"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {QT!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
