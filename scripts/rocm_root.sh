#!/usr/bin/env bash
# Makes, once per machine, a Debian testing (forky) root with HIP 6.4, hipBLAS, rocBLAS, CMake and a
# C++ compiler: what a full llama.cpp GGML_HIP build needs (its CMake wants HIP >= 6.1; Debian 13's
# HIP 5.7 is enough only for the compile-only instruction proof, see scripts/hip_root.sh).
#   scripts/rocm_root.sh [DIR]     default DIR: ${XDG_CACHE_HOME:-~/.cache}/kvstudio/rocm-root-forky
# Prints DIR on stdout when it is ready. Needs root (debootstrap, chroot) and the Debian mirror this
# machine's apt uses. This machine's debootstrap (Debian 12) has no forky script: the sid one is used.
set -euo pipefail
root="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstudio/rocm-root-forky}"
packages="hipcc libamdhip64-dev libhipblas-dev librocblas-dev rocm-cmake cmake make g++ pkg-config file binutils"

name=rocm_root.sh what="the ROCm root"
# shellcheck source=scripts/debian_root_common.sh
. "$(dirname "$0")/debian_root_common.sh"
script=/usr/share/debootstrap/scripts/forky
[ -f "$script" ] || script=/usr/share/debootstrap/scripts/sid

partial="$root.partial"
rm -rf "$partial"
echo "Making a Debian testing (forky) root for HIP 6.x in $root from $mirror..." >&2
debootstrap --variant=minbase forky "$partial" "$mirror" "$script" >"$partial.log" 2>&1 \
  || { tail -n 20 "$partial.log" >&2; fail "debootstrap of Debian forky from $mirror failed (log: $partial.log)."; }
cp /etc/resolv.conf "$partial/etc/resolv.conf" 2>/dev/null || true
# Debian testing's Release file carries a Valid-Until date, and a mirror snapshot older than that
# date is refused ("Release file ... is expired"); the packages are still signed, so accept it.
echo 'Acquire::Check-Valid-Until "false";' >"$partial/etc/apt/apt.conf.d/99kvstudio-snapshot"
in_root() { chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
{
  in_root apt-get update -qq &&
  in_root apt-get install -y -qq --no-install-recommends $packages &&
  in_root apt-get clean
} >>"$partial.log" 2>&1 || { tail -n 20 "$partial.log" >&2; fail "installing HIP 6 in the forky root failed (log: $partial.log)."; }
in_root dpkg-query -W -f='${Package} ${Version}\n' hipcc libamdhip64-dev libhipblas-dev librocblas-dev cmake \
  >"$partial/.kvstudio-toolchain" || fail "could not read the toolchain versions in the forky root."
rm -rf "$root"
mv "$partial" "$root"
mv "$partial.log" "$root/.kvstudio-setup.log"
mv "$root/.kvstudio-toolchain" "$ready"
echo "$root"
