"""Quantize a GGUF with llama.cpp's own quantizer (llama_model_quantize), as users' models are.

    python3 scripts/quantize_gguf.py IN.gguf OUT.gguf [--type q4_k_m] [--threads N]

The GPU reference run uses it to turn the random f16 Llama-3-8B-shaped model into the Q4_K_M
one whose decode speed is what users see (docs/gpu-reference-run.md).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

TYPES = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--type", choices=sorted(TYPES), default="q4_k_m")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    if not os.path.isfile(args.source):
        print(f"No GGUF file at {args.source}.", file=sys.stderr)
        return 2

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = args.threads
    params.ftype = getattr(llama_cpp, TYPES[args.type])
    started = time.perf_counter()
    status = llama_cpp.llama_model_quantize(
        args.source.encode(), args.out.encode(), ctypes.byref(params)
    )
    if status != 0:
        print(f"llama.cpp could not quantize {args.source} (status {status}).", file=sys.stderr)
        return 1
    size = os.path.getsize(args.out) / 2**30
    print(f"{args.out}: {args.type}, {size:.2f} GiB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
