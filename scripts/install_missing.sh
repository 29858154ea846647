# Sourced: install_missing PACKAGE... installs Debian/Ubuntu packages with apt-get (through sudo
# when not root), or says which to install where there is no apt-get. Nothing to do: returns 0.
install_missing() {
  [ $# -eq 0 ] && return 0
  echo "Installing system packages: $*" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "Please install these packages with your system's package manager: $*" >&2
    return 1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}
