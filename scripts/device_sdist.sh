#!/usr/bin/env bash
# The trimmed llama-cpp-python sdist the GPU scripts build from (.device-carry/, git-ignored, at most
# 64 MiB travels to the device machine): the sdist from PyPI is 76 MB, mostly git history; without
# the .git folders, llama.cpp's models, docs, web UI, server, benches and media, and the ggml
# backends we never build there, it packs to about 7.5 MB and still builds (docs/llama-cpp-notes.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# The pinned sdist, downloaded once into the cache as the kernel tools and tests get it.
sdist="$(python3 -c 'from kernels.isa_proof import ensure_sdist; print(ensure_sdist(log=lambda line: None))')"
name="$(basename "$sdist" .tar.gz)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar xzf "$sdist" -C "$work"
src="$work/$name"
find "$src" -name .git -prune -exec rm -rf {} +
vendor="$src/vendor/llama.cpp"
rm -rf "$vendor"/{models,docs,tools/ui,tools/server,benches,media}
for backend in sycl opencl hexagon metal vulkan; do rm -rf "$vendor/ggml/src/ggml-$backend"; done
mkdir -p .device-carry
tar czf ".device-carry/$name.tar.gz" -C "$work" "$name"
ls -l ".device-carry/$name.tar.gz"
