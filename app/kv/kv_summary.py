"""The dashboard's one-sentence summary of the loaded model's KV cache: what llama.cpp
allocated with the loaded K/V types (its own log), what an f16/f16 cache would take for
the same context (app.kv.kv_cache), the saving, and how many more tokens the saving
would hold. No Qt: the sentence is tested without widgets too."""

from __future__ import annotations

from dataclasses import dataclass

from app.kv.kv_cache import KvCacheEstimate
from app.kv.kv_types import KvMode
from app.platform.units import size

GIB = 1024**3
CTX_STEP = 256  # llama.cpp pads a context to 256 cells, so more tokens come in such steps


def kv_mib(n: float) -> str:
    """KV bytes as the dashboard writes them: '25.5 MiB', '10.25 GiB' from 10 GiB up."""
    return size(n, 1, "MiB") if n < 10 * GIB else size(n, 2, "GiB")


@dataclass(frozen=True)
class KvSummary:
    """One loaded model's KV figures. `fp16_bytes` and `bytes_per_token` are None when the
    KV arithmetic failed (the log's figure still stands alone)."""

    n_ctx: int  # the context llama.cpp created
    mode: KvMode
    allocated_bytes: int  # summed over llama.cpp's `llama_kv_cache: size = ...` lines
    fp16_bytes: int | None  # the same caches at f16/f16, computed
    bytes_per_token: int | None  # what one more token of context costs in `mode`

    @property
    def saving_bytes(self) -> int | None:
        return None if self.fp16_bytes is None else self.fp16_bytes - self.allocated_bytes

    @property
    def saving_percent(self) -> float:
        if not self.fp16_bytes or self.saving_bytes is None:
            return 0.0
        return 100 * self.saving_bytes / self.fp16_bytes

    @property
    def more_tokens(self) -> int:
        """Tokens of extra context the saving would hold, in llama.cpp's 256-cell steps."""
        if not self.saving_bytes or not self.bytes_per_token or self.saving_bytes <= 0:
            return 0
        return self.saving_bytes // self.bytes_per_token // CTX_STEP * CTX_STEP


def summarize(
    n_ctx: int, mode: KvMode, allocated_bytes: int, estimate: KvCacheEstimate | None
) -> KvSummary:
    """The summary of a load: `allocated_bytes` from llama.cpp's log, `estimate` the KV
    arithmetic for the same load (None when it failed)."""
    if estimate is None:
        return KvSummary(n_ctx, mode, allocated_bytes, None, None)
    # Only caches as long as the context grow with it; a sliding-window cache stays its size.
    growing = [c for c in estimate.caches if c.cells >= estimate.n_ctx_seq]
    per_token = sum(c.k_bytes_per_cell + c.v_bytes_per_cell for c in growing)
    return KvSummary(
        n_ctx, mode, allocated_bytes, estimate.fp16_equivalent().total_bytes, per_token or None
    )


def kv_sentence(summary: KvSummary) -> str:
    """'KV cache at 4,096 tokens: 48.0 MiB in f16, 25.5 MiB with int8-K (q8_0/f16): 22.5 MiB
    saved, room for 3,584 more tokens in the same memory.'"""
    head = f"KV cache at {summary.n_ctx:,} tokens: "
    mine = kv_mib(summary.allocated_bytes)
    if summary.fp16_bytes is None or summary.saving_bytes is None:
        return f"{head}{mine} with {summary.mode.label} (llama.cpp's log)."
    if summary.saving_bytes <= 0:
        return (
            f"{head}{mine} in {summary.mode.label}, no saving: load the model with the K cache as "
            "q8_0 (int8-K) to make it smaller."
        )
    k_type = summary.mode.k.name
    what = "int8-K" if k_type == "q8_0" else f"K as {k_type}"
    room = (
        f", room for {summary.more_tokens:,} more tokens in the same memory"
        if summary.more_tokens
        else ""
    )
    return (
        f"{head}{kv_mib(summary.fp16_bytes)} in f16, {mine} with {what} ({summary.mode.label}): "
        f"{kv_mib(summary.saving_bytes)} saved{room}."
    )


NO_MODEL_SENTENCE = (
    "No model loaded. Load one on the Chat page, and this page shows how much memory its KV "
    "cache takes and what the 8-bit K cache saves."
)
