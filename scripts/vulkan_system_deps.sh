#!/usr/bin/env bash
# Installs what building the `vulkan` backend package and running it on Mesa's software Vulkan
# driver (lavapipe, "llvmpipe" in vulkaninfo) need on Debian/Ubuntu, when missing:
#   glslc          compiles ggml-vulkan's compute shaders to SPIR-V (find_package(Vulkan ... glslc))
#   libvulkan-dev  the Vulkan loader to link against, and its headers (see below)
#   spirv-headers  SPIRV-HeadersConfig.cmake (find_package(SPIRV-Headers CONFIG REQUIRED))
#   cmake, ninja-build, a C/C++ compiler
#   mesa-vulkan-drivers  lavapipe, a Vulkan device that runs on the CPU (no GPU needed)
#   vulkan-tools   vulkaninfo, to see which Vulkan devices there are
# On Debian 12 libvulkan-dev's headers (1.3.239) are too old for llama-cpp-python 0.3.36's
# ggml-vulkan: scripts/vulkan_headers.sh unpacks newer ones into the cache (nothing installed).
set -euo pipefail
missing=()
command -v c++ >/dev/null 2>&1 || missing+=(build-essential)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v glslc >/dev/null 2>&1 || missing+=(glslc)
command -v vulkaninfo >/dev/null 2>&1 || missing+=(vulkan-tools)
[ -f /usr/include/vulkan/vulkan.hpp ] || missing+=(libvulkan-dev)
[ -f /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ] || missing+=(spirv-headers)
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || missing+=(mesa-vulkan-drivers)

# shellcheck source=scripts/install_missing.sh
. "$(dirname "$0")/install_missing.sh"
install_missing "${missing[@]}"
