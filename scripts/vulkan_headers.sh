#!/usr/bin/env bash
# Vulkan headers new enough for llama-cpp-python 0.3.36's ggml-vulkan, unpacked into the cache.
#   scripts/vulkan_headers.sh [DIR]   default DIR: ${XDG_CACHE_HOME:-~/.cache}/kvstudio/vulkan-headers
# Prints DIR/include on stdout when ready; the build uses it through CPLUS_INCLUDE_PATH, which g++
# searches before /usr/include.
#
# Why: ggml_vk_instance_init() uses vk::LayerSettingEXT / vk::LayerSettingsCreateInfoEXT
# (VK_EXT_layer_settings) without a version guard; Vulkan-Headers have them from 1.3.272, Debian 12
# ships 1.3.239, so ggml-vulkan.cpp does not compile against its libvulkan-dev. The headers are
# taken from Debian 13 (trixie)'s libvulkan-dev with apt-get download (a private source list and
# state folder: the system's apt sources stay as they are) and only unpacked, never installed:
# the libraries still link against and run with this system's libvulkan.so.1 (the Vulkan loader
# ABI is stable), so the package runs on Debian 12. Nothing happens when the system's headers are
# new enough (DIR is then not printed: nothing to add).
set -euo pipefail
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstudio/vulkan-headers}"
suite="${KVSTUDIO_VULKAN_HEADERS_SUITE:-trixie}"
fail() { echo "vulkan_headers.sh: $*" >&2; exit 1; }
has_layer_settings() { grep -q "define VK_EXT_layer_settings 1" "$1/vulkan/vulkan_core.h" 2>/dev/null; }

if has_layer_settings /usr/include; then
  exit 0
fi
if has_layer_settings "$dir/include"; then
  echo "$dir/include"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || fail "no apt-get: install Vulkan-Headers >= 1.3.272 and put them on CPLUS_INCLUDE_PATH."
# shellcheck source=scripts/debian_mirror.sh
. "$(dirname "$0")/debian_mirror.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/deb"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -qq >&2 || fail "apt-get update for $suite failed."
(cd "$work/deb" && apt-get "${apt_opts[@]}" download libvulkan-dev >&2) \
  || fail "apt-get download libvulkan-dev ($suite) failed."
deb=$(ls "$work"/deb/libvulkan-dev_*.deb)
dpkg-deb -x "$deb" "$work/x"
has_layer_settings "$work/x/usr/include" || fail "$(basename "$deb") has no VK_EXT_layer_settings either."
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
cp -r "$work/x/usr/include" "$dir.partial/include"
{ basename "$deb"; sha256sum "$deb" | cut -d' ' -f1
  grep -m1 "define VK_HEADER_VERSION " "$work/x/usr/include/vulkan/vulkan_core.h"; } >"$dir.partial/SOURCE"
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "$dir/include"
