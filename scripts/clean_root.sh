#!/usr/bin/env bash
# Makes, once per machine, a bare Debian 12 (bookworm) root: debootstrap's minbase and nothing
# else, no Python. The packaging check copies it and installs the built .deb into the copy, so the
# app is tried where only what its Depends pull in is present.
#   scripts/clean_root.sh [DIR]     default DIR: ${XDG_CACHE_HOME:-~/.cache}/kvstudio/clean-root-bookworm
# Prints DIR on stdout when it is ready. Needs root (debootstrap) and the Debian mirror apt uses here.
set -euo pipefail
root="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstudio/clean-root-bookworm}"

name=clean_root.sh what="the clean Debian root"
# shellcheck source=scripts/debian_root_common.sh
. "$(dirname "$0")/debian_root_common.sh"

partial="$root.partial"
rm -rf "$partial"
echo "Making a bare Debian 12 root in $root from $mirror..." >&2
debootstrap --variant=minbase bookworm "$partial" "$mirror" >"$partial.log" 2>&1 \
  || { tail -n 20 "$partial.log" >&2; fail "debootstrap of Debian 12 from $mirror failed (log: $partial.log)."; }
cp /etc/resolv.conf "$partial/etc/resolv.conf" 2>/dev/null || true
chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin apt-get update -qq >>"$partial.log" 2>&1 \
  || { tail -n 20 "$partial.log" >&2; fail "apt-get update in the clean root failed (log: $partial.log)."; }
rm -rf "$root"
mv "$partial" "$root"
mv "$partial.log" "$root/.kvstudio-setup.log"
date -u +%FT%TZ >"$ready"
echo "$root"
