"""The Linux artifacts around the one-folder app: a .tar.gz, a .deb and an AppImage AppDir.

All three carry the same folder. The .deb puts it in /opt/kvstudio with `kvstudio` on PATH, the
desktop entry, the icons and the AppStream file in their system places; user data stays in the
user's own folders (app/platform/paths.py), so removing or upgrading the package never touches it.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

from linux_deps import debian_depends, host_glibc
from sizes import folder_bytes

ROOT = Path(__file__).resolve().parent.parent
LINUX = ROOT / "packaging" / "linux"
ICONS = ROOT / "assets" / "icons"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
DESKTOP = "kvstudio.desktop"
MENU_SCRIPT = "install-menu-entry.sh"
METAINFO = "io.github.kvstudio.KVStudio.metainfo.xml"
SUMMARY = "Run GGUF language models locally with an int8-K KV cache"
DESCRIPTION = (
    " KV Studio downloads GGUF models and runs them through llama.cpp, with the K cache\n"
    " stored as 8-bit values (about half the memory of fp16), and shows, measured, what\n"
    " that saves and what it costs. This package holds the app with its CPU backend;\n"
    " GPU backends are separate packages installed from within the app."
)


def base_name(version: str) -> str:
    return f"kvstudio-{version}-linux-x86_64"


def make_tarball(app: Path, version: str, out: Path) -> Path:
    """kvstudio-VERSION-linux-x86_64.tar.gz: the app folder, plus the desktop entry and icon."""
    target = out / f"{base_name(version)}.tar.gz"
    top = base_name(version)
    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.add(app, arcname=top)
        tar.add(LINUX / DESKTOP, arcname=f"{top}/share/{DESKTOP}")
        tar.add(ICONS / "kvstudio-256.png", arcname=f"{top}/share/kvstudio.png")
        # The entry above names `kvstudio` on PATH, which an unpacked folder is not: this
        # writes the user's own copy pointing at the folder (docs/install.md).
        tar.add(LINUX / MENU_SCRIPT, arcname=f"{top}/share/{MENU_SCRIPT}")
    return target


def _install_shared_files(root: Path) -> None:
    """Desktop entry, icons (every size, and the SVG as scalable) and AppStream metadata."""
    share = root / "usr" / "share"
    (share / "applications").mkdir(parents=True, exist_ok=True)
    shutil.copy2(LINUX / DESKTOP, share / "applications" / DESKTOP)
    (share / "metainfo").mkdir(parents=True, exist_ok=True)
    shutil.copy2(LINUX / METAINFO, share / "metainfo" / METAINFO)
    hicolor = share / "icons" / "hicolor"
    for size in ICON_SIZES:
        folder = hicolor / f"{size}x{size}" / "apps"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ICONS / f"kvstudio-{size}.png", folder / "kvstudio.png")
    (hicolor / "scalable" / "apps").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "assets" / "icon.svg", hicolor / "scalable" / "apps" / "kvstudio.svg")


def deb_control(version: str, depends: list[str], installed_kib: int) -> str:
    return (
        "Package: kvstudio\n"
        f"Version: {version}\n"
        "Architecture: amd64\n"
        "Maintainer: KV Studio developers <kvstudio@users.noreply.github.com>\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {', '.join(depends)}\n"
        "Section: science\n"
        "Priority: optional\n"
        f"Description: {SUMMARY}\n{DESCRIPTION}\n"
    )


def make_deb(app: Path, version: str, out: Path, work: Path) -> Path:
    """kvstudio_VERSION_amd64.deb, compressed with zstd (xz took minutes on this much data)."""
    root = work / "deb-root"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(app, root / "opt" / "kvstudio", symlinks=True)
    (root / "usr" / "bin").mkdir(parents=True)
    # The launcher finds its folder through /proc/self/exe, so a symlink on PATH is enough.
    (root / "usr" / "bin" / "kvstudio").symlink_to("../../opt/kvstudio/kvstudio")
    _install_shared_files(root)
    doc = root / "usr" / "share" / "doc" / "kvstudio"
    doc.mkdir(parents=True)
    shutil.copy2(ROOT / "LICENSE", doc / "copyright")
    (root / "DEBIAN").mkdir()
    depends = debian_depends(app, host_glibc())
    (root / "DEBIAN" / "control").write_text(
        deb_control(version, depends, folder_bytes(root) // 1024 + 1)
    )
    (root / "DEBIAN" / "postrm").write_text(POSTRM)
    (root / "DEBIAN" / "postrm").chmod(0o755)
    target = out / f"kvstudio_{version}_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zzstd", "-z6", "--build", str(root), str(target)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(root)
    return target


# What `apt remove` prints: the user's data is not in the package, so it stays (and where).
POSTRM = """#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  echo "KV Studio is removed. Your conversations, settings and backends stay in" \\
    "~/.local/share/KVStudio/KV Studio, and downloaded models in ~/.cache/huggingface/hub" \\
    "and any model folders you added; delete those folders to free their space."
fi
"""


APPRUN = """#!/bin/sh
# AppImage entry: run the app inside this AppDir (the AppImage runtime sets APPDIR; a plain
# AppDir is run through this file's own path).
HERE="${APPDIR:-$(dirname "$(readlink -f "$0")")}"
exec "$HERE/usr/lib/kvstudio/kvstudio" "$@"
"""


def make_appdir(app: Path, out: Path) -> Path:
    """KVStudio.AppDir: what appimagetool wraps into one .AppImage
    (.github/workflows/appimage.yml)."""
    appdir = out / "KVStudio.AppDir"
    shutil.rmtree(appdir, ignore_errors=True)
    shutil.copytree(app, appdir / "usr" / "lib" / "kvstudio", symlinks=True)
    _install_shared_files(appdir)
    (appdir / "AppRun").write_text(APPRUN)
    (appdir / "AppRun").chmod(0o755)
    shutil.copy2(LINUX / DESKTOP, appdir / DESKTOP)
    shutil.copy2(ICONS / "kvstudio-256.png", appdir / "kvstudio.png")
    (appdir / ".DirIcon").symlink_to("kvstudio.png")
    return appdir
