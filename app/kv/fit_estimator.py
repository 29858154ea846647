"""Fit verdicts for the GGUF files of a Hub repo, before anything is downloaded.

Quantizations of one model share their hyperparameters, so one header per model family
(that of its smallest file, read with range requests) serves every quantization: the KV
bytes and buffers come from it and the weights from each file's own size. A repo with 25
quantizations then costs one header's range reads, not 25. Thread-safe: the Models page
asks from several worker threads at once.

    estimator = FitEstimator()                     # remote headers, the probes' free memory
    estimator.set_entries(repo.entries)
    estimator(entry, 8192).modes[1].verdict        # 'fits' / 'tight' / 'does not fit' / ...
    estimator.curated(CURATED_MODELS[0], 8192)     # a recommended model, from its stated shape
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from app.kv.fit import FitEstimate, estimate_fit
from app.models.gguf_header import GgufHeader
from app.models.hub import GgufEntry, fetch_remote_header
from app.models.hub.curated_models import CuratedModel
from app.platform.probes import FreeMemory, read_free_memory


def remote_header(entry: GgufEntry) -> GgufHeader:
    """The header of the entry's first file, from a few MiB of range reads."""
    return fetch_remote_header(entry.repo_id, entry.first_file)


def model_family(entry: GgufEntry) -> str:
    """The entry's name without its quantization: quantizations of one model share it.

    'gemma-3-1b-it-Q4_K_M.gguf', 'gemma-3-1b-it-Q8_0.gguf' and the split set
    'gemma-3-1b-it-BF16' (parts -0000N-of-0000M.gguf) -> 'owner/repo/gemma-3-1b-it-'.
    """
    name = entry.name.removesuffix(".gguf").removesuffix(".GGUF")
    quant = entry.quantization
    if quant:
        at = name.upper().rfind(quant.upper())
        if at >= 0:
            name = name[:at] + name[at + len(quant) :]
    return f"{entry.repo_id}/{name}"


class FitEstimator:
    """estimator(entry, n_ctx) -> FitEstimate for Hub entries.

    `header_fn(entry)`: the GgufHeader of an entry's first file; `budget_fn()`: the memory
    to fit into, read once until refresh_budget() so every row compares against one figure.
    """

    def __init__(
        self,
        header_fn: Callable[[GgufEntry], GgufHeader] = remote_header,
        budget_fn: Callable[[], FreeMemory] = read_free_memory,
    ) -> None:
        self.header_fn = header_fn
        self.budget_fn = budget_fn
        self._budget: FreeMemory | None = None
        self._lock = threading.Lock()
        self._representative: dict[str, GgufEntry] = {}  # family -> its smallest entry
        self._headers: dict[str, GgufHeader] = {}  # family -> header
        self._family_locks: dict[str, threading.Lock] = {}

    def budget(self) -> FreeMemory:
        with self._lock:
            if self._budget is None:
                self._budget = self.budget_fn()
            return self._budget

    def refresh_budget(self) -> None:
        with self._lock:
            self._budget = None

    def set_entries(self, entries: Iterable[GgufEntry]) -> None:
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

    def header(self, entry: GgufEntry) -> GgufHeader:
        family = model_family(entry)
        with self._lock:
            source = self._representative.get(family, entry)
            family_lock = self._family_locks.setdefault(family, threading.Lock())
        with family_lock:  # the first task reads it; the others wait and reuse it
            with self._lock:
                cached = self._headers.get(family)
            if cached is not None:
                return cached
            header = self.header_fn(source)
            with self._lock:
                self._headers[family] = header
            return header

    def __call__(self, entry: GgufEntry, n_ctx: int) -> FitEstimate:
        return estimate_fit(self.header(entry), entry.total_size, n_ctx, self.budget())

    def curated(self, model: CuratedModel, n_ctx: int) -> FitEstimate:
        """The fit of a recommended model's file at `n_ctx` (at most its trained context),
        from the shape its header states: no network."""
        n_ctx = min(n_ctx, model.shape.n_ctx_train)
        return estimate_fit(model.header(), model.size_bytes, n_ctx, self.budget())
