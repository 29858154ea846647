#!/usr/bin/env bash
# The wheels the GPU machine's scripts install into /tmp/site (scripts/*_run.sh: the app's bench,
# `kvstudio backend`, the random-model writer), downloaded here into .device-carry/whl: the GPU
# machine has no network, Python 3.12 and numpy, and nothing else of ours. Run from the repository
# root with the project's venv; the wheels are the versions the venv has, where it has them.
set -euo pipefail
cd "$(dirname "$0")/.."
pip="${PIP:-.venv/bin/pip}"  # PIP=pip3 where the venv is not made yet
version() { { "$pip" show "$1" 2>/dev/null || true; } | awk '/^Version:/ {print "=="$2}'; }
mkdir -p .device-carry/whl
wheels=()
# gguf and diskcache: llama-cpp-python's and the model writer's; httpx2 and the rest: the Hub client
# and the package signatures that `python -m app` imports.
for name in diskcache gguf cryptography cffi pycparser httpx2 httpcore2 anyio idna truststore \
  typing_extensions h11 sniffio; do
  wheels+=("$name$(version "$name")")
done
"$pip" download -q --only-binary=:all: --no-deps --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .device-carry/whl "${wheels[@]}"
ls .device-carry/whl
