#!/usr/bin/env bash
# Issue 15 end to end on an H200 (docs/kernel-log.md, "End to end"): does the patched kernel make
# `kvstudio bench` decode faster with an 8-bit K cache than with f16, as users run it?
#   scripts/kernel_e2e_run.sh patched   builds the cuda-hopper backend from the trimmed sdist with
#       kernels/patches (/tmp/llama) through scripts/isa_sm90_run.sh, whose isa-count reads IDP.4A
#       from that patched build's libggml-cuda.so (its isa-proof compiles the sources as
#       published), then benches it at depth 32,768 on the random Llama-3-8B-shaped model in f16
#       and in Q4_K_M (llama.cpp's own quantizer).
#   scripts/kernel_e2e_run.sh upstream  builds the same sdist without the patches (/tmp/llama-up)
#       and benches both builds on both models, upstream then patched, in one call.
# Everything goes to one tar in $OUT, re-packed after each step so a call cut short still
# returns what it did. Needs what isa_sm90_run.sh and gpu_reference_run.sh need.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL="${OUT:-$PWD/out}"; O=/tmp/e2e-out; mkdir -p "$O" "$FINAL"
SDIST="$PWD/.device-carry/llama_cpp_python-0.3.36.tar.gz"
F16=/tmp/llama3-8b-shapes-random-f16.gguf
Q4=/tmp/llama3-8b-shapes-random-q4_k_m.gguf
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$O/e2e.log"; }
pack() { tar cf "$FINAL/e2e-$1.tar" -C "$O" . ; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl

# bench BUILD MODEL NAME [bench options]: kvstudio bench at depth 32,768 on BUILD's llama_cpp.
bench() {
  local build=$1 model=$2 name=$3; shift 3
  stamp "bench $name"
  PYTHONPATH="$build:/tmp/site:$PWD" python3 -m app bench "$model" --ctx 131072 --depth 32768 \
    --prompt-tokens 2048 --gen-tokens 128 --json --csv "$O/$name.csv" \
    --record "$O/$name-recording.json" "$@" >"$O/$name.json" 2>"$O/$name.log"
  stamp "bench $name exit $?"
  PYTHONPATH="/tmp/site:$PWD" python3 -m app bench --results "$O/$name.json" | tee -a "$O/e2e.log"
}

models() {
  [ -f "$F16" ] || python3 scripts/make_random_llama_gguf.py "$F16" >>"$O/e2e.log" 2>&1
  [ -f "$Q4" ] || PYTHONPATH="$1:/tmp/site" python3 scripts/quantize_gguf.py "$F16" "$Q4" 2>>"$O/quantize.log" \
    | tee -a "$O/e2e.log"
}

case "${1:-}" in
patched)
  { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
    nproc; } >>"$O/e2e.log" 2>&1
  stamp "build + ISA proof (scripts/isa_sm90_run.sh)"
  OUT="$O/isa" bash scripts/isa_sm90_run.sh >"$O/isa-run.out" 2>&1
  stamp "isa_sm90_run exit $?"; pack patched
  cat /tmp/llama/llama_cpp/lib/kvstudio-kernel.txt >>"$O/e2e.log" 2>&1
  models /tmp/llama; pack patched
  bench /tmp/llama "$F16" patched-f16; pack patched
  bench /tmp/llama "$Q4" patched-q4 --chunks 0; pack patched
  ;;
upstream)
  [ -d /tmp/llama/llama_cpp ] || { stamp "no patched build in /tmp/llama (machine not warm)"; exit 1; }
  mkdir -p /tmp/src-up && tar xzf "$SDIST" -C /tmp/src-up
  stamp "build upstream"
  CMAKE_ARGS="$(python3 -m kernels cmake-args cuda-hopper)" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    python3 -m pip install --no-cache-dir --no-build-isolation --no-deps --target /tmp/llama-up \
    /tmp/src-up/llama_cpp_python-0.3.36 >"$O/build-upstream.log" 2>&1
  stamp "build upstream exit $?"; pack upstream
  models /tmp/llama
  for round in 1 2; do
    bench /tmp/llama-up "$Q4" "upstream-q4-$round" --chunks 0
    bench /tmp/llama "$Q4" "patched-q4-$round" --chunks 0; pack upstream
  done
  bench /tmp/llama-up "$F16" upstream-f16 --chunks 0; pack upstream
  ;;
*) echo "usage: $0 patched|upstream" >&2; exit 2 ;;
esac
stamp "done"; pack "$1"
