"""Which Debian packages the frozen Linux app needs: the libraries its files link that it does
not carry itself (PyInstaller bundles the rest), found with ldd the way the loader finds them.

Each such library must be in SONAME_PACKAGES; an unknown one stops the build with its name, so a
new dependency is added on purpose rather than discovered by a user's crash. The clean-root check
(packaging/check_deb.py) proves the list right: after `apt-get install ./kvstudio.deb` in a bare
Debian, ldd finds every library of every file.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# soname -> Debian package (Debian 12 names; both names where Debian 13's t64 rename applies).
SONAME_PACKAGES = {
    "libc.so.6": "libc6",
    "libm.so.6": "libc6",
    "libdl.so.2": "libc6",
    "libpthread.so.0": "libc6",
    "librt.so.1": "libc6",
    "libresolv.so.2": "libc6",
    "libutil.so.1": "libc6",
    "ld-linux-x86-64.so.2": "libc6",
    "libGL.so.1": "libgl1",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libEGL.so.1": "libegl1",
    "libOpenGL.so.0": "libopengl0",
    "libdrm.so.2": "libdrm2",
    "libxcb.so.1": "libxcb1",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# Not linked by the app's own files, but needed at run time:
# - fontconfig's configuration (the bundled libfontconfig reads /etc/fonts) and one font, without
#   which a bare system draws the window with no text;
# - what every llama.cpp backend package links and does not carry (llama.cpp's CPU code uses
#   OpenMP): a package the user installs later should not depend on the app's private copies,
#   which it reaches only through the launcher's LD_LIBRARY_PATH.
RUNTIME_PACKAGES = [
    "fontconfig-config",
    "fonts-dejavu-core | fonts-liberation2",
    "libgomp1",
    "libstdc++6",
    "libgcc-s1",
]
LOADER_NAMES = ("linux-vdso.so.1", "ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2")


class MissingLibraryError(RuntimeError):
    pass


def elf_files(folder: Path) -> list[Path]:
    """Every ELF file under `folder` (libraries, plugins, executables)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def linked_from_outside(app_folder: Path) -> dict[str, str | None]:
    """soname -> where ldd resolved it outside the app (None: not found) for every library a file
    of the one-folder app links and the app does not carry. The app's own folder is on the
    library path, as the frozen app's launcher puts it."""
    internal = app_folder / "_internal"
    env = dict(os.environ, LD_LIBRARY_PATH=str(internal if internal.is_dir() else app_folder))
    outside: dict[str, str | None] = {}
    for path in elf_files(app_folder):
        result = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env)
        for line in result.stdout.splitlines():
            name, arrow, target = line.strip().partition(" => ")
            if not arrow:
                continue  # the loader itself, or a statically linked file
            if target.startswith("not found"):
                outside.setdefault(name, None)
                continue
            resolved = target.split(" (")[0].strip()
            if not Path(resolved).resolve().is_relative_to(app_folder.resolve()):
                outside[name] = resolved
    return outside


def debian_depends(app_folder: Path, glibc: str) -> list[str]:
    """The Depends list for the app folder; MissingLibraryError names a library no rule covers."""
    sonames = linked_from_outside(app_folder)
    unknown = sorted(s for s in sonames if s not in SONAME_PACKAGES and s not in LOADER_NAMES)
    if unknown:
        raise MissingLibraryError(
            f"the app links {', '.join(unknown)}, which it does not carry and "
            "packaging/linux_deps.py does not map to a Debian package; add them to SONAME_PACKAGES."
        )
    packages = {SONAME_PACKAGES[s] for s in sonames if s in SONAME_PACKAGES}
    packages.add("libc6")
    linked = [f"libc6 (>= {glibc})" if p == "libc6" else p for p in sorted(packages)]
    return linked + RUNTIME_PACKAGES


def host_glibc() -> str:
    """The C library version the app was built against: its files need at least that one."""
    return os.confstr("CS_GNU_LIBC_VERSION").split()[-1]  # type: ignore[union-attr]
