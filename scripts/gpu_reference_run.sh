#!/usr/bin/env bash
# The reference run on an NVIDIA GPU machine (used with an H200; see docs/gpu-reference-run.md).
#   scripts/gpu_reference_run.sh build   build llama-cpp-python (CUDA, sm_90, int8-K FA pairs) into .device-build/
#   scripts/gpu_reference_run.sh bench   write a random Llama-3-8B-shaped GGUF, verify the int8-K pair, run
#                                        `kvstudio bench` at n_ctx 131072 / depth 32768 with an NVML recording
# Results go to $OUT (or ./out). Needs: python3 with numpy, jinja2, nvidia-ml-py, scikit-build-core, cmake;
# the trimmed llama-cpp-python sdist and wheels of diskcache and gguf in .device-carry/ (no network there).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
CTX="${CTX:-131072}"; DEPTH="${DEPTH:-32768}"
BUILD="$PWD/.device-build/llama"

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl
export PYTHONPATH="$BUILD:/tmp/site:$PWD" PYTHONUNBUFFERED=1

case "${1:-}" in
build)
  [ -d .device-carry/llama_cpp_python-0.3.36 ] || tar xzf .device-carry/llama_src.tar.gz -C .device-carry
  start=$(date +%s)
  python3 -m kernels build cuda-hopper --source .device-carry/llama_cpp_python-0.3.36 --target "$BUILD" --jobs "$(nproc)" 2>&1 | tail -3
  echo "build seconds: $(( $(date +%s) - start ))"
  python3 -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
  ;;
bench)
  model=/tmp/llama3-8b-shapes-random-f16.gguf
  [ -f "$model" ] || python3 scripts/make_random_llama_gguf.py "$model"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/gpu.txt"
  python3 -m app doctor | tee "$OUT/doctor.txt"
  python3 -m kernels verify "$model" --kv q8_0/f16 --ctx 8192 2>"$OUT/verify.log" | tee "$OUT/verify.txt"
  python3 -m app bench "$model" --ctx "$CTX" --depth "$DEPTH" --prompt-tokens 2048 --gen-tokens 128 \
      --json --csv "$OUT/bench.csv" --record "$OUT/nvml-recording.json" >"$OUT/bench.json" 2>"$OUT/bench.log"
  python3 -m app bench --results "$OUT/bench.json" | tee "$OUT/bench.txt"
  ;;
*) echo "usage: $0 build|bench" >&2; exit 2 ;;
esac
