#!/usr/bin/env bash
# The kernel end to end on an H200 (docs/kernel-log.md, "End to end"): does the patched kernel make
# `kvstudio bench` decode faster with an 8-bit K cache than with f16, as users run it, at depths
# 32,768 and 131,072, on a Llama-3-8B-shaped model in f16 and in Q4_K_M weights?
# Four calls on one warm machine (each well inside a call's 10 minutes), carrying .device-carry
# (the trimmed sdist and the wheels the app imports: docs/gpu-reference-run.md says how):
#   scripts/kernel_e2e_run.sh build      builds the cuda-hopper backend from the trimmed sdist with
#       kernels/patches (/tmp/llama) through scripts/isa_sm90_run.sh (whose isa-count reads IDP.4A
#       from that build's libggml-cuda.so and whose `kernels verify` runs each K/V pair), while
#       the random Llama-3-8B-shaped model is written; then quantizes it to Q4_K_M with llama.cpp's
#       own quantizer.
#   scripts/kernel_e2e_run.sh patched    benches the patched build: both weights, both depths.
#   scripts/kernel_e2e_run.sh upstream   builds the same sdist without the patches (/tmp/llama-up)
#       and benches it at depth 32,768.
#   scripts/kernel_e2e_run.sh upstream-deep   benches upstream at depth 131,072.
# Each bench measures f16/f16, q8_0/f16 and q8_0/q8_0 in one run, side by side, with an NVML
# recording of the whole run (it names the build's `fa_kernel`). Everything goes to one tar per
# call in $OUT, re-packed after each step so a call cut short still returns what it did.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL="${OUT:-$PWD/out}"; O=/tmp/e2e-out; mkdir -p "$O" "$FINAL"
SDIST="$PWD/.device-carry/llama_cpp_python-0.3.36.tar.gz"
F16=/tmp/llama3-8b-shapes-random-f16.gguf
Q4=/tmp/llama3-8b-shapes-random-q4_k_m.gguf
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$O/e2e.log"; }
# The build call's tar holds the ISA run's files; later ones leave them out (a file comes back
# only under 16 MiB).
pack() { if [ "$1" = build ]; then tar cf "$FINAL/e2e-$1.tar" -C "$O" .
         else tar cf "$FINAL/e2e-$1.tar" -C "$O" --exclude=./isa --exclude=./isa-run.out . ; fi; }
[ -d /tmp/site/huggingface_hub ] ||
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl

# bench BUILD MODEL NAME DEPTH [bench options]: kvstudio bench on BUILD's llama_cpp.
bench() {
  local build=$1 model=$2 name=$3 depth=$4; shift 4
  # The context holds the depth, the 2,048-token prompt timed after it and nothing more; past
  # 131,072 (the model's trained length) it needs --force.
  local ctx=$(( depth > 129024 ? depth + 2048 : 131072 ))
  stamp "bench $name (depth $depth, context $ctx)"
  PYTHONPATH="$build:/tmp/site:$PWD" python3 -m app bench "$model" --ctx "$ctx" --depth "$depth" \
    --prompt-tokens 2048 --gen-tokens 128 --json --csv "$O/$name.csv" --force \
    --record "$O/$name-recording.json" "$@" >"$O/$name.json" 2>"$O/$name.log"
  stamp "bench $name exit $?"
  PYTHONPATH="/tmp/site:$PWD" python3 -m app bench --results "$O/$name.json" | tee -a "$O/e2e.log"
}

need() { [ -d "$1/llama_cpp" ] || { stamp "no build in $1 (the machine is not the warm one)"; exit 1; }; }

case "${1:-}" in
build)
  { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
    nproc; } >>"$O/e2e.log" 2>&1
  stamp "model: random Llama-3-8B shapes, f16 (beside the build)"
  ( PYTHONPATH="/tmp/site:$PWD" python3 scripts/make_random_llama_gguf.py "$F16" \
      >"$O/make-model.log" 2>&1; echo "model exit $?" >>"$O/make-model.log" ) &
  model_pid=$!
  stamp "build + ISA proof (scripts/isa_sm90_run.sh)"
  OUT="$O/isa" bash scripts/isa_sm90_run.sh >"$O/isa-run.out" 2>&1
  stamp "isa_sm90_run exit $?"; pack build
  cat /tmp/llama/llama_cpp/lib/kvstudio-kernel.txt >>"$O/e2e.log" 2>&1
  wait "$model_pid"; tail -3 "$O/make-model.log" | tee -a "$O/e2e.log"
  stamp "quantize to Q4_K_M"
  PYTHONPATH="/tmp/llama:/tmp/site:$PWD" python3 scripts/quantize_gguf.py "$F16" "$Q4" \
    2>>"$O/quantize.log" | tee -a "$O/e2e.log"
  ls -la /tmp/*.gguf >>"$O/e2e.log"
  ;;
patched)
  need /tmp/llama
  bench /tmp/llama "$Q4" patched-q4-32k 32768 --chunks 0; pack patched
  bench /tmp/llama "$F16" patched-f16-32k 32768; pack patched
  bench /tmp/llama "$Q4" patched-q4-128k 131072 --chunks 0 --repetitions 2; pack patched
  bench /tmp/llama "$F16" patched-f16-128k 131072 --chunks 0 --repetitions 2
  ;;
upstream)
  need /tmp/llama
  mkdir -p /tmp/src-up && tar xzf "$SDIST" -C /tmp/src-up
  stamp "build upstream"
  CMAKE_ARGS="$(python3 -m kernels cmake-args cuda-hopper)" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    python3 -m pip install --no-cache-dir --no-build-isolation --no-deps --target /tmp/llama-up \
    /tmp/src-up/llama_cpp_python-0.3.36 >"$O/build-upstream.log" 2>&1
  stamp "build upstream exit $?"; tail -3 "$O/build-upstream.log" >>"$O/e2e.log"; pack upstream
  bench /tmp/llama-up "$Q4" upstream-q4-32k 32768 --chunks 0; pack upstream
  bench /tmp/llama-up "$F16" upstream-f16-32k 32768
  ;;
upstream-deep)
  need /tmp/llama-up
  bench /tmp/llama-up "$Q4" upstream-q4-128k 131072 --chunks 0 --repetitions 2; pack upstream-deep
  bench /tmp/llama-up "$F16" upstream-f16-128k 131072 --chunks 0 --repetitions 2
  ;;
*) echo "usage: $0 build|patched|upstream|upstream-deep" >&2; exit 2 ;;
esac
stamp "done $1"; pack "$1"
