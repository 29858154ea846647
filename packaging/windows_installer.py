"""Builds KV Studio's Windows installer: makensis compiles packaging/windows/kvstudio.nsi around
the PyInstaller one-folder app. makensis runs on Windows and on Linux (Debian's nsis package), so
the script is compiled here against a stand-in folder too (tests/packaging)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "windows" / "kvstudio.nsi"
APP_EXE = "kvstudio.exe"


class InstallerBuildError(RuntimeError):
    """The installer could not be built; str(error) says why in one sentence."""


def find_makensis() -> str:
    found = shutil.which("makensis")
    if found:
        return found
    if sys.platform == "win32":
        # NSIS's own installer (and choco's) does not put itself on PATH.
        for base in (os.environ.get("ProgramFiles(x86)"), os.environ.get("ProgramFiles")):
            candidate = Path(base or "C:/missing") / "NSIS" / "makensis.exe"
            if candidate.is_file():
                return str(candidate)
    raise InstallerBuildError(
        "makensis was not found: install NSIS (Debian/Ubuntu: the nsis package, which "
        "scripts/system-deps.sh installs; Windows: choco install nsis)."
    )


def version_quad(version: str) -> str:
    """Windows' four-number file version: 0.1.0 -> 0.1.0.0, 1.2rc1 -> 1.2.0.0."""
    numbers = re.match(r"\d+(?:\.\d+){0,3}", version)
    if numbers is None:
        raise InstallerBuildError(f"The version {version!r} does not start with a number.")
    parts = numbers.group(0).split(".")
    return ".".join(parts + ["0"] * (4 - len(parts)))


def build_installer(app_dir: Path, version: str, out_file: Path, script: Path = SCRIPT) -> Path:
    """Compiles the installer into out_file (its folder is created) and returns its path.

    Warnings count as errors (-WX): each one NSIS gives has meant a real defect in the installer.
    """
    if not (app_dir / APP_EXE).is_file():
        raise InstallerBuildError(
            f"{app_dir} holds no {APP_EXE}: build the app first "
            "(python packaging/build.py --platform windows)."
        )
    makensis = find_makensis()
    out_file.parent.mkdir(parents=True, exist_ok=True)
    command = [
        makensis,
        "-WX",
        "-V2",  # warnings and errors only
        f"-DAPP_DIR={app_dir.resolve()}",
        f"-DVERSION={version}",
        f"-DVERSION_QUAD={version_quad(version)}",
        f"-DOUT_FILE={out_file.resolve()}",
        str(script),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not out_file.is_file():
        output = (result.stdout + result.stderr).strip().splitlines()
        raise InstallerBuildError(
            f"makensis could not build {out_file.name}: " + " | ".join(output[-12:])
        )
    return out_file
