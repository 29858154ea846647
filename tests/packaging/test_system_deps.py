"""scripts/system-deps.sh installs every system library Qt's xcb platform plugin links: the
libraries named in the DT_NEEDED entries of the installed PySide6's plugins/platforms/libqxcb.so,
lib/libQt6XcbQpa.so.6 and xcbglintegrations/*.so, less Qt's own. Without one of them the window
does not open on a real desktop and Qt prints only its xcb-cursor hint (seen on Debian 12 and 13:
libxcb-icccm4 and libxcb-keysyms1 were missing)."""

from __future__ import annotations

import importlib.util
import re
import struct
import subprocess
from pathlib import Path

import PySide6
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-deps.sh"
QT = Path(PySide6.__file__).parent / "Qt"
# The C runtime and the compiler's: every system that runs Python has them.
ALWAYS_THERE = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"}


def needed(path: Path) -> list[str]:
    """The DT_NEEDED names of a 64-bit little-endian ELF file: its SHT_DYNAMIC section's
    entries of tag 1, as offsets into the string table its sh_link names."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not ELF64 LE"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, *_rest in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab_offset = sections[link][4]
        for at in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", strtab_offset + value)
                names.append(data[strtab_offset + value : end].decode())
    return names


def xcb_plugin_files() -> list[Path]:
    files = [
        QT / "plugins" / "platforms" / "libqxcb.so",
        *sorted((QT / "lib").glob("libQt6XcbQpa.so*")),
    ]
    files += sorted((QT / "plugins" / "xcbglintegrations").glob("*.so"))
    return [f for f in files if f.is_file() and not f.is_symlink()]


def checked_libraries() -> dict[str, str]:
    """soname -> package, from the script's `have_lib 'SONAME ' || missing+=(PACKAGE)` lines."""
    text = SCRIPT.read_text(encoding="utf-8")
    return dict(re.findall(r"have_lib '(\S+) '\s*\|\| missing\+=\((\S+)\)", text))


@pytest.mark.skipif(not (QT / "plugins" / "platforms" / "libqxcb.so").exists(), reason="no xcb")
def test_every_library_the_xcb_plugin_links_is_installed_by_system_deps() -> None:
    files = xcb_plugin_files()
    assert len(files) >= 3, files  # the plugin, its QPA library, the GL integrations
    linked = {name for f in files for name in needed(f)}
    assert "libxcb-icccm.so.4" in linked and "libxcb-keysyms.so.1" in linked  # the reader reads
    system = {n for n in linked if not n.startswith("libQt6") and n not in ALWAYS_THERE}
    checked = checked_libraries()
    assert sorted(system - set(checked)) == []
    # The package names are Debian's for those sonames (the packaging's own table agrees).
    for soname, package in checked.items():
        if soname in SONAME_PACKAGES:
            assert SONAME_PACKAGES[soname] == package, soname


def _packaging_table() -> dict[str, str]:
    """packaging/linux_deps.py's SONAME_PACKAGES (the scripts there are not a package)."""
    spec = importlib.util.spec_from_file_location(
        "linux_deps", ROOT / "packaging" / "linux_deps.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.SONAME_PACKAGES)


SONAME_PACKAGES = _packaging_table()


def test_the_script_is_valid_bash() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
