#!/usr/bin/env bash
# Issue 15 on an H200: how fast is llama.cpp's Flash Attention vector kernel with an 8-bit K cache,
# with none, some or all of our patches (kernels/patches)? (docs/kernel-log.md has the why.)
#
#  1. builds test-backend-ops for sm_90 with the int8-K FA pairs from the trimmed sdist in
#     .device-carry/ (CMake + Ninja, about 5 minutes on 16 cores; kept in /tmp while warm);
#  2. for each variant in $VARIANTS (N = upstream plus the first N patches, 0 = upstream),
#     rebuilds the FA kernels and
#     - times FLASH_ATTN_EXT at Llama-3-8B shapes, depths 4k-128k, decode (NB=1 tokens; NB=512
#       or "(1|512)" for prompt batches) -> perf.txt,
#     - for the variants in $EVAL_VARIANTS, checks test-backend-ops' own FLASH_ATTN_EXT cases
#       with q8_0 K, and the one-token ones with f16 K, against the CPU -> eval.txt,
#     - reads the decode kernels at depth 32,768 with Nsight Compute (time, DRAM and L2 bytes,
#       % of DRAM and L2 peak) -> ncu.csv, and their registers -> res-usage.txt.
#  PERF_SHAPE (a test-backend-ops -p pattern) times other head sizes too, e.g.
#  'hsk=(64|128|256),hsv=(64|128|256),nh=8,nr23=\[4,1\]'.
#  Every variant starts from upstream's sources.
# Usage (device machine): VARIANTS="2 3" EVAL_VARIANTS=3 bash scripts/fa_kernel_tune.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
LOG="$OUT/tune.log"
SRC=/tmp/src/llama_cpp_python-0.3.36/vendor/llama.cpp
B=/tmp/fa-build
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$LOG"; }
SHAPE='hsk=128,hsv=128,nh=8,nr23=\[4,1\]'

if [ ! -d "$SRC" ]; then
  mkdir -p /tmp/src && tar xzf .device-carry/llama_cpp_python-0.3.36.tar.gz -C /tmp/src
fi
# Every variant starts from upstream's sources (a warm machine keeps /tmp/src between calls).
PRISTINE=/tmp/src/pristine
EDITED="ggml/src/ggml-cuda/fattn-vec.cuh ggml/src/ggml-cuda/fattn-common.cuh tests/test-backend-ops.cpp"
if [ ! -d "$PRISTINE" ]; then
  for f in $EDITED; do mkdir -p "$PRISTINE/$(dirname "$f")"; cp "$SRC/$f" "$PRISTINE/$f"; done
fi
restore() { for f in "$@"; do cmp -s "$PRISTINE/$f" "$SRC/$f" || cp "$PRISTINE/$f" "$SRC/$f"; done; }
restore $EDITED
python3 scripts/fa_tune_source.py "$SRC" perf-cases
if [ ! -f "$B/build.ninja" ]; then
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    nvcc --version | tail -2; nproc; } >>"$LOG" 2>&1
  stamp "configure"
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "-DGGML_CUDA_FA_QUANTS=q8_0-f16;q8_0-q8_0;f16-f16" \
    -DLLAMA_BUILD_TESTS=ON -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >>"$LOG" 2>&1 || { stamp "configure failed"; exit 1; }
fi

for variant in ${VARIANTS:-0 3}; do
  restore ggml/src/ggml-cuda/fattn-vec.cuh ggml/src/ggml-cuda/fattn-common.cuh
  python3 -m kernels.patch_set apply "$SRC" "$variant" >>"$LOG" || exit 1
  stamp "build $variant"
  cmake --build "$B" --target test-backend-ops -j "$(nproc)" >"$OUT/build.log" 2>&1 \
    || { stamp "build $variant failed"; tail -40 "$OUT/build.log"; exit 1; }
  stamp "perf $variant"
  echo "== variant $variant" >>"$OUT/perf.txt"
  "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "${PERF_SHAPE:-$SHAPE},kv=[0-9]+,nb=${NB:-1}," 2>&1 \
    | grep -E "FLASH_ATTN_EXT\(" >>"$OUT/perf.txt"
  if [[ " ${EVAL_VARIANTS:-} " == *" $variant "* ]]; then
    stamp "eval $variant"
    echo "== variant $variant" >>"$OUT/eval.txt"
    timeout "${EVAL_S:-150}" "$B/bin/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT \
      -p 'type_K=q8_0|nb=1,.*type_K=f16' >/tmp/eval.txt 2>&1; echo "exit $?" >>"$OUT/eval.txt"
    grep -E "FAIL|tests passed|Backend CUDA0" /tmp/eval.txt | head -40 >>"$OUT/eval.txt"
    grep -cE ": OK" /tmp/eval.txt | sed 's/^/cases OK: /' >>"$OUT/eval.txt"
  fi
  stamp "ncu $variant"
  for kv in "f16,type_V=f16" "q8_0,type_V=f16" "q8_0,type_V=q8_0"; do
    ncu --clock-control none --kernel-name regex:flash_attn_ext_vec -c 6 --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
      "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
      -p "$SHAPE,kv=32768,nb=1,.*type_K=$kv" 2>>"$LOG" | grep -E '^"' | sed "s/^/$variant,/" >>"$OUT/ncu.csv"
  done
  cuobjdump -res-usage "$B/bin/libggml-cuda.so" 2>/dev/null | grep -A1 "flash_attn_ext_vecILi128ELi1E" \
    | sed "s/^/$variant /" >>"$OUT/res-usage.txt"
done
stamp "done"
grep -E "kv=32768,nb=1," "$OUT/perf.txt" | sed -E 's/hsk=128,hsv=128,nh=8,nr23=\[4,1\],//; s/,permute.*\):/):/'
