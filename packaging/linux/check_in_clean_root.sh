#!/bin/sh
# Runs inside a copy of a bare Debian 12 root (packaging/check_linux.py): install the .deb the way a
# user does, check every file finds its libraries, run the app, remove it, and check the user's
# data is still there. Each failure says what failed on stderr and exits 1.
set -eu
export DEBIAN_FRONTEND=noninteractive HOME=/root
if command -v python3 >/dev/null; then echo "the clean root has python3" >&2; exit 1; fi
apt-get install -y -qq --no-install-recommends /tmp/kvstudio.deb >/tmp/apt.log 2>&1 \
  || { tail -n 15 /tmp/apt.log >&2; echo "apt-get install ./kvstudio.deb failed" >&2; exit 1; }
missing=$(find /opt/kvstudio -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
  'LD_LIBRARY_PATH=/opt/kvstudio/_internal ldd "$1" 2>/dev/null | grep "not found" | sed "s|^|$1: |"' _ {} \; )
if [ -n "$missing" ]; then echo "$missing" | head -n 20 >&2; echo "libraries not found after install" >&2; exit 1; fi
cd /tmp
kvstudio selftest >/tmp/selftest.txt
# A backend package installed the way the first-run dialog does it (checked against its manifest,
# test-loaded in a child process of the frozen app), then used by the engine.
kvstudio backend add /tmp/backend.tar.gz --allow-unsigned >/tmp/backend-add.txt
kvstudio backend use cpu >>/tmp/backend-add.txt
kvstudio selftest >/tmp/selftest-package.txt
grep -q "cpu backend" /tmp/selftest-package.txt \
  || { cat /tmp/selftest-package.txt >&2; echo "the selftest did not run on the installed cpu package" >&2; exit 1; }
QT_QPA_PLATFORM=offscreen kvstudio gui --screenshot /tmp/window.png 2>/tmp/gui.log
data="/root/.local/share/KVStudio/KV Studio"
test -d "$data" || { echo "no user data folder after the GUI ran" >&2; exit 1; }
apt-get remove -y -qq kvstudio >/tmp/remove.log 2>&1
test ! -e /opt/kvstudio || { echo "/opt/kvstudio is still there after apt-get remove" >&2; exit 1; }
test -f "$data/conversations.sqlite3" \
  || { echo "the user's conversations did not survive apt-get remove" >&2; exit 1; }
