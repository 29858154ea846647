"""The Linux desktop entry and AppStream file: valid for the desktops' own validators, and naming
the command, icon and version the packages actually ship."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINUX = ROOT / "packaging" / "linux"
DESKTOP = LINUX / "kvstudio.desktop"
METAINFO = LINUX / "io.github.kvstudio.KVStudio.metainfo.xml"


def tool(command: str, package: str) -> str:
    """The tool's path; a missing one fails the test (CI installs it through system-deps.sh)."""
    path = shutil.which(command)
    if path is None:
        pytest.fail(
            f"{command} is missing: install the Debian package {package} "
            "(scripts/system-deps.sh installs it)."
        )
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DESKTOP, encoding="utf-8")
    return parser["Desktop Entry"]


def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def test_desktop_file_validate_accepts_the_entry() -> None:
    result = run(tool("desktop-file-validate", "desktop-file-utils"), str(DESKTOP))
    assert result.returncode == 0, result.stdout + result.stderr
    # Hints (such as two main categories, which list the app twice in menus) count too.
    assert result.stdout.strip() == "", result.stdout


def test_desktop_file_validate_refuses_a_broken_entry(tmp_path: Path) -> None:
    """The check above can fail: a category the menu specification does not know is refused."""
    broken = tmp_path / "kvstudio.desktop"
    text = DESKTOP.read_text(encoding="utf-8")
    assert "Categories=" in text
    broken.write_text(text.replace("Categories=", "Categories=LanguageModels;"), encoding="utf-8")
    result = run(tool("desktop-file-validate", "desktop-file-utils"), str(broken))
    assert result.returncode != 0


def test_the_entry_starts_the_installed_command_with_the_shipped_icon() -> None:
    entry = desktop_entry()
    project = pyproject()["project"]
    assert isinstance(project, dict)
    command, *arguments = entry["Exec"].split()
    assert command in project["scripts"], "Exec names a command the package does not install"
    assert arguments == ["gui"]
    assert entry["Terminal"] == "false"
    # The packages install assets/icons/kvstudio-<size>.png as hicolor/.../apps/kvstudio.png.
    assert entry["Icon"] == "kvstudio"
    assert (ROOT / "assets" / "icons" / "kvstudio-48.png").is_file()


def test_appstreamcli_accepts_the_metainfo() -> None:
    result = run(tool("appstreamcli", "appstream"), "validate", "--no-net", str(METAINFO))
    assert result.returncode == 0, result.stdout + result.stderr


def test_appstreamcli_refuses_a_metainfo_without_a_summary(tmp_path: Path) -> None:
    broken = tmp_path / METAINFO.name
    text = METAINFO.read_text(encoding="utf-8")
    start, end = text.index("<summary>"), text.index("</summary>") + len("</summary>")
    broken.write_text(text[:start] + text[end:], encoding="utf-8")
    result = run(tool("appstreamcli", "appstream"), "validate", "--no-net", str(broken))
    assert result.returncode != 0


def test_the_metainfo_launches_this_entry_and_names_this_version() -> None:
    component = ET.parse(METAINFO).getroot()
    assert component.findtext("launchable") == DESKTOP.name
    assert component.findtext("icon") == desktop_entry()["Icon"]
    newest = component.find("releases/release")
    assert newest is not None
    project = pyproject()["project"]
    assert isinstance(project, dict)
    assert newest.get("version") == project["version"], (
        "the newest <release> in the metainfo is not pyproject.toml's version"
    )
