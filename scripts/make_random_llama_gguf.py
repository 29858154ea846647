"""Write a random-weight GGUF with Llama-3-8B shapes, for memory and speed benchmarks.

The weights are random (the model talks nonsense), but every tensor has the shape and
type of a real Llama-3-8B, so llama.cpp allocates, computes and caches exactly what it
would for the real model: KV cache bytes, compute buffers and kernel timings are real.

One random array is made per tensor shape and reused for every layer, so the 13.5 GiB
file is written at disk speed (about a minute) instead of spending minutes in the RNG.

    # 8B shapes, synthetic vocab:
    python scripts/make_random_llama_gguf.py out.gguf
    python scripts/make_random_llama_gguf.py out.gguf --vocab-gguf ggml-vocab-llama-spm.gguf
    # a few MB, for tests:
    python scripts/make_random_llama_gguf.py tiny.gguf --layers 2 --vocab small
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from app.models.random_model import write_model

log = logging.getLogger("make_random_llama_gguf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--layers", type=int, default=None, help="number of layers (default 32)")
    parser.add_argument(
        "--vocab",
        choices=("full", "small"),
        default="full",
        help="'small': tiny shapes and a 512-token synthetic vocabulary (tests)",
    )
    parser.add_argument(
        "--vocab-gguf",
        type=Path,
        default=None,
        help="copy the tokenizer from this vocab-only GGUF "
        "(e.g. vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.vocab_gguf is not None and not args.vocab_gguf.is_file():
        print(f"make_random_llama_gguf: no such file: {args.vocab_gguf}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    out = write_model(args.out, args.layers, args.vocab, args.vocab_gguf, args.seed)
    size = out.stat().st_size
    log.info("wrote %s: %.2f GiB in %.1f s", out, size / 2**30, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
