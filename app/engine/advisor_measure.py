"""What the KV advisor measures, and what it learns from every comparison.

`remember_comparison(result)` keeps a finished comparison's quality and decode speed per
mode in the advisor's store (the dashboard's Compare and `kvstudio bench` call it), so the
next advice for that model file is measured rather than unknown. `measure_for_advice(path)`
is the advisor's own short run: every KV mode in a fresh engine, a few hundred scored tokens
of quality and a short decode; `measurement_steps(path)` says how long it will take, from
this model's stored speed when there is one.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.compare import run_compare
from app.engine.compare_estimate import CompareSteps, compare_steps, rates_from_session
from app.engine.compare_one_mode import ProgressCallback
from app.engine.compare_result import CompareResult
from app.kv.advisor import ModeMeasurement
from app.kv.advisor_store import MeasurementStore
from app.kv.kv_types import KV_MODES
from app.load.advice import missing_pairs, remember_measurements
from app.models.gguf_read import read_gguf_header
from app.models.model_files import model_size
from app.platform.paths import data_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShortMeasurement:
    """The advisor's short run: quality over `quality_chunks` chunks (the second half of
    each is scored: 2 x 255 tokens by default) and decode speed at depth 0."""

    n_ctx: int = 1024
    chunk_tokens: int = 512
    quality_chunks: int = 2
    n_prompt: int = 64
    n_gen: int = 32
    repetitions: int = 1

    @property
    def scored_tokens(self) -> int:
        return self.quality_chunks * (self.chunk_tokens - self.chunk_tokens // 2 - 1)


SHORT = ShortMeasurement()


def measurements_of(result: CompareResult) -> list[ModeMeasurement]:
    now = time.time()
    return [
        ModeMeasurement(
            m.mode.label,
            m.mean_kl_divergence if m.scored_tokens else None,
            m.top1_agreement if m.scored_tokens else None,
            m.scored_tokens,
            m.decode_tokens_per_second,
            result.depth,
            now,
        )
        for m in result.modes
    ]


def remember_comparison(result: CompareResult, source: str = "compare") -> None:
    """Keep `result` for the advisor; a store that cannot be written costs the advice, never
    the comparison (logged)."""
    try:
        remember_measurements(Path(result.model_path), measurements_of(result), source)
    except Exception as error:  # noqa: BLE001 - the run itself succeeded: keep its result
        log.warning("the comparison could not be kept for the KV advisor: %s", error)


def _modes_here(folder: Path) -> list[str]:
    missing = missing_pairs(folder)
    return [mode.label for mode in KV_MODES if mode not in missing]


def measurement_steps(
    path: Path, short: ShortMeasurement = SHORT, folder: Path | None = None
) -> CompareSteps:
    """The short run's steps and their estimated seconds: from this file's stored decode
    speed when a run measured it, else from the file's size."""
    folder = folder or data_dir()
    store = MeasurementStore(folder)
    measured = store.for_model(store.identity(path, read_gguf_header(path)).sha256)
    speeds = [m.decode_tokens_per_second for m in measured.modes] if measured else []
    decode = max((s for s in speeds if s), default=0.0)
    rates = rates_from_session(model_size(path), decode_tokens_per_second=decode)
    if decode:
        rates = replace(rates, source="this model's measured decode speed")
    return compare_steps(
        rates,
        modes=_modes_here(folder),
        n_prompt=short.n_prompt,
        n_gen=short.n_gen,
        repetitions=short.repetitions,
        quality_chunks=short.quality_chunks,
        chunk_tokens=short.chunk_tokens,
    )


def measure_for_advice(
    path: Path,
    short: ShortMeasurement = SHORT,
    progress_cb: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    n_gpu_layers: int = -1,
    n_threads: int | None = None,
) -> CompareResult:
    """The short run on every mode this backend has, kept in the advisor's store."""
    result = run_compare(
        path,
        n_ctx=short.n_ctx,
        depth=0,
        modes=_modes_here(data_dir()),
        progress_cb=progress_cb,
        cancel=cancel,
        n_gpu_layers=n_gpu_layers,
        n_prompt=short.n_prompt,
        n_gen=short.n_gen,
        quality_chunks=short.quality_chunks,
        chunk_tokens=short.chunk_tokens,
        n_threads=n_threads,
        repetitions=short.repetitions,
        load_advice="the short measurement needs a context of "
        f"{short.n_ctx:,} tokens; free some memory",
    )
    remember_comparison(result, source="advisor")
    return result
