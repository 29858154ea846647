#!/usr/bin/env bash
# A CUDA backend package on an NVIDIA GPU machine (used with an H200): build it, install it into
# a fresh data folder, switch the engine to it and verify it there (see docs/backends.md).
#  1. `python -m kernels package cuda-hopper --record` (sm_90, the int8-K FA pairs, GGML_NATIVE=OFF)
#     -> docs/backend-packages/cuda-hopper.json with the IDP.4A counts read from libggml-cuda.so;
#  2. `kvstudio backend add --use`, `ls`, `verify` (files, load in a child, FA pairs, IDP.4A);
#  3. `kvstudio run` and `python -m kernels verify` on a tiny random-weight model, on the package;
#  4. `python -m kernels isa-count` on the package's libggml-cuda.so for q8_0/f16 and q8_0/q8_0:
#     the sm_90 instruction report of the kernels it ships (IDP.4A per flash_attn_ext_vec kernel,
#     cuobjdump -sass) -> isa-count-sm90-<pair>.json, the summaries in run.log.
# No llama-cpp-python is installed there: only its Python code (the sdist's llama_cpp/) is on the
# path, so every library that runs comes from the package. Results go to $OUT (at most 8 files).
# Needs nvcc, cuobjdump, cmake, python3 with numpy and jinja2; the trimmed sdist and the diskcache
# and gguf wheels in .device-carry/ (no network there).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
LOG="$OUT/run.log"
export XDG_CACHE_HOME=/tmp/kvstudio-cache PYTHONUNBUFFERED=1 KVSTUDIO_DATA_DIR=/tmp/kvstudio-data
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$LOG"; }

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl
mkdir -p "$XDG_CACHE_HOME/kvstudio/sdist" /tmp/src
cp .device-carry/llama_cpp_python-0.3.36.tar.gz "$XDG_CACHE_HOME/kvstudio/sdist/"
tar xzf .device-carry/llama_cpp_python-0.3.36.tar.gz -C /tmp/src llama_cpp_python-0.3.36/llama_cpp
export PYTHONPATH="/tmp/src/llama_cpp_python-0.3.36:/tmp/site:$PWD"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; python3 -V; nproc; } >>"$LOG" 2>&1

stamp "package build started"
python3 -m kernels package cuda-hopper --out /tmp/packages --jobs "$(nproc)" --record >>"$LOG" 2>&1
stamp "package build exit $?"
cp docs/backend-packages/cuda-hopper.json "$OUT/" 2>>"$LOG"
archive=$(ls /tmp/packages/kvstudio-backend-cuda-hopper-*.tar.gz)
ls -la /tmp/packages /tmp/packages/cuda-hopper >>"$LOG" 2>&1

{
  echo "\$ kvstudio backend add $archive --use"; python3 -m app backend add "$archive" --use --allow-unsigned; echo "(exit $?)"
  echo "\$ kvstudio backend ls"; python3 -m app backend ls
  echo "\$ kvstudio backend verify"; python3 -m app backend verify; echo "(exit $?)"
} >"$OUT/backend.txt" 2>&1
stamp "backend add/verify done"

python3 scripts/make_random_llama_gguf.py /tmp/tiny.gguf --layers 2 --vocab small >/dev/null 2>&1
for kv in q8_0/f16 q8_0/q8_0 f16/f16; do
  stamp "run and verify --kv $kv"
  { echo "\$ kvstudio run /tmp/tiny.gguf --kv $kv -n 16 --temp 0 -p hello"
    python3 -m app run /tmp/tiny.gguf --kv "$kv" -n 16 --temp 0 -p hello >/dev/null 2>/tmp/run.log
    echo "(exit $?)"; tail -3 /tmp/run.log
    echo "\$ python3 -m kernels verify /tmp/tiny.gguf --kv $kv --ctx 2048"
    python3 -m kernels verify /tmp/tiny.gguf --kv "$kv" --ctx 2048 2>/tmp/verify.log
    echo "(exit $?)"; echo; } >>"$OUT/verify.txt"
  grep -iE "error|warn|fault" /tmp/verify.log | head -5 >>"$LOG"
done
lib=/tmp/packages/cuda-hopper/libggml-cuda.so
for kv in q8_0/f16 q8_0/q8_0; do
  stamp "isa-count --kv $kv"
  python3 -m kernels isa-count "$lib" --kv "$kv" --json >"$OUT/isa-count-sm90-${kv/\//-}.json" 2>>"$LOG"
  python3 -m kernels isa-count "$lib" --kv "$kv" >>"$LOG" 2>&1; echo "(exit $?)" >>"$LOG"
done
stamp "done"
cat "$OUT/backend.txt" "$OUT/verify.txt"
