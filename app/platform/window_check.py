"""Whether this machine can open the app's window, asked before Qt is imported: with no display
Qt aborts with a hint about xcb-cursor, and with no libGL the import of PySide6 fails with a
loader error; each is one sentence here instead, saying what to do.

    problem = window_problem()    # None, or the sentence for stderr (exit 2)
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Iterable, Mapping

# What Qt's GUI library links from the system, with the Debian/Ubuntu package of each (read with
# readelf -d from PySide6's libQt6Gui.so.6 and libQt6Widgets.so.6; scripts/system-deps.sh
# installs them for a source install, the .deb depends on them).
GUI_LIBRARIES = {
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libX11.so.6": "libx11-6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
}
# Qt platforms that draw on a display server, and the variable that says where it is.
DISPLAY_PLATFORMS = {"xcb": ("DISPLAY",), "wayland": ("WAYLAND_DISPLAY",)}
NO_DISPLAY = (
    "No display was found (neither DISPLAY nor WAYLAND_DISPLAY is set), so the window cannot "
    "open; use `kvstudio serve` for the local API or `kvstudio run MODEL` to chat in this "
    "terminal instead."
)


def no_display(environ: Mapping[str, str], system: str) -> bool:
    """Whether Qt would look for a display server that is not there: on Linux and the BSDs,
    with QT_QPA_PLATFORM unset or naming only xcb/wayland, and neither variable set. Another
    platform (offscreen, vnc, eglfs) needs no display; Windows and macOS always have one."""
    if system in ("win32", "darwin"):
        return False
    asked = [p.split(":")[0].strip() for p in environ.get("QT_QPA_PLATFORM", "").split(";")]
    asked = [p for p in asked if p] or list(DISPLAY_PLATFORMS)
    for platform in asked:
        variables = DISPLAY_PLATFORMS.get(platform)
        if variables is None or any(environ.get(v) for v in variables):
            return False
    return True


def missing_libraries(names: Iterable[str]) -> list[str]:
    """The libraries of `names` the system's loader cannot open (dlopen, as Qt's import would)."""
    missing = []
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def missing_libraries_sentence(missing: Iterable[str]) -> str:
    """One sentence naming the missing libraries and the packages that install them."""
    names = list(missing)
    packages = sorted({GUI_LIBRARIES.get(n, _package_guess(n)) for n in names})
    verb = "is" if len(names) == 1 else "are"
    return (
        f"The window cannot open: {', '.join(names)} {verb} missing or damaged; install "
        f"{' '.join(packages)} (Debian/Ubuntu: sudo apt install {' '.join(packages)})."
    )


def library_in_import_error(error: ImportError) -> str | None:
    """The library a failed import of Qt could not load ("libGL.so.1: cannot open shared
    object file", "/usr/lib/libGL.so.1: file too short"), or None for an import error of
    another kind."""
    found = re.search(r"(?:^|[\s/])(lib[\w.+-]+\.so[.\d]*):", str(error))
    return found.group(1) if found else None


NOT_UTF8 = ("C", "POSIX")


def utf8_locale(environ: Mapping[str, str]) -> dict[str, str]:
    """What to set so Qt starts on a UTF-8 locale without its four-line warning ("Detected
    locale "C" ... has switched to "C.UTF-8" instead"), printed at every start where LC_ALL
    or the character type is C or POSIX (a container, a service, a frozen app run from a bare
    shell): C.UTF-8, what Qt would switch to anyway. A UTF-8 or other chosen locale is kept."""
    lc_all = environ.get("LC_ALL", "")
    if lc_all:
        return {"LC_ALL": "C.UTF-8"} if lc_all in NOT_UTF8 else {}
    ctype = environ.get("LC_CTYPE") or environ.get("LANG") or "C"
    return {"LC_CTYPE": "C.UTF-8"} if ctype in NOT_UTF8 else {}


def window_problem(
    environ: Mapping[str, str] | None = None, system: str | None = None
) -> str | None:
    """Why the window cannot open here, in one sentence, or None when it can."""
    environ = os.environ if environ is None else environ
    system = sys.platform if system is None else system
    if no_display(environ, system):
        return NO_DISPLAY
    if system.startswith("linux"):
        missing = missing_libraries(GUI_LIBRARIES)
        if missing:
            return missing_libraries_sentence(missing)
    return None


def _package_guess(soname: str) -> str:
    """Debian's usual name for a library's package: libxcb-icccm.so.4 -> libxcb-icccm4."""
    base, _, version = soname.partition(".so")
    version = version.strip(".").split(".")[0]
    name = base.lower()
    return f"{name}-{version}" if name[-1:].isdigit() and version else f"{name}{version}"
