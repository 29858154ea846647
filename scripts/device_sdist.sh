#!/usr/bin/env bash
# The trimmed llama-cpp-python sdist the GPU scripts build from (.device-carry/, git-ignored, at most
# 64 MiB travels to the device machine): the sdist from PyPI is 76 MB, mostly git history; without
# the .git folders, llama.cpp's models, docs, web UI, server, benches and media, and the ggml
# backends we never build there, it packs to about 7.5 MB and still builds (docs/llama-cpp-notes.md).
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"${PIP:-pip3}" download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version"
find "$src" -name .git -prune -exec rm -rf {} +
vendor="$src/vendor/llama.cpp"
rm -rf "$vendor"/{models,docs,tools/ui,tools/server,benches,media}
for backend in sycl opencl hexagon metal vulkan; do rm -rf "$vendor/ggml/src/ggml-$backend"; done
mkdir -p .device-carry
tar czf ".device-carry/llama_cpp_python-$version.tar.gz" -C "$work" "llama_cpp_python-$version"
ls -l ".device-carry/llama_cpp_python-$version.tar.gz"
