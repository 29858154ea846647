"""The .tar.gz's menu entry works as docs/install.md says to add it: unpacked into a folder
whose path has a space, `share/install-menu-entry.sh` writes the user's own desktop entry, which
desktop-file-validate accepts, whose Exec starts this folder's app (run here as a launcher would,
quotes and all) and whose Icon is a file that is there; `--remove` takes it away and says where
the models and conversations stay. The .deb's `apt remove` and the Windows uninstaller say so too.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"
sys.path.insert(0, str(PACKAGING))  # the scripts import each other by name

import linux_artifacts  # noqa: E402

STAYS = "Your conversations, settings and backends stay in"


def unpacked(tmp_path: Path) -> Path:
    """The .tar.gz made from a stand-in app (a script that records its arguments), unpacked
    under a folder with a space in its name."""
    app = tmp_path / "build" / "kvstudio"
    (app / "_internal").mkdir(parents=True)
    (app / "kvstudio").write_text('#!/bin/sh\necho "ran with: $*" > "$(dirname "$0")/ran.txt"\n')
    (app / "kvstudio").chmod(0o755)
    (tmp_path / "out").mkdir()
    archive = linux_artifacts.make_tarball(app, "1.2.3", tmp_path / "out")
    place = tmp_path / "My Apps"
    with tarfile.open(archive) as tar:
        tar.extractall(place, filter="data")
    return place / linux_artifacts.base_name("1.2.3")


def desktop_values(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_the_menu_entry_starts_the_unpacked_app_with_its_icon(tmp_path: Path) -> None:
    folder = unpacked(tmp_path)
    script = folder / "share" / "install-menu-entry.sh"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": ""}
    done = subprocess.run([str(script)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    entry = tmp_path / "home" / ".local" / "share" / "applications" / "kvstudio.desktop"
    assert str(entry) in done.stdout
    values = desktop_values(entry)
    assert Path(values["Icon"]).is_file()
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True)
        assert check.returncode == 0, check.stdout
    # A launcher splits Exec as a shell would (the spec's quoting is a subset) and runs it.
    command = shlex.split(values["Exec"].replace("%%", "%"))
    assert command[0] == str(folder / "kvstudio")
    subprocess.run(command, check=True, env=env, timeout=30)
    assert (folder / "ran.txt").read_text() == "ran with: gui\n"

    removed = subprocess.run([str(script), "--remove"], capture_output=True, text=True, env=env)
    assert removed.returncode == 0 and not entry.exists()
    assert "models and conversations stay" in removed.stdout


def test_the_deb_says_where_the_data_stays_when_removed(tmp_path: Path) -> None:
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed")
    app = tmp_path / "kvstudio"
    (app / "_internal").mkdir(parents=True)
    shutil.copy2("/usr/bin/env", app / "kvstudio")
    (tmp_path / "out").mkdir()
    deb = linux_artifacts.make_deb(app, "1.2.3", tmp_path / "out", tmp_path / "work")
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "--control", str(deb), str(control)], check=True)
    postrm = control / "postrm"
    said = subprocess.run([str(postrm), "remove"], capture_output=True, text=True, check=True)
    assert STAYS in said.stdout and "~/.local/share/KVStudio/KV Studio" in said.stdout
    upgrade = subprocess.run([str(postrm), "upgrade"], capture_output=True, text=True, check=True)
    assert upgrade.stdout == ""  # an upgrade is not a removal


def test_the_windows_uninstaller_says_where_the_data_stays() -> None:
    script = (PACKAGING / "windows" / "kvstudio.nsi").read_text(encoding="utf-8")
    uninstall = script[script.index('Section "Uninstall"') :]
    uninstall = uninstall[: uninstall.index("SectionEnd")]
    assert STAYS in uninstall and "%APPDATA%\\KVStudio\\KV Studio" in uninstall
    assert "/SD IDOK" in uninstall  # a silent uninstall does not wait for a click
