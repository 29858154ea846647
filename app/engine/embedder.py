"""The embedder: a process of its own that turns texts into embeddings with the loaded model's
file, for the server's /v1/embeddings.

Why not the engine's own context: llama.cpp computes embeddings only in a context made for
them (`embeddings` on, a pooling type), and switching the generation context to embeddings
crashed it (llama_decode segfaulted on the starter, Gemma 3). A second process keeps a crash
from costing the chat its engine. It maps the same file (the weights' pages are shared with
the engine's through the page cache) and holds a small context: EMBED_CONTEXT tokens, all in
one batch (mean pooling needs every token of an input in one batch), whose compute buffer
holds a logit row per token (llama.cpp computes them in embedding mode too): 512 tokens x
the vocabulary x 4 bytes, 512 MiB for Gemma 3's 262,144 tokens.

Each vector is the mean of the last layer's states over the input's tokens, normalized to
length 1 (llama.cpp's LLAMA_POOLING_TYPE_MEAN, as `Llama(embedding=True).embed` computes it).
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection

from app.platform.memory_ceiling import apply_ceiling, engine_ceiling

log = logging.getLogger(__name__)

EMBED_CONTEXT = 512  # the most tokens one input may have


@dataclass(frozen=True)
class EmbedRequest:
    """Inputs as texts or as token ids (a list of ints each)."""

    inputs: tuple[str | tuple[int, ...], ...]


@dataclass(frozen=True)
class Embeddings:
    """One little-endian float32 vector per input, and each input's token count."""

    vectors: tuple[bytes, ...]
    token_counts: tuple[int, ...]
    dimensions: int


@dataclass(frozen=True)
class EmbedRefused:
    """The inputs cannot be embedded: one sentence, and whether it is the client's to fix."""

    message: str
    client_error: bool
    param: str = "input"


def embedder_main(connection: Connection[object, object], model_path: str) -> None:
    """The embedder process: load `model_path` for embeddings, answer EmbedRequests."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the server's to handle
    os.environ["GGML_NO_BACKTRACE"] = "1"  # an abort says one line, not a gdb backtrace
    ceiling = engine_ceiling()
    if ceiling is not None:
        apply_ceiling(ceiling)
    import llama_cpp  # before numpy (see app/engine/worker.py)

    from app.engine.loader import weights_repacked

    # Weights as the engine loads them: repacked, llama.cpp's AMX kernel crashes on Gemma 3 on
    # an AMX CPU (llama.cpp issue 20824), which read as "Gemma 3 cannot embed" on such machines.
    with weights_repacked(False):
        llm = llama_cpp.Llama(
            model_path,
            n_ctx=EMBED_CONTEXT,
            n_batch=EMBED_CONTEXT,
            n_ubatch=EMBED_CONTEXT,
            n_gpu_layers=0,
            embedding=True,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
            verbose=False,
        )
    connection.send("ready")
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        if not isinstance(request, EmbedRequest):
            return
        connection.send(_embed(llm, request))


def _embed(llm: object, request: EmbedRequest) -> Embeddings | EmbedRefused:
    import llama_cpp
    import numpy as np

    assert isinstance(llm, llama_cpp.Llama)
    vocabulary = llm.n_vocab()
    token_lists: list[list[int]] = []
    for index, given in enumerate(request.inputs):
        tokens = (
            llm.tokenize(given.encode("utf-8"), add_bos=True, special=False)
            if isinstance(given, str)
            else list(given)
        )
        where = f"input[{index}]" if len(request.inputs) > 1 else "input"
        if any(not 0 <= token < vocabulary for token in tokens):
            return EmbedRefused(f"'{where}' holds a token id this model does not have.", True)
        if len(tokens) > EMBED_CONTEXT:
            return EmbedRefused(
                f"'{where}' is {len(tokens)} tokens; embeddings take at most {EMBED_CONTEXT} "
                "tokens per input here.",
                True,
            )
        token_lists.append(tokens)
    vectors = []
    dimensions = llm.n_embd()
    for tokens in token_lists:  # one input per batch: each is pooled over its own tokens
        llm._ctx.kv_cache_clear()
        llm._batch.reset()
        llm._batch.add_sequence(tokens, 0, True)
        llm._ctx.decode(llm._batch)
        pooled = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
        vector = np.ctypeslib.as_array(pooled, shape=(dimensions,)).astype(np.float64)
        length = float(np.linalg.norm(vector))
        vectors.append((vector / length if length > 0 else vector).astype("<f4").tobytes())
    return Embeddings(tuple(vectors), tuple(len(t) for t in token_lists), dimensions)
