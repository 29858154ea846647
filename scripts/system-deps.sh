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
# The window on a real desktop (xcb); offscreen runs need none of these.
have_lib 'libxcb-cursor.so.0 ' || missing+=(libxcb-cursor0)
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
