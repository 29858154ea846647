"""The Windows installer script, compiled by makensis against a stand-in for the frozen app."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from tests.packaging.packaging_scripts import load

windows_installer = load("windows_installer")
SCRIPT: Path = windows_installer.SCRIPT
# Random bytes do not compress: an installer smaller than this lacks the stand-in's library.
PAYLOAD_BYTES = 256 * 1024


@pytest.fixture
def stand_in_app(tmp_path: Path) -> Path:
    """A folder shaped like PyInstaller's one-folder output: kvstudio.exe and a subfolder."""
    app = tmp_path / "kvstudio"
    (app / "_internal").mkdir(parents=True)
    (app / "kvstudio.exe").write_bytes(b"MZ stand-in")
    (app / "_internal" / "libllama.dll").write_bytes(os.urandom(PAYLOAD_BYTES))
    return app


def pe_machine(data: bytes) -> int:
    """The machine field of a PE file's COFF header."""
    assert data[:2] == b"MZ", "not a Windows executable"
    pe_offset = struct.unpack_from("<I", data, 0x3C)[0]
    assert data[pe_offset : pe_offset + 4] == b"PE\0\0", "MZ header without a PE header"
    return int(struct.unpack_from("<H", data, pe_offset + 4)[0])


def test_makensis_compiles_a_64_bit_installer_holding_the_app(
    stand_in_app: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist" / "KVStudio-0.1.0-windows-x64.exe"
    built = windows_installer.build_installer(stand_in_app, "0.1.0", out)
    assert built == out
    data = out.read_bytes()
    assert pe_machine(data) == 0x8664, "the installer should be x86-64, as the app is"
    assert PAYLOAD_BYTES < len(data) < PAYLOAD_BYTES + 2 * 1024 * 1024


def test_a_makensis_warning_fails_the_build(stand_in_app: Path, tmp_path: Path) -> None:
    """-WX is on: the script above compiled without a single warning."""
    warned = tmp_path / "kvstudio.nsi"
    source = SCRIPT.read_text(encoding="utf-8").replace("${__FILEDIR__}", str(SCRIPT.parent))
    warned.write_text(source + "\nVar NeverUsed\n", encoding="utf-8")
    with pytest.raises(windows_installer.InstallerBuildError, match="NeverUsed"):
        windows_installer.build_installer(stand_in_app, "0.1.0", tmp_path / "x.exe", warned)


def test_a_folder_without_the_app_gets_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(windows_installer.InstallerBuildError, match="holds no kvstudio.exe"):
        windows_installer.build_installer(tmp_path, "0.1.0", tmp_path / "setup.exe")


def test_missing_makensis_names_the_package(
    stand_in_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(windows_installer.InstallerBuildError, match="the nsis package"):
        windows_installer.build_installer(stand_in_app, "0.1.0", tmp_path / "setup.exe")


@pytest.mark.parametrize(
    ("version", "quad"), [("0.1.0", "0.1.0.0"), ("1.2rc1", "1.2.0.0"), ("2.0.1.5", "2.0.1.5")]
)
def test_windows_file_version_comes_from_the_project_version(version: str, quad: str) -> None:
    assert windows_installer.version_quad(version) == quad


def uninstall_section() -> str:
    source = SCRIPT.read_text(encoding="utf-8")
    match = re.search(r'^Section "Uninstall"\n(.*?)^SectionEnd', source, re.S | re.M)
    assert match, 'kvstudio.nsi has no Section "Uninstall"'
    return match.group(1)


def test_uninstall_removes_only_what_the_installer_made() -> None:
    """Conversations, settings and backends (%APPDATA%) and models survive an uninstall."""
    removals = sorted(
        line.strip()
        for line in uninstall_section().splitlines()
        if line.strip().startswith(("Delete", "RMDir"))
    )
    assert removals == [
        'Delete "${SHORTCUT}"',
        'DeleteRegKey HKCU "${UNINSTALL_KEY}"',
        'RMDir /r "$INSTDIR"',
    ]
    assert "$APPDATA" not in SCRIPT.read_text(encoding="utf-8")


def test_the_install_is_per_user() -> None:
    source = SCRIPT.read_text(encoding="utf-8")
    assert "RequestExecutionLevel user" in source
    assert 'InstallDir "$LOCALAPPDATA\\Programs\\${NAME}"' in source
    assert "HKLM" not in source, "a per-user install cannot write HKLM"
