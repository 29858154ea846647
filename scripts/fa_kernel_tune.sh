#!/usr/bin/env bash
# Issues 15 and 26 on an H200: how fast and how correct is llama.cpp's Flash Attention with an
# 8-bit K cache, with none, some or all of our patches (kernels/patches)? (docs/kernel-log.md.)
#
#  1. builds test-backend-ops for sm_90 with the int8-K FA pairs from the trimmed sdist in
#     .device-carry/ (CMake + Ninja, about 5 minutes on 16 cores; kept in /tmp while warm), with
#     our perf and correctness cases added (scripts/fa_tune_source.py);
#  2. for each variant in $VARIANTS (N = upstream plus the first N patches, 0 = upstream),
#     rebuilds the FA kernels (only the files whose text changed, so a warm machine rebuilds
#     nothing for the variant it built last) and
#     - times FLASH_ATTN_EXT at Llama-3-8B shapes, depths 4k-128k, decode (NB=1 tokens; NB=512
#       or "(1|512)" for prompt batches) -> perf.txt; PERF_FILTER replaces the whole pattern;
#     - for the variants in $EVAL_VARIANTS, checks every FLASH_ATTN_EXT case with a q8_0 K
#       (llama.cpp's own and ours: every batch size, so the prompt kernels too) and the one-token
#       ones with f16 K against the CPU -> eval.txt (counts per head size, K/V and batch, from
#       scripts/fa_eval_summary.py) and eval-VARIANT.log.xz (every case's line);
#     - reads the decode kernels at depth 32,768 with Nsight Compute (time, DRAM and L2 bytes,
#       % of DRAM and L2 peak) -> ncu.csv (NCU=0 skips it; NCU_SHAPE picks the shape), and the
#       vector kernels' registers, stack and local memory -> res-usage.txt, and the local-memory
#       loads and stores in their machine code (cuobjdump -sass) -> spills.txt.
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
VARIANTS="${VARIANTS:-0 3}"

if [ ! -d "$SRC" ]; then
  mkdir -p /tmp/src && tar xzf .device-carry/llama_cpp_python-0.3.36.tar.gz -C /tmp/src
fi
# Every variant starts from upstream's sources (a warm machine keeps /tmp/src between calls): the
# edits are made in a staging copy and only files whose text differs are copied into the tree, so
# ninja rebuilds only what changed.
PRISTINE=/tmp/src/pristine
STAGE=/tmp/src/stage
EDITED="ggml/src/ggml-cuda/fattn-vec.cuh ggml/src/ggml-cuda/fattn-common.cuh tests/test-backend-ops.cpp"
if [ ! -d "$PRISTINE" ]; then
  for f in $EDITED; do mkdir -p "$PRISTINE/$(dirname "$f")"; cp "$SRC/$f" "$PRISTINE/$f"; done
fi
# stage N: upstream's files plus the first N patches and our test cases, into the tree.
stage() {
  rm -rf "$STAGE" && cp -r "$PRISTINE" "$STAGE" || return 1
  python3 -m kernels.patch_set apply "$STAGE" "$1" >>"$LOG" || return 1
  python3 scripts/fa_tune_source.py "$STAGE" perf-cases && python3 scripts/fa_tune_source.py "$STAGE" eval-cases || return 1
  for f in $EDITED; do cmp -s "$STAGE/$f" "$SRC/$f" || cp "$STAGE/$f" "$SRC/$f"; done
}
stage "${VARIANTS%% *}" || { stamp "staging failed"; exit 1; }
if [ ! -f "$B/build.ninja" ]; then
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    nvcc --version | tail -2; nproc; } >>"$LOG" 2>&1
  stamp "configure"
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "-DGGML_CUDA_FA_QUANTS=q8_0-f16;q8_0-q8_0;f16-f16" \
    -DLLAMA_BUILD_TESTS=ON -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >>"$LOG" 2>&1 || { stamp "configure failed"; exit 1; }
fi

for variant in $VARIANTS; do
  stage "$variant" || { stamp "staging $variant failed"; exit 1; }
  stamp "build $variant"
  cmake --build "$B" --target test-backend-ops -j "$(nproc)" >"$OUT/build.log" 2>&1 \
    || { stamp "build $variant failed"; tail -40 "$OUT/build.log"; exit 1; }
  if [ "${PERF:-1}" = 1 ]; then  # PERF=0: no timing (a correctness or Nsight Compute call)
    stamp "perf $variant"
    echo "== variant $variant" >>"$OUT/perf.txt"
    "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "${PERF_FILTER:-${PERF_SHAPE:-$SHAPE},kv=[0-9]+,nb=${NB:-1},}" 2>&1 \
      | grep -E "FLASH_ATTN_EXT\(" >>"$OUT/perf.txt"
  fi
  if [[ " ${EVAL_VARIANTS:-} " == *" $variant "* ]]; then
    stamp "eval $variant"
    echo "== variant $variant" >>"$OUT/eval.txt"
    timeout "${EVAL_S:-420}" "$B/bin/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT \
      -p "${EVAL_FILTER:-type_K=q8_0|nb=1,.*type_K=f16}" >/tmp/eval.txt 2>&1; echo "exit $?" >>"$OUT/eval.txt"
    python3 scripts/fa_eval_summary.py /tmp/eval.txt >>"$OUT/eval.txt"
    xz -9 -c /tmp/eval.txt >"$OUT/eval-$variant.log.xz"
  fi
  cuobjdump -res-usage "$B/bin/libggml-cuda.so" 2>/dev/null | grep -A1 "flash_attn_ext_vec" \
    | grep -v "^--" | sed "s/^/$variant /" >>"$OUT/res-usage.txt"
  # Local memory in the vector kernels' machine code: LDL/STL per kernel (0 = no spills).
  for obj in "$B"/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/fattn-vec-instance-*.o; do
    cuobjdump -sass "$obj" 2>/dev/null | awk -v v="$variant" '
      /Function : / { f = $3 } f ~ /flash_attn_ext_vec/ && /[^A-Z](LDL|STL)[. ]/ { n[f]++ }
      /Function : / && $3 ~ /flash_attn_ext_vec/ { seen[$3] = 1 }
      END { for (k in seen) print v, (k in n ? n[k] : 0), k }' >>"$OUT/spills.txt"
  done
  [ "${NCU:-1}" = 0 ] && continue
  stamp "ncu $variant"
  for kv in "f16,type_V=f16" "q8_0,type_V=f16" "q8_0,type_V=q8_0"; do
    ncu --clock-control none --kernel-name regex:flash_attn_ext_vec -c 6 --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
      "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
      -p "${NCU_SHAPE:-$SHAPE},kv=32768,nb=1,.*type_K=$kv" 2>>"$LOG" | grep -E '^"' | sed "s/^/$variant,/" >>"$OUT/ncu.csv"
  done
done
stamp "done"
grep -E "kv=32768,nb=1," "$OUT/perf.txt" | sed -E 's/hsk=128,hsv=128,nh=8,nr23=\[4,1\],//; s/,permute.*\):/):/'
