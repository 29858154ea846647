"""The fit estimate shown next to each GGUF on the Hub: what this model needs here.

Plain Python (no Qt) that combines core pieces: the remote GGUF header (range reads),
app.core.fit (exact KV bytes + estimated compute buffer, verdict, largest context) and
the free memory of this machine. It runs on a TaskRunner thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core import fit as core_fit
from app.core.errors import BadInputError
from app.core.gguf_header import GgufHeader
from app.core.kv_types import COMPARE_MODES, KvMode

log = logging.getLogger(__name__)

FITS, TIGHT, NO_FIT = core_fit.FITS, core_fit.TIGHT, core_fit.NO_FIT
UNSUPPORTED = "not supported"  # llama.cpp refuses this K/V type for this model


@dataclass(frozen=True)
class ModeFit:
    mode: KvMode
    kv_bytes: int  # KV cache at the chosen context (exact, as llama.cpp allocates it)
    total_bytes: int  # weights + KV + compute and output buffers
    verdict: str  # FITS | TIGHT | NO_FIT | UNSUPPORTED
    max_context: int  # largest context that fits the budget (0: not even the weights)
    reason: str = ""  # why UNSUPPORTED, one sentence


@dataclass(frozen=True)
class FitEstimate:
    n_ctx: int
    weights_bytes: int
    buffers_bytes: int  # compute + output buffers at n_ctx (estimated), for the first mode
    budget_bytes: int
    budget_label: str  # "free VRAM (NVIDIA H200)" or "free RAM"
    modes: tuple[ModeFit, ...]
    n_ctx_train: int | None = None
    note: str = ""  # e.g. "approximate: this architecture's cache is not a plain KV cache"

    def for_mode(self, label: str) -> ModeFit | None:
        return next((m for m in self.modes if m.mode.label == label), None)


def free_memory() -> tuple[int, str, bool]:
    """(bytes, label, on_gpu) of the memory a model would load into: free VRAM of the GPU the
    core's probes find (NVML, amdsmi, AMD sysfs), else free system RAM."""
    from app.core.probes import read_free_memory

    free = read_free_memory()
    if free.on_gpu:
        return free.bytes, f"free VRAM ({free.device})", True
    return free.bytes, "free RAM", False


def estimate(header: GgufHeader, file_size: int, n_ctx: int, budget: tuple[int, str, bool],
             modes: tuple[KvMode, ...] = COMPARE_MODES) -> FitEstimate:
    budget_bytes, label, on_gpu = budget
    results: list[ModeFit] = []
    first: core_fit.MemoryNeed | None = None
    for mode in modes:
        try:
            (f,) = core_fit.fit_estimate(header, file_size, n_ctx, budget_bytes, (mode,), on_gpu=on_gpu)
        except BadInputError as error:
            # e.g. q8_0 needs a head size divisible by 32: llama.cpp refuses that cache type.
            results.append(ModeFit(mode, 0, 0, UNSUPPORTED, 0, str(error)))
            continue
        first = first or f.need
        results.append(ModeFit(f.mode, f.need.kv_bytes, f.need.total_bytes, f.verdict, f.largest_n_ctx))
    if first is None:
        raise BadInputError(results[0].reason if results else "No KV cache mode can be estimated.")
    note = ""
    if not first.kv.exact:
        note = first.kv.note or "The KV estimate is approximate for this architecture."
    return FitEstimate(
        n_ctx=n_ctx,
        weights_bytes=first.weights_bytes,
        buffers_bytes=first.compute_bytes + first.output_bytes,
        budget_bytes=budget_bytes,
        budget_label=label,
        modes=tuple(results),
        n_ctx_train=header.context_length,
        note=note,
    )


def model_family(entry: Any) -> str:
    """The entry's name without its quantization: quantizations of one model share it.

    'gemma-3-1b-it-Q4_K_M.gguf', 'gemma-3-1b-it-Q8_0.gguf' and the split set
    'gemma-3-1b-it-BF16' (parts -0000N-of-0000M.gguf) -> 'owner/repo/gemma-3-1b-it-'.
    """
    name = entry.name.removesuffix(".gguf").removesuffix(".GGUF")
    quant = entry.quantization
    if quant:
        at = name.upper().rfind(quant.upper())
        if at >= 0:
            name = name[:at] + name[at + len(quant):]
    return f"{entry.repo_id}/{name}"


class FitEstimator:
    """fit(entry, n_ctx) for Hub entries (thread-safe).

    Quantizations of one model share their hyperparameters, so one header per model family
    (that of its smallest file) serves every quantization: the KV bytes and buffers come
    from it and the weights from each file's own size. A repo with 25 quantizations then
    costs one header's range reads, not 25.

    `header_fn(entry)` returns the GgufHeader of an entry's first file (range requests);
    `budget_fn()` returns (bytes, label, on_gpu) of the memory to fit into, read once until
    refresh_budget() so every row compares against the same figure.
    """

    def __init__(self, header_fn: Callable[[Any], GgufHeader],
                 budget_fn: Callable[[], tuple[int, str, bool]] = free_memory) -> None:
        self._header_fn = header_fn
        self._budget_fn = budget_fn
        self._budget: tuple[int, str, bool] | None = None
        self._lock = threading.Lock()
        self._representative: dict[str, Any] = {}  # family -> its smallest entry
        self._headers: dict[str, GgufHeader] = {}  # family -> header
        self._family_locks: dict[str, threading.Lock] = {}

    def budget(self) -> tuple[int, str, bool]:
        with self._lock:
            if self._budget is None:
                self._budget = self._budget_fn()
            return self._budget

    def refresh_budget(self) -> None:
        with self._lock:
            self._budget = None

    def set_entries(self, entries: Any) -> None:
        """The entries of the repo being shown (to pick one header per model family)."""
        with self._lock:
            for entry in entries:
                family = model_family(entry)
                current = self._representative.get(family)
                if current is None or entry.total_size < current.total_size:
                    self._representative[family] = entry
                    self._headers.pop(family, None)

    def forget_headers(self) -> None:
        with self._lock:
            self._headers.clear()

    def header(self, entry: Any) -> GgufHeader:
        family = model_family(entry)
        with self._lock:
            source = self._representative.get(family, entry)
            family_lock = self._family_locks.setdefault(family, threading.Lock())
        with family_lock:  # the first task reads it; the others wait and reuse it
            with self._lock:
                cached = self._headers.get(family)
            if cached is not None:
                return cached
            header = self._header_fn(source)
            with self._lock:
                self._headers[family] = header
            return header

    def __call__(self, entry: Any, n_ctx: int) -> FitEstimate:
        return estimate(self.header(entry), entry.total_size, n_ctx, self.budget())
