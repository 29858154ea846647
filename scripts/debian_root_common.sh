# Sourced by the scripts that make a Debian root for a toolchain this host lacks (hip_root.sh,
# rocm_root.sh). Before sourcing, set: root (the folder), name (the script's name for messages),
# what (words for the root, e.g. "the HIP root"). Afterwards: the root is either ready (the script
# has printed it and exited 0) or this run holds the lock, debootstrap is on PATH, and $mirror is
# the Debian mirror apt already uses here.
ready="$root/.kvstudio-ready"
fail() { echo "$name: $*" >&2; exit 1; }
if [ -f "$ready" ]; then
  echo "$root"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || fail "making $what needs root (debootstrap and chroot); run as root or make it once with sudo."
mkdir -p "$(dirname "$root")"
# Two runs at once (two test sessions) would debootstrap into the same folder: the second waits.
exec 9>"$root.lock"
flock 9
if [ -f "$ready" ]; then
  echo "$root"
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
  command -v apt-get >/dev/null 2>&1 || fail "debootstrap is missing and there is no apt-get to install it."
  echo "Installing debootstrap..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
fi
export PATH="$PATH:/usr/sbin:/sbin"

. "$(dirname "${BASH_SOURCE[0]}")/debian_mirror.sh"
