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

from app.models.random_model import add_spm_vocab

# Word pieces after the byte tokens; "\u2581" is SentencePiece's space marker.
_WORDS = [
    "\u2581the",
    "\u2581a",
    "\u2581and",
    "\u2581of",
    "\u2581to",
    "\u2581in",
    "\u2581is",
    "\u2581it",
    "\u2581you",
    "\u2581that",
    "\u2581Hello",
    "\u2581world",
    "\u2581cache",
    "\u2581memory",
    "\u2581model",
    "\u2581",
    "e",
    "t",
    "a",
    "o",
    "i",
    "n",
    "s",
    "r",
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
            writer.add_array(
                f"{arch}.attention.sliding_window_pattern",
                [bool(v) for v in sliding_window_pattern],
            )
        else:
            writer.add_uint32(f"{arch}.attention.sliding_window_pattern", sliding_window_pattern)

    add_spm_vocab(writer, tokens, scores, types)
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


VOCAB_TOKENIZERS = ("llama", "gpt2", "bert")


def write_vocab_only_gguf(
    path: str | Path, tokenizer: str = "llama", n_vocab: int = 32_000, seed: int = 0
) -> Path:
    """Write a vocab-only GGUF like llama.cpp's `models/ggml-vocab-*.gguf` and return its path.

    What `convert_hf_to_gguf.py --vocab-only` writes: the architecture's hyperparameters and a
    whole tokenizer, then no tensor table and no padding (the file ends with the metadata).
    `tokenizer` is the GGUF tokenizer model: 'llama' (SentencePiece, with scores), 'gpt2'
    (byte-level BPE, with merges) or 'bert' (WordPiece). The pieces are made up (seeded),
    but llama.cpp loads the file with vocab_only and tokenizes with it.
    """
    if tokenizer not in VOCAB_TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {VOCAB_TOKENIZERS}, not {tokenizer!r}")
    path = Path(path)
    rng = np.random.default_rng(seed)
    tokens, types, scores, merges = _VOCAB_BUILDERS[tokenizer](rng, n_vocab)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"vocab-only-{tokenizer}")
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_block_count(1)
    writer.add_feed_forward_length(128)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(32)
    writer.add_tokenizer_model(tokenizer)
    writer.add_tokenizer_pre({"gpt2": "gpt-2"}.get(tokenizer, "default"))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if scores is not None:
        writer.add_token_scores(scores)
    if merges is not None:
        writer.add_token_merges(merges)
    end_of_text = len(tokens) - 1  # gpt2: <|endoftext|> is both, as in GPT-2
    specials = {"llama": (1, 2, 0), "gpt2": (end_of_text, end_of_text, None), "bert": (2, 3, 1)}[
        tokenizer
    ]
    writer.add_bos_token_id(specials[0])
    writer.add_eos_token_id(specials[1])
    if specials[2] is not None:
        writer.add_unk_token_id(specials[2])
    # As the converter does for --vocab-only: header and metadata, never the tensor part.
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def _made_up_words(
    rng: np.random.Generator, taken: set[str], n: int, prefix: str = ""
) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: list[str] = []
    while len(words) < n:
        draws = rng.integers(0, len(letters), size=(4096, 8)).tolist()
        for row, length in zip(draws, rng.integers(2, 9, size=4096).tolist(), strict=True):
            word = prefix + "".join(letters[k] for k in row[:length])
            if word not in taken and len(words) < n:
                taken.add(word)
                words.append(word)
    return words


def _spm_vocab(
    rng: np.random.Generator, n_vocab: int
) -> tuple[list[str], list[int], list[float], None]:
    tokens, scores, types = tiny_vocab()
    taken = set(tokens)
    tokens += _made_up_words(rng, taken, n_vocab - len(tokens), prefix="\u2581")
    types += [int(gguf.TokenType.NORMAL)] * (n_vocab - len(types))
    scores = scores[:259] + [-float(i) for i in range(n_vocab - 259)]
    return tokens, types, scores, None


def _bpe_vocab(
    rng: np.random.Generator, n_vocab: int
) -> tuple[list[str], list[int], None, list[str]]:
    # GPT-2's byte-to-unicode table: every byte is one printable character (space is "Ġ").
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    extra = iter(range(256, 512))
    tokens = [chr(b) if b in printable else chr(next(extra)) for b in range(256)]
    taken = set(tokens)
    merges: list[str] = []
    while len(tokens) < n_vocab - 1:
        for i, j in rng.integers(0, len(tokens), size=(4096, 2)).tolist():
            a, b = tokens[i], tokens[j]
            if len(a) + len(b) > 12 or a + b in taken:
                continue
            taken.add(a + b)
            tokens.append(a + b)
            merges.append(f"{a} {b}")
            if len(tokens) == n_vocab - 1:
                break
    tokens.append("<|endoftext|>")
    types = [int(gguf.TokenType.NORMAL)] * (n_vocab - 1) + [int(gguf.TokenType.CONTROL)]
    return tokens, types, None, merges


def _wpm_vocab(rng: np.random.Generator, n_vocab: int) -> tuple[list[str], list[int], None, None]:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    types = [int(gguf.TokenType.CONTROL)] * len(tokens)
    singles = [chr(c) for c in range(ord("!"), ord("~") + 1)]
    tokens += singles + ["##" + c for c in singles]
    taken = set(tokens)
    half = (n_vocab - len(tokens)) // 2
    tokens += _made_up_words(rng, taken, half)
    tokens += _made_up_words(rng, taken, n_vocab - len(tokens), prefix="##")
    types += [int(gguf.TokenType.NORMAL)] * (n_vocab - len(types))
    return tokens, types, None, None


_VOCAB_BUILDERS = {"llama": _spm_vocab, "gpt2": _bpe_vocab, "bert": _wpm_vocab}


def write_unknown_arch_gguf(path: str | Path, arch: str = "strangearch") -> Path:
    """A valid GGUF whose architecture llama.cpp does not know (everything the app's fit check
    reads is there and sane), so llama.cpp refuses it: 'unknown model architecture'."""
    path = Path(path)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(1)
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_head_count(1)
    writer.add_head_count_kv(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
