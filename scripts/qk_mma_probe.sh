#!/usr/bin/env bash
# Issue 26, item 2 on an H200: does an int8 Q·K with q8_0's per-32 scales beat the f16 tensor-core
# product the prompt kernel uses? Builds and runs kernels/probes/qk_mma_probe.cu (no llama.cpp
# build needed: seconds of device time) and writes what it prints to $OUT/qk-probe.txt.
# Usage (device machine): bash scripts/qk_mma_probe.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/qk_mma_probe kernels/probes/qk_mma_probe.cu
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2 | head -1
  /tmp/qk_mma_probe "${1:-16384}"; } 2>&1 | tee "$OUT/qk-probe.txt"
