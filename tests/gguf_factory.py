"""Write tiny but real GGUF models that llama.cpp loads (for tests of every area).

    from tests.gguf_factory import write_tiny_gguf
    path = write_tiny_gguf(tmp_path / "tiny.gguf", arch="llama", n_head=4, n_head_kv=2, head_dim=64)

The vocabulary is a small SentencePiece-style ("llama") one: <unk>, <s>, </s>, the 256
byte tokens <0x00>..<0xFF> (so any text tokenizes by byte fallback) and a few words.
Weights are small random numbers (seeded), f16 for matrices and f32 for norms, so the
model runs and generates (nonsense) text. A file is about n_layer * a few hundred KiB.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

# Word pieces after the byte tokens; "\u2581" is SentencePiece's space marker.
_WORDS = [
    "\u2581the", "\u2581a", "\u2581and", "\u2581of", "\u2581to", "\u2581in", "\u2581is",
    "\u2581it", "\u2581you", "\u2581that", "\u2581Hello", "\u2581world", "\u2581cache",
    "\u2581memory", "\u2581model", "\u2581", "e", "t", "a", "o", "i", "n", "s", "r",
]

ARCHES = ("llama", "gemma3")


def tiny_vocab() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of the tiny SentencePiece vocabulary."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    tokens += _WORDS
    types += [gguf.TokenType.NORMAL] * len(_WORDS)
    scores = [0.0] * 259 + [-float(i) for i in range(len(_WORDS))]
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(
    path: str | Path,
    arch: str = "llama",
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int | list[int] = 2,
    head_dim: int = 64,
    n_embd: int | None = None,
    n_ff: int | None = None,
    n_ctx_train: int = 4096,
    sliding_window: int | None = None,
    sliding_window_pattern: int | list[bool] | None = None,
    vocab: list[str] | None = None,
    chat_template: str | None = None,
    name: str | None = None,
    seed: int = 0,
) -> Path:
    """Write a tiny GGUF of architecture `arch` ('llama' or 'gemma3') and return its path.

    `n_head_kv` may be one number (GQA when smaller than n_head) or one per layer.
    For 'gemma3', `sliding_window` turns on the interleaved sliding-window layers
    (llama.cpp's default pattern: every 6th layer global) unless a pattern is given.
    `vocab` replaces the tiny vocabulary's words (the control and byte tokens stay).
    """
    if arch not in ARCHES:
        raise ValueError(f"arch must be one of {ARCHES}, not {arch!r}")
    path = Path(path)
    n_embd = n_embd or max(64, n_head * head_dim // 2)
    n_ff = n_ff or 2 * n_embd
    kv_heads = n_head_kv if isinstance(n_head_kv, list) else [n_head_kv] * n_layer
    if len(kv_heads) != n_layer:
        raise ValueError("n_head_kv needs one value per layer")

    tokens, scores, types = tiny_vocab()
    if vocab is not None:
        tokens = tokens[:259] + list(vocab)
        scores = scores[:259] + [-float(i) for i in range(len(vocab))]
        types = types[:259] + [int(gguf.TokenType.NORMAL)] * len(vocab)
    n_vocab = len(tokens)

    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(name or f"tiny-{arch}-{n_layer}L-h{head_dim}")
    writer.add_type("model")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    if isinstance(n_head_kv, list):
        writer.add_head_count_kv(kv_heads)
    else:
        writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    if sliding_window is not None:
        writer.add_sliding_window(sliding_window)
    if sliding_window_pattern is not None:
        if isinstance(sliding_window_pattern, list):
            writer.add_array(f"{arch}.attention.sliding_window_pattern", [bool(v) for v in sliding_window_pattern])
        else:
            writer.add_uint32(f"{arch}.attention.sliding_window_pattern", sliding_window_pattern)

    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    rng = np.random.default_rng(seed)
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def matrix(rows: int, cols: int) -> np.ndarray:
        # numpy shape (rows, cols) is ggml {cols, rows}: ne0 = cols is the input size.
        key = (rows, cols)
        if key not in cache:
            cache[key] = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)
        return cache[key]

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    n_q = n_head * head_dim
    writer.add_tensor("token_embd.weight", matrix(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", norm(n_embd))
    for i, kv in enumerate(kv_heads):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", norm(n_embd))
        writer.add_tensor(f"{blk}.attn_q.weight", matrix(n_q, n_embd))
        writer.add_tensor(f"{blk}.attn_k.weight", matrix(kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_v.weight", matrix(kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_output.weight", matrix(n_embd, n_q))
        writer.add_tensor(f"{blk}.ffn_norm.weight", norm(n_embd))
        writer.add_tensor(f"{blk}.ffn_gate.weight", matrix(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", matrix(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_down.weight", matrix(n_embd, n_ff))
        if arch == "gemma3":
            writer.add_tensor(f"{blk}.post_attention_norm.weight", norm(n_embd))
            writer.add_tensor(f"{blk}.post_ffw_norm.weight", norm(n_embd))
            writer.add_tensor(f"{blk}.attn_q_norm.weight", norm(head_dim))
            writer.add_tensor(f"{blk}.attn_k_norm.weight", norm(head_dim))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
