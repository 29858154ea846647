"""The build scripts in packaging/, imported by their path for the tests.

packaging/ is a folder of scripts, not a package: as one it would shadow PyPI's `packaging`, which
pip and pytest import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"


def load(name: str) -> ModuleType:
    """packaging/<name>.py as a module (loaded once per test session)."""
    key = f"kvstudio_packaging_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, PACKAGING / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"packaging/{name}.py is missing"
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module
