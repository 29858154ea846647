#!/usr/bin/env bash
# Installs the few system packages KV Studio needs on Debian/Ubuntu when they are missing:
# a C/C++ compiler (pip compiles llama.cpp) and the libraries Qt's wheels link against.
set -euo pipefail
missing=()
command -v c++ >/dev/null 2>&1 || missing+=(build-essential)
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libGL.so.1 '        || missing+=(libgl1)
have_lib 'libEGL.so.1 '       || missing+=(libegl1)
have_lib 'libOpenGL.so.0 '    || missing+=(libopengl0)
have_lib 'libxkbcommon.so.0 ' || missing+=(libxkbcommon0)
have_lib 'libfontconfig.so.1 ' || missing+=(libfontconfig1)
have_lib 'libdbus-1.so.3 '    || missing+=(libdbus-1-3)
have_lib 'libglib-2.0.so.0 '  || missing+=(libglib2.0-0)
# The window on a real desktop: what Qt's xcb platform plugin links (readelf -d of PySide6's
# plugins/platforms/libqxcb.so, lib/libQt6XcbQpa.so.6 and xcbglintegrations/*.so; without any
# one of them Qt prints only its xcb-cursor hint and aborts). Offscreen runs need none of these.
# tests/packaging/test_system_deps.py fails when a wheel update links one not listed here.
have_lib 'libX11.so.6 '            || missing+=(libx11-6)
have_lib 'libX11-xcb.so.1 '        || missing+=(libx11-xcb1)
have_lib 'libxcb.so.1 '            || missing+=(libxcb1)
have_lib 'libxcb-cursor.so.0 '     || missing+=(libxcb-cursor0)
have_lib 'libxcb-glx.so.0 '        || missing+=(libxcb-glx0)
have_lib 'libxcb-icccm.so.4 '      || missing+=(libxcb-icccm4)
have_lib 'libxcb-image.so.0 '      || missing+=(libxcb-image0)
have_lib 'libxcb-keysyms.so.1 '    || missing+=(libxcb-keysyms1)
have_lib 'libxcb-randr.so.0 '      || missing+=(libxcb-randr0)
have_lib 'libxcb-render.so.0 '     || missing+=(libxcb-render0)
have_lib 'libxcb-render-util.so.0 ' || missing+=(libxcb-render-util0)
have_lib 'libxcb-shape.so.0 '      || missing+=(libxcb-shape0)
have_lib 'libxcb-shm.so.0 '        || missing+=(libxcb-shm0)
have_lib 'libxcb-sync.so.1 '       || missing+=(libxcb-sync1)
have_lib 'libxcb-util.so.1 '       || missing+=(libxcb-util1)
have_lib 'libxcb-xfixes.so.0 '     || missing+=(libxcb-xfixes0)
have_lib 'libxcb-xkb.so.1 '        || missing+=(libxcb-xkb1)
have_lib 'libxkbcommon-x11.so.0 '  || missing+=(libxkbcommon-x11-0)
have_lib 'libgthread-2.0.so.0 '    || missing+=(libglib2.0-0)
[ -d /usr/share/fonts/truetype/dejavu ] || missing+=(fonts-dejavu-core)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# The packaging checks (tests/packaging): validators for the desktop entry and the AppStream
# file, and makensis, which compiles the Windows installer script here too.
command -v desktop-file-validate >/dev/null 2>&1 || missing+=(desktop-file-utils)
command -v appstreamcli >/dev/null 2>&1 || missing+=(appstream)
command -v makensis >/dev/null 2>&1 || missing+=(nsis)

# shellcheck source=scripts/install_missing.sh
. "$(dirname "$0")/install_missing.sh"
install_missing "${missing[@]}"
