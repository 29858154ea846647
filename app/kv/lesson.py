"""The Dashboard's lesson: why Flash Attention and the int8 K cache matter, in the loaded
model's own numbers. No Qt: the figures are tested against `kvstudio fit` without widgets.

- Without tiling, attention writes an N x N matrix of scores (f32) per head of a layer: at
  N = the context that is N * N * heads * 4 bytes. Flash Attention computes the scores a tile
  at a time (FA_TILE queries x FA_TILE keys) and keeps only that tile, on chip on a GPU.
- Every decode step reads the K and V of every token in the context: the KV bytes per token
  (f16 against the loaded types) times the tokens in the context now is what one step reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.kv.kv_cache import KvCacheEstimate
from app.kv.kv_types import KvMode
from app.models.gguf_header import GgufHeader
from app.platform.units import size

FA_TILE = 64  # queries and keys per tile: the size class of llama.cpp's GPU tile kernels
SCORE_BYTES = 4  # an f32 score


@dataclass(frozen=True)
class Lesson:
    n_ctx: int  # the context llama.cpp created (padded)
    n_head: int
    mode: KvMode
    kv_bytes: int  # allocated at n_ctx with the loaded types (== `kvstudio fit`'s kv_bytes)
    fp16_kv_bytes: int  # the same caches at f16/f16 (== fit's fp16_kv_bytes)
    kv_bytes_per_token: int  # every cache's K and V for one token, loaded types
    fp16_kv_bytes_per_token: int
    tokens: int  # in the context now
    read_per_step: int  # KV bytes one decode step reads now, loaded types
    fp16_read_per_step: int
    window: int = 0  # a sliding-window cache's window (0: none)

    @property
    def score_matrix_bytes(self) -> int:
        """One layer's N x N scores over all heads, at N = the context, without tiling."""
        return self.n_ctx * self.n_ctx * self.n_head * SCORE_BYTES

    @property
    def tile_bytes(self) -> int:
        return FA_TILE * FA_TILE * SCORE_BYTES

    @property
    def saving_bytes(self) -> int:
        return self.fp16_kv_bytes - self.kv_bytes

    @property
    def step_saving_bytes(self) -> int:
        return self.fp16_read_per_step - self.read_per_step


def _per_token(estimate: KvCacheEstimate, growing: list[bool]) -> int:
    caches = zip(estimate.caches, growing, strict=True)
    return sum(c.k_bytes_per_cell + c.v_bytes_per_cell for c, grows in caches if grows)


def lesson_for(header: GgufHeader, estimate: KvCacheEstimate, tokens: int) -> Lesson:
    """The lesson for a load whose KV arithmetic is `estimate`, with `tokens` in context."""
    heads = header.head_count
    n_head = max(heads) if isinstance(heads, list) else int(heads)
    fp16 = estimate.fp16_equivalent()
    usage = estimate.bytes_in_use(tokens)
    # Per token: the caches as long as the context (a sliding-window cache stays its size).
    growing = [c.cells >= estimate.n_ctx_seq for c in estimate.caches]
    return Lesson(
        n_ctx=estimate.n_ctx,
        n_head=n_head,
        mode=estimate.mode,
        kv_bytes=estimate.total_bytes,
        fp16_kv_bytes=fp16.total_bytes,
        kv_bytes_per_token=_per_token(estimate, growing),
        fp16_kv_bytes_per_token=_per_token(fp16, growing),
        window=max((c.window for c in estimate.caches if c.swa), default=0),
        tokens=tokens,
        read_per_step=usage.bytes,
        fp16_read_per_step=usage.fp16_bytes,
    )


def _bytes(n: int) -> str:
    return size(n, 1)  # as the panel's chart labels its bars: "1.0 GiB", not "1,024.0 MiB"


def lesson_sentences(lesson: Lesson) -> list[str]:
    """The lesson in plain sentences, each with this session's numbers."""
    n, mode = lesson.n_ctx, lesson.mode.label
    saving = lesson.saving_bytes / lesson.fp16_kv_bytes if lesson.fp16_kv_bytes else 0.0
    step = (
        f"Now {lesson.tokens:,} tokens are in the context, so each decode step reads "
        f"{_bytes(lesson.read_per_step)} of K and V ({_bytes(lesson.fp16_read_per_step)} in "
        f"f16: {_bytes(lesson.step_saving_bytes)} less per token generated)."
        if lesson.tokens
        else "No tokens are in the context yet: send a message and this line counts the bytes "
        "each decode step reads."
    )
    window = (
        f" in its full-context layers (the sliding-window layers keep only the last "
        f"{lesson.window:,} tokens)"
        if lesson.window
        else ""
    )
    return [
        f"Attention compares every token with every other: at {n:,} tokens, one layer's scores "
        f"for its {lesson.n_head} heads would take {_bytes(lesson.score_matrix_bytes)} if "
        f"written out whole. Flash Attention works through them a tile of {FA_TILE} x "
        f"{FA_TILE} at a time ({_bytes(lesson.tile_bytes)}, kept on chip on a GPU), so the "
        "matrix never exists.",
        f"What remains is the KV cache: each token stores {_bytes(lesson.fp16_kv_bytes_per_token)}"
        f" of K and V in f16, {_bytes(lesson.kv_bytes_per_token)} with {mode}{window}; for "
        f"{n:,} tokens that is {_bytes(lesson.fp16_kv_bytes)} against {_bytes(lesson.kv_bytes)} "
        f"({saving:.1%} saved).",
        step,
    ]
