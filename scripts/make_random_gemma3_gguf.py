"""Write a random-weight GGUF with the layer shapes of Gemma 3 270M (the starter model), for the
GPU runs of kernel changes that only a Gemma graph exercises (issue 26, candidate I:
docs/kernel-log.md, Q).

The starter model cannot travel to the GPU machine (253 MB, 178 of them the embeddings of its
262,144-token vocabulary), and llama.cpp builds a model's graph from its architecture and shapes
alone: with the same architecture (gemma3), layers, heads, head size, norms and sliding window,
and random f16 weights, a decode step runs the starter's nodes in the starter's order (a test
compares the two graphs node for node). Only the vocabulary differs: 4,096 synthetic tokens.

    python scripts/make_random_gemma3_gguf.py out.gguf            # about 200 MB, seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from app.models.random_model import add_synthetic_vocab, random_weights

# Gemma 3 270M (the starter's GGUF metadata); the context of the larger Gemma 3s, so that a depth
# of 32,768 cells and more is inside it.
SHAPES = {"n_embd": 640, "n_ff": 2048, "n_head": 4, "n_head_kv": 1, "head": 256, "n_layer": 18}
CONTEXT = 131072
VOCAB = 4096


def write_gemma3(out: Path, seed: int = 0) -> Path:
    n_embd, n_ff, head = SHAPES["n_embd"], SHAPES["n_ff"], SHAPES["head"]
    n_head, n_head_kv = SHAPES["n_head"], SHAPES["n_head_kv"]

    writer = GGUFWriter(str(out), "gemma3")
    writer.add_name("random-gemma-3-270m-shapes")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_block_count(SHAPES["n_layer"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head)
    writer.add_value_length(head)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_sliding_window(512)
    writer.add_file_type(1)  # LLAMA_FTYPE_MOSTLY_F16

    add_synthetic_vocab(writer, VOCAB)
    writer.add_vocab_size(VOCAB)
    weight = random_weights(seed)

    ones = np.ones(n_embd, dtype=np.float32)
    head_ones = np.ones(head, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(VOCAB, n_embd))  # tied: no output.weight
    for i in range(SHAPES["n_layer"]):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        writer.add_tensor(p + "attn_q.weight", weight(n_head * head, n_embd))
        writer.add_tensor(p + "attn_k.weight", weight(n_head_kv * head, n_embd))
        writer.add_tensor(p + "attn_v.weight", weight(n_head_kv * head, n_embd))
        writer.add_tensor(p + "attn_q_norm.weight", head_ones)
        writer.add_tensor(p + "attn_k_norm.weight", head_ones)
        writer.add_tensor(p + "attn_output.weight", weight(n_embd, n_head * head))
        writer.add_tensor(p + "post_attention_norm.weight", ones)
        writer.add_tensor(p + "ffn_norm.weight", ones)
        writer.add_tensor(p + "ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(p + "ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(p + "ffn_down.weight", weight(n_embd, n_ff))
        writer.add_tensor(p + "post_ffw_norm.weight", ones)
    writer.add_tensor("output_norm.weight", ones)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    args = parser.parse_args(argv)
    if not args.out.parent.is_dir():
        message = f"make_random_gemma3_gguf: no folder {args.out.parent} to write into."
        print(message, file=sys.stderr)
        return 2
    write_gemma3(args.out)
    print(f"wrote {args.out}: {args.out.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
