"""One decode step at a context depth, timed and bracketed for Nsight Compute (issue 26: what
the 8-bit KV modes spend per token outside the attention op; docs/kernel-log.md, N).

Loads the model as the app's bench does (every layer on the GPU, Flash Attention, the K/V
types asked for), fills `--depth` random tokens, times `--tokens` single-token decodes, each
synchronized (the median is the wall time a token, as `kvstudio bench` takes it), then decodes
`--profile` more between cuProfilerStart and cuProfilerStop, so that
`ncu --profile-from-start off` measures those alone: every kernel of a decode step, by name.
Writes one JSON object to `--out`: the mode, depth, each timed token's ms and their median.

    LD_LIBRARY_PATH=/tmp/bin-7 ncu --profile-from-start off --metrics gpu__time_duration.sum \\
      --csv python3 scripts/decode_step_profile.py MODEL --kv q8_0/q8_0 --depth 32768 --out x.json

Without the CUDA driver loaded (a CPU build) it still fills, times and decodes, and says so.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

# llama_cpp before anything that imports numpy: the other order crashed model loads on the H200
# (docs/llama-cpp-notes.md).
import llama_cpp

from app.engine.bench import decode_span, synchronize
from app.engine.loaded_libraries import loaded_file
from app.engine.loader import weights_repacked
from app.engine.quality import clear_cache, decode_batch
from app.kv.kv_types import KvMode
from app.platform.errors import AppError

# The CUDA driver, mapped whenever llama.cpp uses CUDA, whether it linked the runtime statically
# or not: its cuProfilerStart/Stop act on the context current on this thread, which is the
# one llama.cpp decodes with (it sets its device on the thread that calls llama_decode).
CUDA_DRIVER = re.compile(r"libcuda\.so(\.\d+)*")


def _decode_one(llm: llama_cpp.Llama, token: int, depth: int) -> float:
    """ms of one synchronized decode at `depth`; its cell is removed again, so every step
    sees `depth` cells."""
    start = time.perf_counter()
    decode_batch(llm, [token], depth, "last")
    synchronize(llm)
    ms = (time.perf_counter() - start) * 1000
    llm._ctx.kv_cache_seq_rm(0, depth, -1)
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--kv", default="q8_0/q8_0", help="K/V types, as kvstudio's modes")
    parser.add_argument("--depth", type=int, default=32768)
    parser.add_argument("--ctx", type=int, default=0, help="default: depth + 2048")
    parser.add_argument("--tokens", type=int, default=64, help="decodes timed")
    parser.add_argument("--profile", type=int, default=2, help="decodes bracketed for ncu")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        mode = KvMode.parse(args.kv)
    except AppError as error:
        print(error, file=sys.stderr)
        return 2
    if args.depth < 0 or args.tokens < 1 or args.profile < 0:
        print(
            "The depth and the profiled decodes must be 0 or more, the timed ones 1 or more.",
            file=sys.stderr,
        )
        return 2
    n_ctx = args.ctx or args.depth + 2048
    if args.depth + args.tokens + args.profile > n_ctx:
        print(f"Depth {args.depth} and the decodes do not fit {n_ctx} tokens.", file=sys.stderr)
        return 2
    # Without repacked weights, as the app loads by default (llama.cpp's AMX kernels crash).
    with weights_repacked(False):
        llm = llama_cpp.Llama(
            model_path=str(args.model), n_ctx=n_ctx, n_gpu_layers=-1, flash_attn=True,
            type_k=mode.k.ggml_id, type_v=mode.v.ggml_id, n_batch=2048, n_ubatch=512,
            logits_all=False, verbose=False,
        )  # fmt: skip
    rng = random.Random(0)
    tokens = [rng.randrange(llm.n_vocab()) for _ in range(args.depth + 1)]
    clear_cache(llm)
    decode_span(llm, tokens[: args.depth], 0, None)
    token = tokens[-1]
    timed = [_decode_one(llm, token, args.depth) for _ in range(args.tokens)]
    # The CUDA driver llama.cpp loaded (none on a CPU build).
    driver = loaded_file(CUDA_DRIVER)
    profiler = ctypes.CDLL(str(driver)) if driver is not None else None
    if profiler is None:
        print(
            "No CUDA driver in this process: the profiled decodes ran unbracketed.", file=sys.stderr
        )
    else:
        profiler.cuProfilerStart()
    for _ in range(args.profile):
        _decode_one(llm, token, args.depth)
    if profiler is not None:
        profiler.cuProfilerStop()
    result = {
        "mode": mode.label,
        "depth": args.depth,
        "n_ctx": n_ctx,
        "ms_per_token": round(statistics.median(timed), 4),
        "ms_each": [round(t, 4) for t in timed],
        "profiled_tokens": args.profile,
        "cuda_driver": str(driver or ""),
    }
    args.out.write_text(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "ms_each"}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
