"""Refuse a GGUF whose tokenizer llama.cpp would abort on, or tokenize with forever.

Measured with factory-made files in the real engine (llama-cpp-python 0.3.36; tests in
tests/core/test_gguf_tokenizer_refusals.py), each accepted by the header checks before these:
- `tokenizer.ggml.model` 'rwkv' on a model that is not an RWKV: llama.cpp's RWKV tokenizer
  (llama-vocab.cpp, llm_tokenizer_rwkv_session) restarts from the text's first byte whenever a
  byte starts a token without being one, so with another model's vocabulary a text with such a
  byte (an en dash, with the SentencePiece marker as a token) appends token 0 without end: the
  engine grew to 16 GB in 90 s. Only the RWKV converters write this tokenizer.
- 'bert' (WordPiece) on a model that is not a BERT-family encoder: a vocabulary with byte
  tokens makes token_to_byte abort (GGML_ABORT, llama-vocab.cpp) while the vocabulary loads.
- 'none' / 'no_vocab' on a model with weights: llama.cpp asserts a vocabulary whenever text is
  tokenized (GGML_ASSERT(type != LLAMA_VOCAB_TYPE_NONE)), and this app tokenizes every prompt.
- the same token twice in `tokenizer.ggml.tokens`: GGML_ASSERT(id_to_token.size() ==
  token_to_id.size()) aborts the load.
Files without tensors (vocabulary-only files, metadata reads) are not loaded as models, so
the architecture rules apply only to files with weights.

`check_tokenizer` runs inside the header checks (app.models.gguf_validate) and sees the token
list when the reader kept it (at most gguf_read.MAX_KEPT_ARRAY tokens). A longer list is only
summarised there, since walking 262,144 tokens into a set costs ~0.2 s and ~19 MiB on every
header read (the library lists, the fuzz); `check_token_list_file` reads it from the file once,
in the engine, before llama.cpp loads it (and not again while the file is unchanged, once it
passed: app.models.checked_models).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from app.models.gguf_header import GgufHeader
from app.platform.errors import InvalidGgufError

TOKENS_KEY = "tokenizer.ggml.tokens"
# Architectures whose converters (llama.cpp conversion/rwkv.py, bert.py) write these tokenizers.
RWKV_ARCHES = frozenset({"rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
WORDPIECE_ARCHES = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "eurobert",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
    }
)
NO_VOCABULARY = ("none", "no_vocab")


def _refuse(message: str) -> InvalidGgufError:
    return InvalidGgufError(f"The GGUF file {message}.", kind="tokenizer")


def check_tokenizer(header: GgufHeader) -> None:
    """Raise InvalidGgufError (kind 'tokenizer') for a tokenizer llama.cpp aborts or loops on;
    see the module docstring."""
    model = header.metadata.get("tokenizer.ggml.model")
    arch = header.metadata.get("general.architecture")
    if model is not None and header.tensors:
        if not isinstance(model, str):
            raise InvalidGgufError(
                "The GGUF file has a tokenizer.ggml.model that is not text.", kind="value-type"
            )
        _check_model_for_arch(model, str(arch))
    tokens = header.metadata.get(TOKENS_KEY)
    if isinstance(tokens, list):
        check_unique_tokens(tokens)


def _check_model_for_arch(model: str, arch: str) -> None:
    if model == "rwkv" and arch not in RWKV_ARCHES:
        raise _refuse(
            f"gives its {arch} model the RWKV tokenizer, which only RWKV models use; "
            "llama.cpp's RWKV tokenizer never finishes on another model's vocabulary"
        )
    if model == "bert" and arch not in WORDPIECE_ARCHES:
        raise _refuse(
            f"gives its {arch} model the BERT (WordPiece) tokenizer, which only BERT-family "
            "encoders use; llama.cpp stops the engine on it"
        )
    if model in NO_VOCABULARY:
        raise _refuse(
            f"has no vocabulary (tokenizer.ggml.model '{model}'), so it cannot read text; "
            "llama.cpp stops the engine when asked to"
        )


def check_unique_tokens(tokens: Iterable[str | bytes]) -> None:
    """Raise InvalidGgufError when a token text appears twice (llama.cpp names an empty token
    '[EMPTY_<id>]', so an empty one can clash with that text too)."""
    first_at: dict[bytes, int] = {}
    for index, token in enumerate(tokens):
        text = token.encode("utf-8", "surrogatepass") if isinstance(token, str) else token
        if not text:
            text = f"[EMPTY_{index}]".encode()
        before = first_at.setdefault(text, index)
        if before != index:
            shown = text[:32].decode("utf-8", "replace").encode("unicode_escape").decode()
            raise _refuse(
                f"has the token '{shown}' twice in its vocabulary (ids {before:,} and "
                f"{index:,}); llama.cpp stops the engine on a repeated token"
            )


def check_token_list_file(path: Path, header: GgufHeader) -> None:
    """The duplicate-token check of `check_tokenizer` for a token list too long for the header
    read to keep, reading it from the file at `path` (whose `header` has been validated)."""
    tokens = header.metadata.get(TOKENS_KEY)
    if tokens is None or isinstance(tokens, list):
        return  # absent, or kept and checked with the header
    with path.open("rb") as f:
        data = f.read(header.header_bytes)
    texts = _token_texts(data)
    # The usual case, no empty and no repeated token, at C speed (0.15 s less per load of a
    # 262,144-token list); only a list that fails it is walked again to name the repeat.
    if all(texts) and len(set(texts)) == len(texts):
        return
    check_unique_tokens(texts)


# ---- a walk of a validated header to its token list ---------------------------------------

_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")


def _token_texts(data: bytes) -> list[bytes]:
    """The raw texts of the token list in header bytes `data`. The header was validated, so
    every length here lies inside `data` (a short read would end the walk with struct.error)."""
    view = memoryview(data)
    (n_kv,) = _U64.unpack_from(view, 16)
    pos = 24
    for _ in range(n_kv):
        (key_len,) = _U64.unpack_from(view, pos)
        key = bytes(view[pos + 8 : pos + 8 + key_len])
        pos += 8 + key_len
        (vtype,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if key == TOKENS_KEY.encode() and vtype == _ARRAY:
            (count,) = _U64.unpack_from(view, pos + 4)
            return _strings(data, pos + 12, count)
        pos = _skip_value(view, pos, vtype)
    return []


def _strings(data: bytes, pos: int, count: int) -> list[bytes]:
    # The hot loop (262,144 tokens for the starter model): slices of `data` itself, which are
    # bytes already, and no generator between the walk and the set.
    texts: list[bytes] = []
    append, unpack = texts.append, _U64.unpack_from
    for _ in range(count):
        (n,) = unpack(data, pos)
        start = pos + 8
        pos = start + n
        append(data[start:pos])
    return texts


def _skip_value(data: memoryview, pos: int, vtype: int) -> int:
    if vtype in _SCALAR_SIZES:
        return pos + _SCALAR_SIZES[vtype]
    if vtype == _STRING:
        return pos + 8 + int(_U64.unpack_from(data, pos)[0])
    (etype,) = struct.unpack_from("<I", data, pos)
    (count,) = _U64.unpack_from(data, pos + 4)
    pos += 12
    if etype != _STRING:
        return pos + _SCALAR_SIZES[etype] * int(count)
    for _ in range(count):
        pos += 8 + int(_U64.unpack_from(data, pos)[0])
    return pos
