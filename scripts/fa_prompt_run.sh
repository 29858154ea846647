#!/usr/bin/env bash
# Issue 26, item 2 on an H200 (docs/kernel-log.md, "Issue 26 D"): does patch 0005 (llama.cpp's MMA
# Flash Attention kernel reads a q8_0 K in place, no f16 copy of K) keep every q8_0-K case right,
# shrink the compute buffer to f16's and keep prompt speed?
#
# One CMake tree (/tmp/fa-build, kept while the machine is warm) builds test-backend-ops with our
# perf and correctness cases (scripts/fa_tune_source.py) and libllama, from the trimmed sdist in
# .device-carry/ with the first N patches (N = 5: all; 4: before 0005). The Python side of
# llama-cpp-python is laid out as pip installs it (/tmp/llamapkg/llama_cpp, its lib/ a link to
# the tree's bin/), so `python3 -m app bench` runs those very libraries, and names their kernel
# (kvstudio-kernel.txt). Steps, in order, each "name:N":
#   build:N   apply upstream + N patches to the tree (only changed files are copied in, so ninja
#             rebuilds only what they touch) and build test-backend-ops and llama
#   perf:N    FLASH_ATTN_EXT prompt batches (512 tokens) at Llama-3-8B shapes, depths 4k-128k,
#             f16/f16, q8_0/f16, q8_0/q8_0, with test-backend-ops perf -> perf-N.txt
#   bench:N   kvstudio bench on the random Llama-3-8B-shaped f16 model (written beside the first
#             build), context 131,072, depth 32,768, 2,048 prompt and 128 decoded tokens, the
#             three modes with quality -> bench-N.json/.csv/.log/-recording.json (BENCH_DEPTH and BENCH_CTX
#             change the depth and the context: 131072 and 133120 for the deepest;
#             BENCH_WEIGHTS=q4_k_m benches the model quantized to Q4_K_M, made once by
#             scripts/quantize_gguf.py with this build's libllama)
#   keep:N    copy the tree's bin/ (test-backend-ops and the libraries of build N) to /tmp/bin-N
#   perfk:N   test-backend-ops perf from /tmp/bin-N (so two builds can be timed in turn, A B A B)
#             -> perfk-N.txt (perfk-N$PERFK_TAG.txt, its lines labelled N$PERFK_TAG), appended per
#             turn; PERF_FILTER picks the cases as for perf
#   perfc:N-V perfk:N with KVSTUDIO_FA_V_CONVERT=V (candidate H: how a q8_0 V value becomes a float,
#             picked at run time) -> perfk-N-cV.txt, its lines labelled N-cV, appended per turn
#   evalc:N-V evalk:N with KVSTUDIO_FA_V_CONVERT=V -> eval-N-cV.txt
#   perfv:V   test-backend-ops perf from the tree's bin/ with KVSTUDIO_FA_VEC_VARIANT=V (the run-22
#             experiment's patch picks a variant of the 4-head q8_0-K kernel at run time, so the
#             variants of one build are timed in turn, A B C A B C) -> perfv-V.txt, appended per
#             turn, with the occupancy and grid each launch shape ran at -> perfv-V-launch.txt
#   evalv:V   eval with KVSTUDIO_FA_VEC_VARIANT=V (EVAL_FILTER as for eval) -> eval-vV.txt
#   ncuv:V    Nsight Compute on the vector kernels with KVSTUDIO_FA_VEC_VARIANT=V, q8_0/q8_0 and
#             q8_0/f16 (or the NCU_PAIRS given) at NCU_KV (default 32768) cells -> ncu-v.csv
#             (ncu-v-$NCU_KV.csv where NCU_KV is set), appended;
#             NCU_SECTIONS adds whole Nsight sections (e.g. "WarpStateStats SchedulerStats": what
#             the warps wait on) to the metrics listed
#   step:N    one decode step of the bench model at STEP_DEPTH cells (default 32768), each K/V mode
#             of STEP_MODES (default the three), from the build kept in /tmp/bin-N: the wall ms a
#             token (64 decodes, no profiler) -> step-N-DEPTH$STEP_TAG.jsonl, then every kernel of
#             STEP_PROFILE decodes (default 1) under Nsight Compute -> ncu-step-N-DEPTH$STEP_TAG.csv,
#             summed by kernel family into the log (STEP_TAG, e.g. -norot, keeps runs with a switch
#             apart; STEP_MODEL=gemma3: a random model of the starter's shapes instead, its files
#             named ...-gemma3)
#             (scripts/decode_step_profile.py, scripts/decode_step_kernels.py)
#   ops:N     test-backend-ops test of the ops in OPS (default ROPE_FWHT ROPE_SET_ROWS
#             MUL_MAT_HADAMARD FLASH_ATTN_EXT_FWHT SCALE_FWHT) from the build kept in /tmp/bin-N
#             against the CPU -> ops-N.txt
#   eval:N    (evalk:N from the build kept in /tmp/bin-N; evalbg:N in the background, from a copy
#             of bin/; evalwait waits for it)
#             every FLASH_ATTN_EXT case with a q8_0 K (llama.cpp's and ours, every batch) and the
#             f16-K ones of 1, 3 and 32 tokens against the CPU -> eval-N.txt (counts per K/V,
#             head size and batch) and eval-N.log.xz
# Patch 0005's in-place path is asked for with KVSTUDIO_FA_Q8_0_K_IN_PLACE=1 (off by default:
# prompts are slower); every step here runs with IN_PLACE (default 1) as its value, so IN_PLACE=0
# times the same build without it. (Runs 15-18 predate the switch: the path was always on.)
# XPATCH=FILE applies one more patch (a unified diff against llama.cpp, as kernels/patches) on top
# of the first N patches in build:N, for an experiment kept outside kernels/patches (XPATCH="F G":
# several, in order, each on the one before); the kernel version in kvstudio-kernel.txt is then
# `python -m kernels.patch_set version N FILE...`'s (the last file's tag)
# (kvstudio-fa.7+run32-vec-v8-candidate-b; until run 32 it ended in the whole file name, which the
# app does not take for a kernel version, so run 32's bench of the candidate says "upstream").
# TARGETS (default "test-backend-ops llama") are the CMake targets built; NO_MODEL=1 skips writing
# the bench model beside the build.
# No step starts after DEADLINE seconds (default 540: a call's limit is 600). Everything goes
# into one tar in $OUT, re-packed after each step.
# Usage (device machine, carrying .device-carry): STEPS="build:5 perf:5 bench:5" bash scripts/fa_prompt_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL="${OUT:-$PWD/out}"; O=/tmp/prompt-out; mkdir -p "$O" "$FINAL"
LOG="$O/prompt.log"
SDIST_DIR=/tmp/src/llama_cpp_python-0.3.36
SRC=$SDIST_DIR/vendor/llama.cpp
B=/tmp/fa-build
PKG=/tmp/llamapkg
MODEL=/tmp/llama3-8b-shapes-random-f16.gguf
DEADLINE="${DEADLINE:-540}"
TAR="${TAR:-prompt-run}"
export PYTHONUNBUFFERED=1 KVSTUDIO_FA_Q8_0_K_IN_PLACE="${IN_PLACE:-1}"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$LOG"; }
pack() { tar czf "$FINAL/$TAR.tar.gz" -C "$O" . ; }

[ -d "$SRC" ] || { mkdir -p /tmp/src && tar xzf .device-carry/llama_cpp_python-0.3.36.tar.gz -C /tmp/src; }
[ -d /tmp/site/huggingface_hub ] || ! ls .device-carry/whl/*.whl >/dev/null 2>&1 ||
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-carry/whl/*.whl
PRISTINE=/tmp/src/pristine-5
STAGE=/tmp/src/stage-5
# The files a patch (or XPATCH) may change: only these are staged and copied into the tree.
EDITED="ggml/src/ggml-cuda/fattn-vec.cuh ggml/src/ggml-cuda/fattn-common.cuh ggml/src/ggml-cuda/fattn-mma-f16.cuh ggml/src/ggml-cuda/fattn.cu tests/test-backend-ops.cpp"
EDITED="$EDITED ggml/src/ggml-cuda/rope.cu ggml/src/ggml-cuda/rope.cuh ggml/src/ggml-cuda/ggml-cuda.cu ggml/src/ggml-cuda/fattn.cuh"
for f in $EDITED; do  # per file: a machine kept warm from an older run of this script lacks the later ones
  [ -f "$PRISTINE/$f" ] || { mkdir -p "$PRISTINE/$(dirname "$f")" && cp "$SRC/$f" "$PRISTINE/$f"; }
done
stage() {
  rm -rf "$STAGE" && cp -r "$PRISTINE" "$STAGE" || return 1
  # shellcheck disable=SC2086  # XPATCH: one file name or several
  python3 -m kernels.patch_set apply "$STAGE" "$1" ${XPATCH:-} >>"$LOG" || return 1
  python3 scripts/fa_tune_source.py "$STAGE" perf-cases && python3 scripts/fa_tune_source.py "$STAGE" eval-cases || return 1
  for f in $EDITED; do cmp -s "$STAGE/$f" "$SRC/$f" || cp "$STAGE/$f" "$SRC/$f"; done
}

build() {
  stage "$1" || { stamp "staging $1 failed"; return 1; }
  if [ ! -f "$B/build.ninja" ]; then
    { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
      nvcc --version | tail -2; nproc; } >>"$LOG" 2>&1
    stamp "configure"
    cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 "-DGGML_CUDA_FA_QUANTS=q8_0-f16;q8_0-q8_0;f16-f16" \
      -DLLAMA_BUILD_TESTS=ON -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >>"$LOG" 2>&1 || { stamp "configure failed"; return 1; }
  fi
  if [ -z "${NO_MODEL:-}" ] && [ ! -f "$MODEL" ] && [ ! -f /tmp/model.pid ]; then
    ( PYTHONPATH="/tmp/site:$PWD" python3 scripts/make_random_llama_gguf.py "$MODEL" >"$O/make-model.log" 2>&1
      echo "model exit $?" >>"$O/make-model.log" ) &
    echo $! >/tmp/model.pid
  fi
  stamp "build $1"
  # shellcheck disable=SC2086
  cmake --build "$B" --target ${TARGETS:-test-backend-ops llama} -j "$(nproc)" >"$O/build-$1.log" 2>&1 \
    || { stamp "build $1 failed"; tail -30 "$O/build-$1.log" | tee -a "$LOG"; return 1; }
  # shellcheck disable=SC2086
  python3 -m kernels.patch_set version "$1" ${XPATCH:-} >"$B/bin/kvstudio-kernel.txt"
  mkdir -p "$PKG" && { [ -d "$PKG/llama_cpp" ] || cp -r "$SDIST_DIR/llama_cpp" "$PKG/"; } && ln -sfn "$B/bin" "$PKG/llama_cpp/lib"
  stamp "built $1: $(cat "$B/bin/kvstudio-kernel.txt")"
  cuobjdump -res-usage "$B/bin/libggml-cuda.so" 2>/dev/null | grep -A1 "flash_attn_ext_f16" | grep -v "^--" \
    | sed "s/^/$1 /" >"$O/mma-res-usage-$1.txt"
  cuobjdump -res-usage "$B/bin/libggml-cuda.so" 2>/dev/null | grep -A1 "flash_attn_ext_vec" | grep -v "^--" \
    | sed "s/^/$1 /" >"$O/vec-res-usage-$1.txt"
  # Local memory in the vector kernels' machine code: LDL/STL per kernel (0 = no spills).
  for obj in "$B"/ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/fattn-vec-instance-*.o; do
    cuobjdump -sass "$obj" 2>/dev/null | awk -v v="$1" '
      /Function : / { f = $3 } f ~ /flash_attn_ext_vec/ && /[^A-Z](LDL|STL)[. ]/ { n[f]++ }
      /Function : / && $3 ~ /flash_attn_ext_vec/ { seen[$3] = 1 }
      END { for (k in seen) print v, (k in n ? n[k] : 0), k }'
  done >"$O/vec-spills-$1.txt"
}

# The libggml-cuda that PROGRAM loads with LD_LIBRARY_PATH=FOLDER (the libraries' RUNPATH alone
# would lead to the tree's bin/, whatever was kept): cuda_library FOLDER PROGRAM
cuda_library() { LD_LIBRARY_PATH="$1" ldd "$2" | grep -o '/[^ ]*libggml-cuda\.so[.0-9]*'; }

# A step that runs a kept build finds none on a fresh machine (one given back since keep:N, as
# happened in run 28): one line in the log says so, instead of every command of the step failing.
have_kept() {
  [ -x "/tmp/bin-$1/test-backend-ops" ] && return 0
  stamp "no kept build $1 on this machine (given back since keep:$1?): build and keep:$1 first"
  return 1
}

perfk() {
  stamp "perfk $1 (/tmp/bin-$1: $(cuda_library "/tmp/bin-$1" "/tmp/bin-$1/test-backend-ops"))"
  LD_LIBRARY_PATH="/tmp/bin-$1" "/tmp/bin-$1/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
    -p "${PERF_FILTER:-hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=[0-9]+,nb=1,}" 2>&1 \
    | grep -E "FLASH_ATTN_EXT\(" | sed "s/^/$1${PERFK_TAG:-} /" >>"$O/perfk-$1${PERFK_TAG:-}.txt"
  sed -E 's/,permute.*\):/):/' "$O/perfk-$1${PERFK_TAG:-}.txt" | tail -n "${PERFK_TAIL:-16}" >>"$LOG"
}

perfv() {
  stamp "perfv $1 (KVSTUDIO_FA_VEC_VARIANT=$1, $(cat "$B/bin/kvstudio-kernel.txt"))"
  KVSTUDIO_FA_VEC_VARIANT="$1" KVSTUDIO_FA_LAUNCH_REPORT=1 "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
    -p "${PERF_FILTER:-hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(32768|131072),nb=1,}" >/tmp/perfv.txt 2>&1
  grep -E "FLASH_ATTN_EXT\(" /tmp/perfv.txt | sed "s/^/$1 /" >>"$O/perfv-$1.txt"
  grep -E "^kvstudio-" /tmp/perfv.txt | sed "s/^/$1 /" >>"$O/perfv-$1-launch.txt"
  grep -E "FLASH_ATTN_EXT\(" /tmp/perfv.txt | sed -E "s/^/$1 /; s/hsk=128,hsv=128,nh=8,nr23=\[4,1\],//; s/,mask=1.*prec=f32//; s/,permute.*\):/):/; s/ - [0-9.]+ [MG]FLOP.*//" | tee -a "$LOG"
}

ncuv() {
  stamp "ncuv $1"
  # NCU_BIN: the folder whose test-backend-ops and libraries are profiled (default the tree's
  # bin/; /tmp/bin-N for a build kept with keep:N, the variant label then naming the build);
  # NCU_PAIRS: the K/V pairs profiled, as "K,type_V=V" words (default: the two q8_0-K ones);
  # NCU_KERNELS: the kernels' name regex (default flash_attn_ext_vec; with
  # "flash_attn_ext_vec|flash_attn_combine_results" also the step joining the sequence's parts,
  # with NCU_COUNT=8 for both kernels of 4 launches)
  # shellcheck disable=SC2086
  for kv in ${NCU_PAIRS:-q8_0,type_V=q8_0 q8_0,type_V=f16}; do
    # shellcheck disable=SC2046
    LD_LIBRARY_PATH="${NCU_BIN:-$B/bin}" KVSTUDIO_FA_VEC_VARIANT="$1" ncu --clock-control none --kernel-name "regex:${NCU_KERNELS:-flash_attn_ext_vec}" -c "${NCU_COUNT:-4}" --csv \
      $(for s in ${NCU_SECTIONS:-}; do printf -- '--section %s ' "$s"; done) \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,sm__inst_executed.sum \
      "${NCU_BIN:-$B/bin}/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
      -p "hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=${NCU_KV:-32768},nb=1,.*type_K=$kv" 2>>"$LOG" | grep -E '^"' | sed "s/^/$1,/" >>"$O/ncu-v${NCU_KV:+-$NCU_KV}.csv"
  done
  python3 - "$O/ncu-v${NCU_KV:+-$NCU_KV}.csv" "$1" <<'PY' | tee -a "$LOG"
import csv
import sys

for row in csv.reader(open(sys.argv[1])):
    # variant, then ncu's columns: ID, process, name, host, kernel, ..., metric name (13), unit,
    # value (15), and with NCU_SECTIONS the rules' descriptions after them
    if len(row) > 15 and row[0] == sys.argv[2] and row[1] != "ID":
        print(row[0], row[1], row[5].split(">(")[0].replace("void flash_attn_ext_vec", "")[-60:], row[13], row[15])
PY
}

step() {
  local bin="/tmp/bin-$1" depth="${STEP_DEPTH:-32768}" profiled="${STEP_PROFILE:-1}" kv model="$MODEL"
  local tag="$1-${STEP_DEPTH:-32768}${STEP_TAG:-}"
  if [ "${STEP_MODEL:-}" = gemma3 ]; then  # Gemma 3 270M's graph (candidate I), written in seconds
    model=/tmp/gemma3-270m-shapes-random-f16.gguf tag="$tag-gemma3"
    [ -f "$model" ] || PYTHONPATH="/tmp/site:$PWD" python3 scripts/make_random_gemma3_gguf.py "$model" >>"$LOG" 2>&1
  else
    model_ready
  fi
  ln -sfn "$bin" "$PKG/llama_cpp/lib"
  for kv in ${STEP_MODES:-f16/f16 q8_0/f16 q8_0/q8_0}; do
    stamp "step $1 $kv at $depth cells"
    LD_LIBRARY_PATH="$bin" PYTHONPATH="$PKG:/tmp/site:$PWD" python3 scripts/decode_step_profile.py \
      "$model" --kv "$kv" --depth "$depth" --profile 0 --out /tmp/step.json 2>>"$LOG" \
      && cat /tmp/step.json >>"$O/step-$tag.jsonl"
    # 4 unprofiled decodes first: llama.cpp captures its CUDA graph on the first ones, so the
    # profiled step launches what every later token does.
    LD_LIBRARY_PATH="$bin" PYTHONPATH="$PKG:/tmp/site:$PWD" ncu --profile-from-start off \
      --clock-control none --metrics gpu__time_duration.sum --csv \
      python3 scripts/decode_step_profile.py "$model" --kv "$kv" --depth "$depth" --tokens 4 \
      --profile "$profiled" --out /tmp/step-ncu.json 2>>"$LOG" | grep -E '^"' | sed "s|^|$1,$kv,|" >>"$O/ncu-step-$tag.csv"
  done
  python3 scripts/decode_step_kernels.py "$O/ncu-step-$tag.csv" "$O/step-$tag.jsonl" "$profiled" | tee -a "$LOG"
}

perf() {
  stamp "perf $1"
  "$B/bin/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT \
    -p "${PERF_FILTER:-hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=[0-9]+,nb=512,}" 2>&1 \
    | grep -E "FLASH_ATTN_EXT\(" | sed "s/^/$1 /" >"$O/perf-$1.txt"
  sed -E 's/hsk=128,hsv=128,nh=8,nr23=\[4,1\],//; s/,permute.*\):/):/' "$O/perf-$1.txt" | tee -a "$LOG"
}

# The bench model, written in the background by the first build (a later call of the script
# cannot wait for that process, so it waits for its log's last line).
model_ready() {
  if [ -f /tmp/model.pid ]; then wait "$(cat /tmp/model.pid)" 2>/dev/null; fi
  while [ ! -f "$O/make-model.log" ] || ! grep -q "model exit" "$O/make-model.log"; do
    [ -f "$MODEL" ] && break; sleep 2; done
  tail -2 "$O/make-model.log" >>"$LOG" 2>/dev/null
}

bench() {
  # before model_ready, which on a fresh machine would wait for a model no build is making
  [ -d "/tmp/bin-$1" ] || [ -e "$PKG/llama_cpp/lib/libllama.so" ] ||
    { stamp "bench $1: no build on this machine (given back?): build first"; return 1; }
  model_ready
  local model="$MODEL"
  if [ "${BENCH_WEIGHTS:-f16}" = q4_k_m ]; then
    # The weights users run (and the issue's reference run measured): the f16 model quantized
    # once by llama.cpp's own quantizer, from this build's libllama.
    model=/tmp/llama3-8b-shapes-random-q4_k_m.gguf
    if [ ! -f "$model" ]; then
      stamp "quantize to Q4_K_M"
      PYTHONPATH="$PKG:/tmp/site:$PWD" python3 scripts/quantize_gguf.py "$MODEL" "$model" \
        >>"$LOG" 2>"$O/quantize.log" || { stamp "quantize failed"; return 1; }
    fi
  fi
  # bench:N benches build N where keep:N kept it, else what lib/ links to (the tree's bin/ after a
  # build, or the kept build a step ran last). The libraries' RUNPATH is the tree's bin/, so
  # without LD_LIBRARY_PATH libllama from /tmp/bin-N loads the libggml-cuda built last, whatever
  # the link says: runs 32-33 benched a kept build that way.
  if [ -d "/tmp/bin-$1" ]; then ln -sfn "/tmp/bin-$1" "$PKG/llama_cpp/lib"; fi
  local lib; lib="$(readlink -f "$PKG/llama_cpp/lib")"
  stamp "bench $1 ($model; $(cuda_library "$lib" "$lib/libllama.so"))"
  LD_LIBRARY_PATH="$lib" PYTHONPATH="$PKG:/tmp/site:$PWD" python3 -m app bench "$model" --ctx "${BENCH_CTX:-131072}" --depth "${BENCH_DEPTH:-32768}" \
    --prompt-tokens 2048 --gen-tokens 128 --json --csv "$O/bench-$1.csv" --force \
    --record "$O/bench-$1-recording.json" >"$O/bench-$1.json" 2>"$O/bench-$1.log"
  stamp "bench $1 exit $?"
  PYTHONPATH="/tmp/site:$PWD" python3 -m app bench --results "$O/bench-$1.json" | tee -a "$LOG"
  python3 - "$O/bench-$1.json" <<'EOF' | tee -a "$LOG"
import json, sys
run = json.load(open(sys.argv[1]))
print("fa_kernel", run.get("fa_kernel"))
for m in run["modes"]:
    print(m["mode"], "compute buffer", m["compute_buffer_mib"], "MiB; KV saved", m["kv_saving_mib"],
          "peak saved", m["peak_saving_mib"], "=", m["peak_saving_of_kv_saving_percent"], "%",
          "| by buffer:", run.get("compute_buffers", {}).get(m["mode"]))
EOF
}

# ops:N: test-backend-ops' correctness cases of the ops in OPS (default the fused RoPE + rotation of
# candidate F, the attention op storing its output rotated of candidate G, Q's SCALE + rotation of
# candidate I, and what they stand in for), the build kept in /tmp/bin-N against the CPU -> ops-N.txt
ops() {
  local bin="/tmp/bin-$1" op
  for op in ${OPS:-ROPE_FWHT ROPE_SET_ROWS MUL_MAT_HADAMARD FLASH_ATTN_EXT_FWHT SCALE_FWHT}; do
    stamp "ops $1 $op ($(cuda_library "$bin" "$bin/test-backend-ops"))"
    # test-backend-ops colours OK and FAIL: plain text kept, one line per case
    LD_LIBRARY_PATH="$bin" timeout 300 "$bin/test-backend-ops" test -b CUDA0 -o "$op" 2>&1 \
      | sed 's/\x1b\[[0-9;]*m//g' >"/tmp/ops-$1-$op.txt"
    echo "$op: $(grep -cE "^  $op\(.*\): OK$" "/tmp/ops-$1-$op.txt") OK," \
      "$(grep -cE "^  $op\(.*FAIL" "/tmp/ops-$1-$op.txt") failed; $(grep -E 'tests passed' "/tmp/ops-$1-$op.txt")" | tee -a "$LOG"
    grep -E "^  $op\(" "/tmp/ops-$1-$op.txt" | sed "s/^/$1/" >>"$O/ops-$1.txt"
  done
}

evaluate() {  # evaluate N [BIN]: BIN holds test-backend-ops and the libraries (default: the tree's)
  local bin="${2:-$B/bin}"
  stamp "eval $1 ($bin)"
  LD_LIBRARY_PATH="$bin" timeout "${EVAL_S:-420}" "$bin/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT \
    -p "${EVAL_FILTER:-type_K=q8_0|nb=(1|3|32),.*type_K=f16}" >"/tmp/eval-$1.txt" 2>&1
  echo "exit $?" >"$O/eval-$1.txt"
  python3 scripts/fa_eval_summary.py "/tmp/eval-$1.txt" >>"$O/eval-$1.txt"
  xz -9 -c "/tmp/eval-$1.txt" >"$O/eval-$1.log.xz"
  stamp "eval $1 done"; tail -12 "$O/eval-$1.txt" | tee -a "$LOG"
}

for step in ${STEPS:-build:5 perf:5 bench:5}; do
  if [ $(( $(date +%s) - t0 )) -gt "$DEADLINE" ]; then stamp "deadline: $step not started"; break; fi
  what=${step%%:*}; n=${step#*:}
  case "$what" in
    build) build "$n" || { pack; exit 1; } ;;
    perf) perf "$n" ;;
    bench) bench "$n" ;;
    eval) evaluate "$n" ;;
    evalk) have_kept "$n" && evaluate "$n" "/tmp/bin-$n" ;;  # a build kept with keep:N
    keep) rm -rf "/tmp/bin-$n" && cp -r "$B/bin" "/tmp/bin-$n" ;;
    perfk) have_kept "$n" && perfk "$n" ;;
    perfc) have_kept "${n%-*}" && KVSTUDIO_FA_V_CONVERT="${n##*-}" PERFK_TAG="-c${n##*-}" perfk "${n%-*}" ;;
    evalc) have_kept "${n%-*}" && KVSTUDIO_FA_V_CONVERT="${n##*-}" evaluate "${n%-*}-c${n##*-}" "/tmp/bin-${n%-*}" ;;
    step) have_kept "$n" && step "$n" ;;
    ops) have_kept "$n" && ops "$n" ;;
    perfv) perfv "$n" ;;
    evalv) KVSTUDIO_FA_VEC_VARIANT="$n" evaluate "v$n" ;;
    ncuv) ncuv "$n" ;;
    # evalbg:N runs eval:N from a copy of the tree's bin/ in the background (the next build may
    # replace the tree's libraries meanwhile); evalwait waits for it. Nothing timed runs between.
    evalbg) rm -rf "/tmp/bin-$n" && cp -r "$B/bin" "/tmp/bin-$n" && { evaluate "$n" "/tmp/bin-$n" & echo $! >/tmp/eval.pid; } ;;
    evalwait) [ -f /tmp/eval.pid ] && wait "$(cat /tmp/eval.pid)"; rm -f /tmp/eval.pid ;;
    *) stamp "unknown step $step" ;;
  esac
  pack
done
stamp "done"
pack
