#!/usr/bin/env bash
# The NVIDIA instruction-level run (an H200, sm_90; see docs/gpu-reference-run.md, "IDP.4A"):
#  1. `python -m kernels isa-proof --cuda` compiles the three FA vector-kernel instances with nvcc
#     and counts IDP.4A per kernel -> int8k-isa-sm90.json/.md (commit them under docs/);
#  2. meanwhile builds llama-cpp-python (cuda-hopper: sm_90, the int8-K FA pairs) into /tmp/llama;
#  3. `python -m kernels isa-count` and `python -m kernels verify` on that build, which read IDP.4A
#     from the installed libggml-cuda.so, on a tiny random-weight model.
# Results go to $OUT (or ./out): at most 8 files. Needs nvcc, cuobjdump, python3 with numpy,
# jinja2, scikit-build-core and cmake; the trimmed sdist and wheels of diskcache and gguf in
# .device-carry/ (no network there; docs/gpu-reference-run.md says how they are made).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
SDIST="$PWD/.device-carry/llama_cpp_python-0.3.36.tar.gz"
BUILD=/tmp/llama
LOG="$OUT/run.log"
export XDG_CACHE_HOME=/tmp/kvstudio-cache PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$LOG"; }

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2
  cuobjdump --version | tail -1; python3 -V; nproc; } >>"$LOG" 2>&1

# 2 starts first: it is the long pole (about 5 minutes with 16 cores).
mkdir -p /tmp/src && tar xzf "$SDIST" -C /tmp/src
stamp "build started"
( python3 -m kernels build cuda-hopper --source /tmp/src/llama_cpp_python-0.3.36 --target "$BUILD" \
    --jobs "$(nproc)" >/tmp/build.log 2>&1; echo "build exit $?" >>/tmp/build.log ) &
build_pid=$!

stamp "isa-proof --cuda started"
python3 -m kernels isa-proof --cuda --sdist "$SDIST" --no-cache \
  --out "$OUT/int8k-isa-sm90.json" --table "$OUT/int8k-isa-sm90.md" >>"$LOG" 2>&1
stamp "isa-proof --cuda exit $?"
# The q8_0-f16 instance's whole listing, for the parser's test fixture.
obj=$(ls "$XDG_CACHE_HOME"/kvstudio/cuda/objects/q8_0-f16-*.o | head -1)
cuobjdump -sass "$obj" | xz -9 >"$OUT/q8_0-f16-sm90.sass.xz"

wait "$build_pid"
tail -20 /tmp/build.log >>"$LOG"
stamp "build done"
export PYTHONPATH="$BUILD:$PYTHONPATH"
python3 -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())" >>"$LOG" 2>&1
lib="$BUILD/llama_cpp/lib/libggml-cuda.so"
ls -la "$BUILD"/llama_cpp/lib/ >>"$LOG" 2>&1
cuobjdump -lelf "$lib" | wc -l | sed 's/^/cubins in libggml-cuda.so: /' >>"$LOG" 2>&1
# The cubins holding the FA vector kernels, to re-read here if anything below goes wrong.
mkdir -p /tmp/cubins && (cd /tmp/cubins && cuobjdump -xelf all "$lib" >/dev/null \
  && grep -l flash_attn_ext_vec ./*.cubin | xargs tar cJf "$OUT/fattn-vec-cubins.tar.xz")

stamp "isa-count started"
python3 -m kernels isa-count "$lib" --kv q8_0/f16 --json >"$OUT/isa-count.json" 2>>"$LOG"
stamp "isa-count exit $?"
python3 scripts/make_random_llama_gguf.py /tmp/tiny.gguf --layers 2 --vocab small >/dev/null 2>&1
for kv in q8_0/f16 q8_0/q8_0 f16/f16; do
  stamp "verify --kv $kv"
  { echo "\$ python3 -m kernels verify /tmp/tiny.gguf --kv $kv --ctx 2048"
    python3 -m kernels verify /tmp/tiny.gguf --kv "$kv" --ctx 2048 2>/tmp/verify.log
    echo "(exit $?)"; echo; } >>"$OUT/verify.txt"
  grep -iE "error|warn|fault" /tmp/verify.log | head -5 >>"$LOG"
done
stamp "done"
cat "$OUT/verify.txt"
