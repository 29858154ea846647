#!/usr/bin/env bash
# Makes, once per machine, a Debian 13 (trixie) root holding hipcc (HIP 5.7, clang 17) and LLVM 17's
# binary tools, for `python -m kernels isa-proof`. Debian 12's own hipcc (HIP 5.2) cannot compile
# llama.cpp's HIP code (no gfx1100 device libraries, no hip_bf16.h), hence a root of the next release.
#   scripts/hip_root.sh [DIR]     default DIR: ${XDG_CACHE_HOME:-~/.cache}/kvstudio/hip-root-trixie
# Prints DIR on stdout when it is ready. Needs root (debootstrap, chroot) and the Debian mirror this
# machine's apt uses; about a minute and 370 MB on a fresh machine, nothing once made.
set -euo pipefail
root="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstudio/hip-root-trixie}"
# hipBLAS headers only: llama.cpp's HIP vendor header includes them, nothing links against them.
hipblas_dir=/opt/hipblas
packages="hipcc"

name=hip_root.sh what="the HIP root"
# shellcheck source=scripts/debian_root_common.sh
. "$(dirname "$0")/debian_root_common.sh"

partial="$root.partial"
rm -rf "$partial"
echo "Making a Debian 13 root for hipcc in $root from $mirror (about a minute)..." >&2
debootstrap --variant=minbase trixie "$partial" "$mirror" >"$partial.log" 2>&1 \
  || { tail -n 20 "$partial.log" >&2; fail "debootstrap of Debian 13 from $mirror failed (log: $partial.log)."; }
cp /etc/resolv.conf "$partial/etc/resolv.conf" 2>/dev/null || true
in_root() { chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
{
  in_root apt-get update -qq &&
  in_root apt-get install -y -qq --no-install-recommends $packages &&
  in_root sh -c "cd /tmp && apt-get download -qq libhipblas-dev && dpkg -x libhipblas-dev_*.deb $hipblas_dir &&
    dpkg-deb -f libhipblas-dev_*.deb Package Version | paste -sd' ' > $hipblas_dir/version && rm libhipblas-dev_*.deb" &&
  in_root apt-get clean
} >>"$partial.log" 2>&1 || { tail -n 20 "$partial.log" >&2; fail "installing hipcc in the Debian 13 root failed (log: $partial.log)."; }
[ -f "$partial$hipblas_dir/usr/include/hipblas/hipblas.h" ] || fail "libhipblas-dev did not unpack its headers."
# The ready marker names the toolchain: `kernels isa-proof` keys its cached objects on it.
{
  in_root dpkg-query -W -f='${Package} ${Version}\n' hipcc clang-17 rocm-device-libs-17
  sed 's/Package: //; s/ Version: / /' "$partial$hipblas_dir/version"
} >"$partial/.kvstudio-toolchain" || fail "could not read the toolchain versions in the Debian 13 root."
rm -rf "$root"
mv "$partial" "$root"
mv "$partial.log" "$root/.kvstudio-setup.log"
mv "$root/.kvstudio-toolchain" "$ready"
echo "$root"
