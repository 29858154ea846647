"""The KV advisor for a model file on this machine: reads what app.kv.advisor decides from
(the header, the free memory a load goes into, the K/V pairs the running backend has, the
stored measurements) and hands back its Advice. One function, so `kvstudio advise` and the
load dialog's Auto give the same answer.

    advice = advise_model(path)                 # blocking: header, sha256, free memory
    remember_measurements(path, modes)          # what a Compare run measured, kept
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from app.backends.manifest import handles_pair
from app.backends.store import BackendStore
from app.kv.advisor import DEFAULT_MAX_KL, Advice, ModeMeasurement, advise, check_max_kl
from app.kv.advisor_store import MeasurementStore
from app.kv.fit import estimate_fit
from app.kv.kv_types import KV_MODES, KvMode
from app.load.load_check import check_context_size, check_trained_context, free_memory_for
from app.models.gguf_read import read_gguf_header
from app.models.model_files import model_size
from app.platform.paths import data_dir
from app.platform.probes import FREE_MEMORY_ENV
from app.platform.units import size

log = logging.getLogger(__name__)

ADVICE_CONTEXT = "ask for a smaller context"


def missing_pairs(folder: Path) -> dict[KvMode, str]:
    """The modes the chosen backend's GPU Flash Attention has no kernel for (from its
    package's manifest; the built-in and CPU builds run every pair)."""
    backend, _ = BackendStore(folder).for_engine()
    pairs = backend.manifest.fa_pairs if backend.manifest is not None else ()
    return {
        mode: f"The {backend.name} backend has no Flash Attention kernel for {mode.label}."
        for mode in KV_MODES
        if not handles_pair(pairs, mode)
    }


def advise_model(
    path: Path,
    *,
    max_kl: float = DEFAULT_MAX_KL,
    context: int | None = None,
    n_gpu_layers: int = -1,
    folder: Path | None = None,
) -> Advice:
    """The advice for the model file at `path` with its layers as `n_gpu_layers` puts them.
    Raises BadInputError for a bad budget or context, InvalidGgufError for a bad file."""
    check_max_kl(max_kl)
    if context is not None:
        check_context_size(context, "The context")
    folder = folder or data_dir()
    header = read_gguf_header(path)
    if context is not None:
        check_trained_context(header, context, ADVICE_CONTEXT)
    budget = free_memory_for(n_gpu_layers, header.block_count)
    n_ctx = context or header.context_length or 4096
    fit = estimate_fit(header, model_size(path), n_ctx, budget, KV_MODES)
    store = MeasurementStore(folder)
    model = store.identity(path, header)
    capped = f" (capped by {FREE_MEMORY_ENV})" if budget.source == FREE_MEMORY_ENV else ""
    words = f"{size(budget.bytes, 1)} free in {budget.device}{capped}"
    return advise(
        model,
        fit.modes,
        store.measurements(),
        budget_words=words,
        max_kl=max_kl,
        context=context,
        unavailable=missing_pairs(folder),
    )


def remember_measurements(
    path: Path, modes: Sequence[ModeMeasurement], source: str, folder: Path | None = None
) -> None:
    """Keep what a run measured on the model at `path`, for the advice from now on."""
    store = MeasurementStore(folder or data_dir())
    store.add(store.identity(path, read_gguf_header(path)), modes, source)
