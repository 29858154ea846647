"""The KV cache bytes llama.cpp (0.3.36) allocates, exactly, from a GGUF header and load options.

The arithmetic, with the llama.cpp source it mirrors (vendor/llama.cpp/src):

  llama-context.cpp (llama_context ctor):
    n_batch  = min(n_ctx, n_batch)            (causal models; llama-cpp-python does the same)
    n_ubatch = min(n_batch, n_ubatch)
    n_ctx    = GGML_PAD(n_ctx, 256)
    n_ctx_seq = n_ctx if kv_unified else GGML_PAD(n_ctx / n_seq_max, 256)
  llama-model.cpp (create_memory): a model with SWA layers gets llama_kv_cache_iswa,
    others llama_kv_cache, both with kv_size = n_ctx_seq and n_pad = 1.
  llama-kv-cache-iswa.cpp: global cache size = n_ctx_seq;
    SWA cache size = GGML_PAD(min(n_ctx_seq, n_swa * (unified ? n_seq_max : 1) + n_ubatch), 256),
    or n_ctx_seq with swa_full.
  llama-kv-cache.cpp: per KV layer, K = ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream),
    V likewise with n_embd_v_gqa (n_embd_v_gqa_max when V is transposed, i.e. without Flash
    Attention); n_stream = 1 if unified else n_seq_max; size = sum of ggml_nbytes.
  ggml.c ggml_nbytes: row_size(type, ne0) * ne1 * ne2 for these contiguous tensors.

It logs `llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB,
V (%s): %7.2f MiB` with (float)bytes / (1024.0f * 1024.0f); `CacheSize.log_line()` reproduces it.

Note: llama.cpp's own default is swa_full=true (llama_context_default_params), and
llama-cpp-python keeps it unless `swa_full=` is passed; callers must pass the value they load with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.kv.kv_layout import KvLayout, kv_layout
from app.kv.kv_types import DEFAULT_KV_MODE, FP16_KV_MODE, KvMode, KvType
from app.models.gguf_header import GgufHeader
from app.platform.errors import BadInputError
from app.platform.units import llama_mib


def ggml_pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


@dataclass(frozen=True)
class CacheSize:
    """One llama_kv_cache (llama.cpp logs one line per cache)."""

    swa: bool  # the sliding-window cache of an iSWA model
    cells: int  # kv_size
    layers: int
    n_seq_max: int
    n_stream: int
    k_type: str
    v_type: str
    k_bytes: int
    v_bytes: int
    k_bytes_per_cell: int  # over all layers and streams
    v_bytes_per_cell: int
    window: int = 0  # n_swa for the SWA cache

    @property
    def total_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    @property
    def name(self) -> str:
        return "sliding-window" if self.swa else "global"

    def log_line(self) -> str:
        """The `llama_kv_cache: size = ...` line llama.cpp prints for this cache."""
        return (
            f"llama_kv_cache: size = {llama_mib(self.total_bytes)} MiB "
            f"({self.cells:6d} cells, {self.layers:3d} layers, "
            f"{self.n_seq_max:2d}/{self.n_stream} seqs), "
            f"K ({self.k_type}): {llama_mib(self.k_bytes)} MiB, "
            f"V ({self.v_type}): {llama_mib(self.v_bytes)} MiB"
        )

    def cells_in_use(self, n_tokens: int, n_ubatch: int) -> int:
        if not self.swa:
            return min(n_tokens, self.cells)
        # SWA cells older than the window are freed before each ubatch (approximate).
        return min(n_tokens, self.cells, self.window + n_ubatch)


@dataclass(frozen=True)
class KvUsage:
    """KV bytes holding tokens when `n_tokens` are in the context."""

    n_tokens: int
    bytes: int  # with the estimate's K/V types
    fp16_bytes: int  # the same cells with an f16/f16 cache
    allocated_bytes: int
    fp16_allocated_bytes: int

    @property
    def saving_bytes(self) -> int:
        return self.fp16_bytes - self.bytes


@dataclass(frozen=True)
class KvCacheEstimate:
    mode: KvMode
    n_ctx_requested: int
    n_ctx: int  # cparams.n_ctx after padding
    n_ctx_seq: int
    n_seq: int
    n_ubatch: int  # effective ubatch
    caches: tuple[CacheSize, ...]  # in llama.cpp's log order: global first, then SWA
    exact: bool = True
    note: str = ""
    layout: KvLayout | None = None
    options: dict[str, object] | None = None

    @property
    def k_bytes(self) -> int:
        return sum(c.k_bytes for c in self.caches)

    @property
    def v_bytes(self) -> int:
        return sum(c.v_bytes for c in self.caches)

    @property
    def total_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    def cache(self, swa: bool) -> CacheSize | None:
        return next((c for c in self.caches if c.swa == swa), None)

    def fp16_equivalent(self) -> KvCacheEstimate:
        return fp16_equivalent(self)

    def bytes_in_use(self, n_tokens: int) -> KvUsage:
        """Bytes of cells holding tokens when `n_tokens` are in context (for the 'KV as the
        context fills' chart), next to what f16/f16 would hold for the same tokens."""
        used = fp16_used = 0
        fp16 = self.fp16_equivalent()
        for cache, cache16 in zip(self.caches, fp16.caches, strict=True):
            cells = cache.cells_in_use(max(0, n_tokens), self.n_ubatch)
            used += cells * (cache.k_bytes_per_cell + cache.v_bytes_per_cell)
            fp16_used += cells * (cache16.k_bytes_per_cell + cache16.v_bytes_per_cell)
        return KvUsage(n_tokens, used, fp16_used, self.total_bytes, fp16.total_bytes)


def _check_block(kv: KvType, head: int, which: str) -> None:
    if head % kv.block_values:
        raise BadInputError(
            f"The {which} cache type {kv.name} needs a head size divisible by {kv.block_values}; "
            f"this model's is {head}."
        )


def _mode(kv_mode: KvMode | str) -> KvMode:
    return kv_mode if isinstance(kv_mode, KvMode) else KvMode.parse(kv_mode)


def kv_cache_bytes(
    header: GgufHeader,
    n_ctx: int,
    kv_mode: KvMode | str = DEFAULT_KV_MODE,
    n_seq: int = 1,
    n_ubatch: int = 512,
    swa_full: bool = False,
    *,
    n_batch: int = 512,
    flash_attn: bool = True,
    kv_unified: bool = False,
) -> KvCacheEstimate:
    """The KV caches llama.cpp allocates for this model at `n_ctx` (0: the trained context).

    Raises BadInputError for n_ctx < 0, n_seq < 1, an unknown KV type, or a quantized type
    whose block does not divide the head size (llama.cpp refuses those).
    """
    mode = _mode(kv_mode)
    if n_ctx < 0 or (n_ctx == 0 and not header.context_length):
        raise BadInputError(f"The context size must be a positive number of tokens, not {n_ctx}.")
    if n_seq < 1 or n_ubatch < 1 or n_batch < 1:
        raise BadInputError("n_seq, n_batch and n_ubatch must be at least 1.")
    layout = kv_layout(header)
    for layer in layout.layers:
        _check_block(mode.k, layer.head_k, "K")
        _check_block(mode.v, layer.head_v, "V")
    if not flash_attn and mode.v.block_values > 1:
        raise BadInputError("A quantized V cache needs Flash Attention.")

    requested = n_ctx or int(header.context_length or 0)
    eff_ubatch = min(requested, n_batch, n_ubatch)
    padded = ggml_pad(requested, 256)
    n_ctx_seq = padded if kv_unified else ggml_pad(padded // n_seq, 256)
    n_stream = 1 if kv_unified else n_seq

    sizes = [(False, n_ctx_seq)]
    if layout.has_swa:
        swa_cells = ggml_pad(
            min(n_ctx_seq, layout.n_swa * (n_seq if kv_unified else 1) + eff_ubatch), 256
        )
        sizes.append((True, n_ctx_seq if swa_full else swa_cells))
    options: dict[str, object] = {
        "n_seq": n_seq,
        "n_ubatch": n_ubatch,
        "swa_full": swa_full,
        "n_batch": n_batch,
        "flash_attn": flash_attn,
        "kv_unified": kv_unified,
    }
    return KvCacheEstimate(
        mode=mode,
        n_ctx_requested=requested,
        n_ctx=padded if kv_unified else n_ctx_seq * n_seq,
        n_ctx_seq=n_ctx_seq,
        n_seq=n_seq,
        n_ubatch=eff_ubatch,
        caches=_caches(layout, mode, sizes, n_seq, n_stream, flash_attn),
        exact=layout.exact,
        note=layout.note,
        layout=layout,
        options=options,
    )


def _caches(
    layout: KvLayout,
    mode: KvMode,
    sizes: list[tuple[bool, int]],
    n_seq: int,
    n_stream: int,
    flash_attn: bool,
) -> tuple[CacheSize, ...]:
    caches = []
    for swa, cells in sizes:
        layers = layout.cache_layers(swa) if layout.has_swa else layout.layers
        k_cell = sum(mode.k.row_bytes(layer.n_embd_k_gqa) for layer in layers) * n_stream
        # Without Flash Attention V is stored transposed and padded to the widest layer.
        v_cell = (
            sum(
                mode.v.row_bytes(layer.n_embd_v_gqa if flash_attn else layout.n_embd_v_gqa_max)
                for layer in layers
            )
            * n_stream
        )
        caches.append(
            CacheSize(
                swa=swa,
                cells=cells,
                layers=len(layers),
                n_seq_max=n_seq,
                n_stream=n_stream,
                k_type=mode.k.name,
                v_type=mode.v.name,
                k_bytes=k_cell * cells,
                v_bytes=v_cell * cells,
                k_bytes_per_cell=k_cell,
                v_bytes_per_cell=v_cell,
                window=layout.n_swa if swa else 0,
            )
        )
    return tuple(caches)


def fp16_equivalent(estimate: KvCacheEstimate) -> KvCacheEstimate:
    """The same caches (cells, layers, streams) with f16 K and V."""
    if estimate.mode == FP16_KV_MODE or estimate.layout is None:
        return estimate
    sizes = [(c.swa, c.cells) for c in estimate.caches]
    first = estimate.caches[0]
    flash_attn = bool((estimate.options or {}).get("flash_attn", True))
    caches = _caches(
        estimate.layout, FP16_KV_MODE, sizes, first.n_seq_max, first.n_stream, flash_attn
    )
    return replace(estimate, mode=FP16_KV_MODE, caches=caches)
