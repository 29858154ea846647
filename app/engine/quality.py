"""Perplexity, KL divergence and top-1 agreement of a loaded model on a reference text.

Runs inside the engine process (the worker dispatches `Evaluate` here). The method is
llama.cpp's `perplexity` tool's: the text is cut into chunks of `chunk_tokens` tokens,
each chunk is decoded from an empty cache, and only the second half of each chunk is
scored (so every scored token has at least half a chunk of context).

Logits are fetched a few dozen positions at a time: with a 262,144-token vocabulary one
row is 1 MiB, and asking llama.cpp for logits of a whole long context costs gigabytes.

The reference run (fp16 KV) writes the scored positions' log-probabilities to a float16
.npy file; a compared run reads it back, row for row, to compute the mean KL divergence
KL(P_ref || P_mode) and how often both pick the same top-1 token. The compared run's own
log-probabilities are rounded to float16 first, as the reference's were: both sides of the
comparison then carry the same rounding, so a mode identical to the reference scores exactly
0 KL and 100% top-1 instead of the rounding noise of one side.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.engine.cancel import CancelCheck
from app.engine.messages import Evaluate, Evaluated
from app.platform.errors import BadInputError, EngineFailedError

if TYPE_CHECKING:  # llama_cpp is imported only where it runs: app.engine.compare imports this
    from llama_cpp import Llama

log = logging.getLogger(__name__)

# Logits fetched per decode call are kept under this many bytes.
LOGITS_BUDGET_BYTES = 64 * 1024 * 1024


def default_reference_text() -> str:
    """English prose every Python install has: the help topics of `pydoc_data.topics`."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def _tokenize_enough(llm: Llama, text: str, n_tokens: int) -> list[int]:
    """Tokens of a prefix of `text` long enough for `n_tokens` tokens (or all of it).

    Tokenizing the whole reference text would take seconds for no use, so a prefix
    is tried and doubled until it yields enough tokens.
    """
    n_chars = max(4096, n_tokens * 6)
    while True:
        tokens = llm.tokenize(text[:n_chars].encode("utf-8"), add_bos=True, special=False)
        if len(tokens) >= n_tokens or n_chars >= len(text):
            return list(tokens)
        n_chars *= 2


def decode_batch(
    llm: Llama, tokens: list[int], start_pos: int, logits: str = "none"
) -> np.ndarray | None:
    """Decode `tokens` at positions start_pos.. in sequence 0 (at most llm.n_batch).

    `logits`: "all" returns every position's logits as a (len, n_vocab) float32 copy;
    "last" asks llama.cpp for the last position's only (as llama-bench does, so the
    output layer is part of the timing) and returns None; "none" asks for none.
    """
    import llama_cpp

    batch = llm._batch.batch
    n = len(tokens)
    batch.n_tokens = n
    want_all = logits == "all"
    for i, token in enumerate(tokens):
        batch.token[i] = token
        batch.pos[i] = start_pos + i
        batch.seq_id[i][0] = 0
        batch.n_seq_id[i] = 1
        batch.logits[i] = want_all
    if logits == "last":
        batch.logits[n - 1] = True
    code = llama_cpp.llama_decode(llm._ctx.ctx, batch)
    if code != 0:
        raise EngineFailedError(
            f"llama.cpp could not evaluate the tokens (llama_decode returned {code})."
        )
    if not want_all:
        return None
    n_vocab = llm.n_vocab()
    pointer = llama_cpp.llama_get_logits(llm._ctx.ctx)
    return np.ctypeslib.as_array(pointer, shape=(n * n_vocab,)).reshape(n, n_vocab).copy()


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float32, in place on `logits`."""
    logits -= logits.max(axis=1, keepdims=True)
    logits -= np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return logits


def clear_cache(llm: Llama) -> None:
    llm._ctx.kv_cache_clear()
    # The Llama object's prefix cache must not believe the old tokens are still there.
    llm.n_tokens = 0


class _Scores:
    """Running totals over the scored positions."""

    def __init__(self) -> None:
        self.nll = 0.0
        self.count = 0
        self.kl = 0.0
        self.same_top1 = 0

    def add(self, logp: np.ndarray, targets: np.ndarray) -> None:
        """Positions' log-probabilities, and the tokens that followed them."""
        self.nll -= float(logp[np.arange(len(targets)), targets].sum())
        self.count += len(targets)

    def compare(self, reference: np.ndarray, logp: np.ndarray) -> None:
        """The same positions against the reference run's log-probabilities."""
        ref = np.asarray(reference, dtype=np.float32)
        own = logp.astype(np.float16).astype(np.float32)  # like with like
        p_ref = np.exp(ref)
        self.kl += float((p_ref * (ref - own)).sum())
        self.same_top1 += int((ref.argmax(axis=1) == own.argmax(axis=1)).sum())


def evaluate(llm: Llama, command: Evaluate, cancel: CancelCheck | None = None) -> Evaluated:
    """Score `command.text` with the loaded `llm` (a llama_cpp.Llama).

    Raises BadInputError when the text is too short or the context too small, and
    EngineFailedError when a reference file does not match this run.
    """
    chunk = command.chunk_tokens
    if chunk < 16:
        raise BadInputError("A quality chunk must be at least 16 tokens long.")
    if chunk > llm.n_ctx():
        raise BadInputError(
            f"The quality chunk of {chunk} tokens does not fit the {llm.n_ctx()}-token context."
        )
    tokens = _tokenize_enough(llm, command.text, chunk * command.n_chunks)
    n_chunks = min(command.n_chunks, len(tokens) // chunk)
    if n_chunks < 1:
        raise BadInputError(
            f"The reference text has only {len(tokens)} tokens; at least {chunk} are needed."
        )
    bos = llm.token_bos()
    add_bos = bool(tokens) and tokens[0] == bos
    rows_per_chunk = chunk - chunk // 2 - 1  # logits at first..chunk-2 predict first+1..chunk-1
    n_vocab = llm.n_vocab()
    piece = max(1, min(llm.n_batch, LOGITS_BUDGET_BYTES // (n_vocab * 4)))
    reference = _open_reference(command, n_chunks * rows_per_chunk, n_vocab)
    compare = reference is not None and not command.write_reference

    scores = _Scores()
    try:
        for c in range(n_chunks):
            chunk_tokens = tokens[c * chunk : (c + 1) * chunk]
            if add_bos:
                chunk_tokens[0] = bos
            row = c * rows_per_chunk
            _score_chunk(llm, chunk_tokens, row, piece, scores, reference, command, cancel)
            log.debug(
                "quality chunk %d/%d: ppl so far %.3f",
                c + 1,
                n_chunks,
                math.exp(scores.nll / scores.count),
            )
    finally:
        clear_cache(llm)
        if command.write_reference and reference is not None:
            reference.flush()
        del reference

    perplexity = math.exp(scores.nll / scores.count)
    return Evaluated(
        request_id=command.request_id,
        perplexity=perplexity,
        scored_tokens=scores.count,
        mean_kl_divergence=scores.kl / scores.count if compare else None,
        top1_agreement=scores.same_top1 / scores.count if compare else None,
    )


def _open_reference(command: Evaluate, total_rows: int, n_vocab: int) -> np.memmap | None:
    """The reference log-probabilities, mapped: created (the reference run) or read and
    checked against this run (a compared run); None when the command names no file."""
    if not command.logprobs_path:
        return None
    path = Path(command.logprobs_path)
    if command.write_reference:
        path.parent.mkdir(parents=True, exist_ok=True)
        return np.lib.format.open_memmap(
            path, mode="w+", dtype=np.float16, shape=(total_rows, n_vocab)
        )
    try:
        reference: np.memmap = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as error:
        raise EngineFailedError(
            f"The reference log-probabilities could not be read: {error}."
        ) from error
    if reference.shape != (total_rows, n_vocab):
        raise EngineFailedError(
            "The reference run scored a different text or model "
            f"({reference.shape[0]} positions x {reference.shape[1]} tokens, "
            f"this run {total_rows} x {n_vocab})."
        )
    return reference


def _score_chunk(
    llm: Llama,
    chunk_tokens: list[int],
    row: int,
    piece: int,
    scores: _Scores,
    reference: np.memmap | None,
    command: Evaluate,
    cancel: CancelCheck | None,
) -> None:
    """Decode one chunk from an empty cache and score its second half, `piece` positions a
    time; the reference's rows from `row` on are written or compared."""
    chunk = len(chunk_tokens)
    first = chunk // 2
    clear_cache(llm)
    for start in range(0, first, llm.n_batch):  # the unscored first half
        decode_batch(llm, chunk_tokens[start : min(first, start + llm.n_batch)], start)
    for start in range(first, chunk - 1, piece):
        if cancel is not None and cancel.is_set():
            raise EngineFailedError("The quality evaluation was cancelled.")
        stop = min(chunk - 1, start + piece)
        logits = decode_batch(llm, chunk_tokens[start:stop], start, "all")
        assert logits is not None  # "all" always returns them
        logp = _log_softmax(logits)
        targets = np.asarray(chunk_tokens[start + 1 : stop + 1])
        scores.add(logp, targets)
        at = row + (start - first)
        if reference is None:
            continue
        if command.write_reference:
            reference[at : at + len(targets)] = logp
        else:
            scores.compare(reference[at : at + len(targets)], logp)
