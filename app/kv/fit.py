"""Will a model fit in a memory budget, per KV mode, and what is the largest context that does?

need(n_ctx) = weights + KV cache + compute buffer + output buffer, where
- weights: the file's tensor bytes (the whole file's data section for split models when the
  caller passes the total size);
- KV cache: exact, from app.kv.kv_cache (llama.cpp's own allocation);
- compute buffer: an ESTIMATE. llama.cpp only reports it after creating the context
  ("compute buffer size = ..."); its graph allocator reuses memory, so the buffer is the
  largest of three peaks (compute_buffer_estimate), plus 5%. Checked against what llama.cpp
  reported (tests/core/test_fit.py on the CPU; docs/kv-accounting-h200.json on an H200, CUDA):
  Llama-3-8B widths at n_ctx 131072, CUDA0: f16/f16 258.5 MiB reported vs 271 estimated,
  q8_0/f16 416.1 vs 441, q8_0/q8_0 672.1 vs 710; the starter model on the CPU 515.8 vs 539.
  On CUDA the KQ mask also has a pinned host copy (CUDA_Host, n_kv x n_ubatch x 2 bytes):
  system RAM, not counted against VRAM here;
- output buffer: n_vocab floats per sequence.
Verdicts leave a MARGIN of 10% of the budget for the estimate's error and what no formula
sees (the GPU runtime's own context, fragmentation): need <= 90% of the budget 'fits',
need <= budget 'tight', else 'does not fit'; 'not supported' when llama.cpp refuses the
K/V type for the model (estimate_fit, for the Models page, says so per mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from app.kv.kv_cache import KvCacheEstimate, kv_cache_bytes
from app.kv.kv_types import COMPARE_MODES, KvMode
from app.models.gguf_header import GgufHeader
from app.platform.errors import BadInputError

if TYPE_CHECKING:
    from app.platform.probes import FreeMemory

MARGIN = 0.10
FITS, TIGHT, NO_FIT = "fits", "tight", "does not fit"
UNSUPPORTED = "not supported"  # llama.cpp refuses this K/V type for this model
_CTX_STEP = 256  # llama.cpp pads n_ctx to 256, so candidates are multiples of it
_COMPUTE_SAFETY = 1.05  # the estimate's own cushion above the two peaks it models


@dataclass(frozen=True)
class MemoryNeed:
    weights_bytes: int
    kv: KvCacheEstimate
    compute_bytes: int  # estimated (see the module docstring)
    output_bytes: int

    @property
    def kv_bytes(self) -> int:
        return self.kv.total_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv.total_bytes + self.compute_bytes + self.output_bytes


@dataclass(frozen=True)
class ModeFit:
    """One KV mode of one model against one memory budget."""

    mode: KvMode
    n_ctx: int
    budget_bytes: int
    verdict: str  # FITS | TIGHT | NO_FIT | UNSUPPORTED
    need: MemoryNeed | None = None  # None when UNSUPPORTED
    largest_n_ctx: int = 0  # the largest context whose need stays within the budget (0: none)
    largest_n_ctx_with_margin: int = 0  # ... within the budget less the margin
    reason: str = ""  # why UNSUPPORTED, one sentence

    @property
    def kv_bytes(self) -> int:
        return self.need.kv_bytes if self.need else 0

    @property
    def total_bytes(self) -> int:
        return self.need.total_bytes if self.need else 0


@dataclass(frozen=True)
class FitEstimate:
    """Every KV mode of one model file against one budget (a row of the Models page)."""

    n_ctx: int
    weights_bytes: int
    buffers_bytes: int  # compute + output buffers at n_ctx (estimated), for the first mode
    budget: FreeMemory
    modes: tuple[ModeFit, ...]
    n_ctx_train: int | None = None
    note: str = ""  # e.g. "approximate: this architecture's cache is not a plain KV cache"

    def for_mode(self, label: str) -> ModeFit | None:
        return next((m for m in self.modes if m.mode.label == label), None)


def weights_bytes(header: GgufHeader, file_size: int | None = None) -> int:
    """Bytes the weights take: the tensor data, or the data section of `file_size` when it is
    larger (split models: the first part's header lists only its own tensors)."""
    size = header.tensor_data_bytes
    if file_size is not None:
        size = max(size, file_size - header.data_offset)
    return size


def compute_buffer_estimate(
    header: GgufHeader, kv: KvCacheEstimate, on_gpu: bool = True, flash_attn: bool = True
) -> int:
    """Estimated compute buffer bytes (see the module docstring for how and how good)."""
    peaks = compute_peaks(header, kv, on_gpu=on_gpu, flash_attn=flash_attn)
    return int(_COMPUTE_SAFETY * max(peaks.output, peaks.layer))


@dataclass(frozen=True)
class ComputePeaks:
    """The graph's largest moments, each where it happens: the output layer's, and a
    repeating layer's (its feed-forward block or its attention). A device holding only some
    layers (a split across workers) needs the peaks of the parts it runs."""

    output: int
    layer: int
    mask: int  # the KQ mask, a graph input alive through every layer


def compute_peaks(
    header: GgufHeader, kv: KvCacheEstimate, on_gpu: bool = True, flash_attn: bool = True
) -> ComputePeaks:
    """The peaks compute_buffer_estimate takes the largest of (before its safety factor)."""
    n_ub = kv.n_ubatch
    n_vocab = header.vocab_size or 0
    n_embd = header.embedding_length
    ff = header.arch_get("feed_forward_length", 4 * n_embd)
    n_ff = max(ff) if isinstance(ff, list) else int(ff or 0)
    heads = header.head_count
    n_head = max(heads) if isinstance(heads, list) else heads
    n_kv = max(c.cells for c in kv.caches)
    n_q = n_head * header.key_length
    widest = max((layer.n_embd_k_gqa for layer in kv.layout.layers), default=0) if kv.layout else 0
    # The KQ mask is a graph input, alive through every layer (f16 with Flash Attention).
    mask = n_kv * n_ub * (2 if flash_attn else 4)
    # Peak 1, the output layer: one ubatch's logits and its hidden states.
    output_peak = n_vocab * n_ub * 4 + n_ub * n_embd * 4
    # Peak 2, a feed-forward block: gate/up/product, the residual stream and Q.
    ffn_peak = mask + n_ub * 4 * (3 * n_ff + 4 * n_embd + n_q)
    # Peak 3, attention: Q/K/V of the ubatch, the KQ scores without Flash Attention and, on a
    # GPU, the layer's whole K (and V) converted to f16 when quantized (prompt kernels do that).
    attention_peak = mask + n_ub * 4 * (2 * n_q + 2 * widest + 2 * n_embd)
    if not flash_attn:
        attention_peak += n_kv * n_ub * n_head * 4
    if on_gpu and flash_attn:
        attention_peak += sum(
            n_kv * widest * 2 for kv_type in (kv.mode.k, kv.mode.v) if kv_type.block_values > 1
        )
    return ComputePeaks(output_peak, max(ffn_peak, attention_peak), mask)


def with_safety(n_bytes: int) -> int:
    """A peak with the estimate's own cushion, as compute_buffer_estimate adds it."""
    return int(_COMPUTE_SAFETY * n_bytes)


class ShapeOptions(TypedDict, total=False):
    """The keyword options memory_need and fit_context_length share, as one dict."""

    file_size: int | None
    n_ubatch: int
    n_seq: int
    swa_full: bool
    flash_attn: bool
    on_gpu: bool


def memory_need(
    header: GgufHeader,
    n_ctx: int,
    kv_mode: KvMode | str,
    *,
    file_size: int | None = None,
    n_ubatch: int = 512,
    n_seq: int = 1,
    swa_full: bool = False,
    flash_attn: bool = True,
    on_gpu: bool = True,
) -> MemoryNeed:
    kv = kv_cache_bytes(
        header,
        n_ctx,
        kv_mode,
        n_seq=n_seq,
        n_ubatch=n_ubatch,
        swa_full=swa_full,
        flash_attn=flash_attn,
    )
    return MemoryNeed(
        weights_bytes=weights_bytes(header, file_size),
        kv=kv,
        compute_bytes=compute_buffer_estimate(header, kv, on_gpu=on_gpu, flash_attn=flash_attn),
        output_bytes=(header.vocab_size or 0) * 4 * n_seq,
    )


def verdict(need_bytes: int, budget_bytes: int) -> str:
    if need_bytes <= budget_bytes * (1 - MARGIN):
        return FITS
    if need_bytes <= budget_bytes:
        return TIGHT
    return NO_FIT


def fit_context_length(
    header: GgufHeader,
    budget_bytes: int,
    kv_mode: KvMode | str,
    *,
    max_ctx: int | None = None,
    file_size: int | None = None,
    n_ubatch: int = 512,
    n_seq: int = 1,
    swa_full: bool = False,
    flash_attn: bool = True,
    on_gpu: bool = True,
) -> int:
    """The largest n_ctx (a multiple of 256, at most `max_ctx`, default the trained context)
    whose need fits in `budget_bytes`; 0 when not even 256 tokens fit."""
    limit = max_ctx or header.context_length or 131072
    hi = max(1, limit // _CTX_STEP)

    def fits(steps: int) -> bool:
        need = memory_need(
            header,
            steps * _CTX_STEP,
            kv_mode,
            file_size=file_size,
            n_ubatch=n_ubatch,
            n_seq=n_seq,
            swa_full=swa_full,
            flash_attn=flash_attn,
            on_gpu=on_gpu,
        )
        return need.total_bytes <= budget_bytes

    if not fits(1):
        return 0
    lo = 1  # fits(lo) holds; need grows with n_ctx, so bisect
    if fits(hi):
        return hi * _CTX_STEP
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo * _CTX_STEP


def fit_estimate(
    header: GgufHeader,
    file_size: int | None,
    n_ctx: int,
    budget_bytes: int,
    modes: tuple[KvMode, ...] = COMPARE_MODES,
    *,
    n_ubatch: int = 512,
    n_seq: int = 1,
    swa_full: bool = False,
    flash_attn: bool = True,
    on_gpu: bool = True,
) -> tuple[ModeFit, ...]:
    """Per KV mode: the memory needed at `n_ctx`, the verdict against `budget_bytes`, and
    the largest context that fits (for the Hub's file list and `kvstudio fit`).

    `file_size`: the whole model's bytes (all parts of a split model), or None for the
    header's own tensors; `on_gpu`: the budget is VRAM (counts the GPU-only scratch).
    """
    if n_ctx <= 0:
        raise BadInputError(f"The context size must be a positive number of tokens, not {n_ctx}.")
    if budget_bytes <= 0:
        raise BadInputError("The memory budget must be more than zero.")
    options: ShapeOptions = {
        "file_size": file_size,
        "n_ubatch": n_ubatch,
        "n_seq": n_seq,
        "swa_full": swa_full,
        "flash_attn": flash_attn,
        "on_gpu": on_gpu,
    }
    results = []
    for mode in modes:
        need = memory_need(header, n_ctx, mode, **options)
        largest = fit_context_length(header, budget_bytes, mode, **options)
        largest_margin = fit_context_length(
            header,
            int(budget_bytes * (1 - MARGIN)),
            mode,
            **options,
        )
        results.append(
            ModeFit(
                mode,
                n_ctx,
                budget_bytes,
                verdict(need.total_bytes, budget_bytes),
                need,
                largest,
                largest_margin,
            )
        )
    return tuple(results)


def estimate_fit(
    header: GgufHeader,
    file_size: int | None,
    n_ctx: int,
    budget: FreeMemory,
    modes: tuple[KvMode, ...] = COMPARE_MODES,
) -> FitEstimate:
    """fit_estimate for every mode against `budget` (free VRAM, or RAM, as the probes read
    it), a mode llama.cpp refuses for this model marked UNSUPPORTED with the reason.
    BadInputError when no mode can be estimated."""
    results: list[ModeFit] = []
    for mode in modes:
        try:
            (fit,) = fit_estimate(
                header, file_size, n_ctx, budget.bytes, (mode,), on_gpu=budget.on_gpu
            )
        except BadInputError as error:
            # e.g. q8_0 needs a head size divisible by 32: llama.cpp refuses that cache type.
            results.append(ModeFit(mode, n_ctx, budget.bytes, UNSUPPORTED, reason=str(error)))
            continue
        results.append(fit)
    first = next((m.need for m in results if m.need is not None), None)
    if first is None:
        raise BadInputError(results[0].reason if results else "No KV cache mode can be estimated.")
    note = (
        ""
        if first.kv.exact
        else first.kv.note or "The KV estimate is approximate for this architecture."
    )
    return FitEstimate(
        n_ctx=n_ctx,
        weights_bytes=first.weights_bytes,
        buffers_bytes=first.compute_bytes + first.output_bytes,
        budget=budget,
        modes=tuple(results),
        n_ctx_train=header.context_length,
        note=note,
    )
