"""A random-weight Llama GGUF: real shapes and types, nonsense weights.

llama.cpp allocates, computes and caches for it exactly what it would for a real model of those
shapes, so KV cache bytes, compute buffers and kernel timings are real. Used by
scripts/make_random_llama_gguf.py (Llama-3-8B shapes, for the GPU benchmarks) and, in its tiny
form (a few MB), by `kvstudio selftest` to check an install without any download.

One random array is made per tensor shape and reused for every layer, so the 13.5 GiB file is
written at disk speed (about a minute) instead of spending minutes in the RNG.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, TokenType

# Llama-3-8B shapes (config.json of meta-llama/Meta-Llama-3-8B).
FULL = {"n_embd": 4096, "n_ff": 14336, "n_head": 32, "n_head_kv": 8, "n_layer": 32, "ctx": 131072}
# The shrunken shapes used with --vocab small (tests): same head size 128 and GQA ratio 4.
SMALL = {"n_embd": 256, "n_ff": 512, "n_head": 2, "n_head_kv": 1, "n_layer": 2, "ctx": 4096}


def synthetic_vocab(size: int) -> tuple[list[str], list[float], list[int]]:
    """An SPM-style vocabulary llama.cpp accepts: <unk> <s> </s>, 256 byte tokens, then
    single characters and made-up words (so any text tokenizes through byte fallback)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    chars = [chr(c) for c in range(33, 127)] + ["\u2581" + chr(c) for c in range(97, 123)]
    i = 0
    while len(tokens) < size:
        tokens.append(chars[i] if i < len(chars) else f"\u2581w{i}")
        types.append(TokenType.NORMAL)
        i += 1
    tokens, types = tokens[:size], types[:size]
    scores = [0.0 if t != TokenType.NORMAL else -float(n) for n, t in enumerate(types)]
    return tokens, scores, [int(t) for t in types]


def copy_vocab(writer: GGUFWriter, vocab_path: Path) -> int:
    """Copy every tokenizer.* key of a vocab-only GGUF; returns the vocabulary size."""
    reader = GGUFReader(vocab_path)
    n_vocab = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(name, value, vtype, sub_type=field.types[-1])
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            writer.add_key_value(name, value, vtype)
    if not n_vocab:
        raise SystemExit(f"{vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


def add_synthetic_vocab(writer: GGUFWriter, size: int) -> None:
    """synthetic_vocab(size) as the model's tokenizer."""
    add_spm_vocab(writer, *synthetic_vocab(size))


def add_spm_vocab(
    writer: GGUFWriter, tokens: list[str], scores: list[float], types: list[int]
) -> None:
    """An SPM tokenizer (llama.cpp's "llama" model) whose first tokens are <unk> <s> </s>."""
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)


def random_weights(seed: int) -> Callable[..., np.ndarray]:
    """weight(*shape): f16 values of spread 1/sqrt(row length), one array a shape, reused for every
    layer (see the module's docstring). numpy's shape is (rows, row length): the reverse of ggml's
    ne order."""
    rng = np.random.default_rng(seed)
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def weight(*shape: int) -> np.ndarray:
        if shape not in cache:
            scale = 1.0 / np.sqrt(shape[-1])
            cache[shape] = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float16)
        return cache[shape]

    return weight


def write_model(
    out: Path, layers: int | None, vocab: str, vocab_gguf: Path | None, seed: int = 0
) -> Path:
    shapes = dict(SMALL if vocab == "small" else FULL)
    if layers is not None:
        shapes["n_layer"] = layers
    n_embd, n_ff = shapes["n_embd"], shapes["n_ff"]
    n_head, n_head_kv, n_layer = shapes["n_head"], shapes["n_head_kv"], shapes["n_layer"]
    head = n_embd // n_head

    writer = GGUFWriter(str(out), "llama")
    writer.add_name("random-llama-3-8b-shapes" if vocab != "small" else "random-llama-tiny")
    writer.add_context_length(shapes["ctx"])
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_block_count(n_layer)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(1)  # LLAMA_FTYPE_MOSTLY_F16

    if vocab_gguf is not None:
        n_vocab = copy_vocab(writer, vocab_gguf)
    else:
        n_vocab = 512 if vocab == "small" else 32000
        add_synthetic_vocab(writer, n_vocab)
    writer.add_vocab_size(n_vocab)

    weight = random_weights(seed)
    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    for i in range(n_layer):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        writer.add_tensor(p + "attn_q.weight", weight(n_head * head, n_embd))
        writer.add_tensor(p + "attn_k.weight", weight(n_head_kv * head, n_embd))
        writer.add_tensor(p + "attn_v.weight", weight(n_head_kv * head, n_embd))
        writer.add_tensor(p + "attn_output.weight", weight(n_embd, n_head * head))
        writer.add_tensor(p + "ffn_norm.weight", ones)
        writer.add_tensor(p + "ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(p + "ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(p + "ffn_down.weight", weight(n_embd, n_ff))
    writer.add_tensor("output_norm.weight", ones)
    # A distinct array from token_embd (same shape would share the cached one; harmless).
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return out
