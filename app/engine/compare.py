"""The A/B comparison of KV cache modes, measured (no Qt; used by `kvstudio bench` and the
dashboard's Compare section through app/services/compare_runner.py).

For each mode, a fresh engine process: load (KV bytes from llama.cpp's own log), Bench
(prompt and decode tokens/s at a depth), Evaluate (perplexity; KL divergence and top-1
agreement against the f16/f16 run), while a sampler thread reads the memory probe for the
engine's pid at 10 Hz (one mode's steps: app.engine.compare_one_mode). The whole run is one
Recording with markers, so it can be replayed.

    result = run_compare("model.gguf", n_ctx=8192, depth=4096)
    print(result.to_csv()); result.recording.save("run.json")
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

from app.engine.compare_one_mode import ProgressCallback, RunProgress, measure_mode
from app.engine.compare_result import CompareResult, ModeResult
from app.engine.messages import Bench, Evaluate
from app.engine.quality import default_reference_text
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import COMPARE_MODES, FP16_KV_MODE, KvMode
from app.load.load_check import CLI_ADVICE, check_model_load
from app.load.profile import LoadProfile
from app.models.gguf_read import read_gguf_header
from app.platform.errors import AppError, BadInputError
from app.platform.probes import MemoryProbe, detect_probe
from app.platform.recording import ProbeSampler, Recording

log = logging.getLogger(__name__)

DEFAULT_MODES = tuple(mode.label for mode in COMPARE_MODES)


class CompareOptions(TypedDict, total=False):
    """run_compare's settings besides the model, context and depth, as a caller that runs it
    for someone else (app.services.compare_runner) passes them on."""

    modes: Sequence[str | KvMode] | str | None
    reference_text: str | None
    n_gpu_layers: int
    n_prompt: int
    n_gen: int
    quality_chunks: int
    chunk_tokens: int
    n_threads: int | None
    repetitions: int
    sample_hz: float
    force: bool


class KvEstimate(TypedDict):
    """One mode's KV arithmetic as a recording's metadata keeps it (JSON)."""

    n_ctx: int
    n_ubatch: int
    total_bytes: int
    caches: list[dict[str, object]]  # each KvCacheEstimate's fields


def parse_modes(modes: Sequence[str | KvMode] | str | None) -> list[KvMode]:
    """KV modes to compare, f16/f16 first (quality and savings are measured against it;
    it is added when missing). Raises BadInputError for an unknown type."""
    if modes is None:
        modes = DEFAULT_MODES
    if isinstance(modes, str):
        modes = [m for m in modes.split(",") if m.strip()]
    parsed: list[KvMode] = []
    for mode in modes:
        kv = mode if isinstance(mode, KvMode) else KvMode.parse(mode.strip())
        if kv not in parsed:
            parsed.append(kv)
    if not parsed:
        raise BadInputError("Give at least one KV mode to compare, for example q8_0/f16.")
    if FP16_KV_MODE in parsed:
        parsed.remove(FP16_KV_MODE)
    return [FP16_KV_MODE, *parsed]


def detect_default_probe(gpu: bool = True) -> MemoryProbe:
    """The best memory probe here (NVML, amdsmi, AMD sysfs; psutil when `gpu` is False
    or none of those is available)."""

    return detect_probe(gpu=gpu)


def probe_description(probe: MemoryProbe) -> tuple[str, str, str]:
    """(name, device name, limits in words) of a probe."""
    return probe.name, probe.device, probe.limits


def _kv_estimates(path: Path, n_ctx: int, modes: list[KvMode]) -> dict[str, KvEstimate]:
    """Per mode, the caches app.kv.kv_cache computes for the GGUF (cells and bytes per
    cell), so a saved run can draw 'KV as the context fills' without the model file."""
    try:
        header = read_gguf_header(path)
        estimates = {m.label: kv_cache_bytes(header, n_ctx, m) for m in modes}
    except AppError as error:
        log.warning("no KV arithmetic for %s: %s", path, error)
        return {}
    return {
        label: KvEstimate(
            n_ctx=e.n_ctx,
            n_ubatch=e.n_ubatch,
            total_bytes=e.total_bytes,
            caches=[asdict(c) for c in e.caches],
        )
        for label, e in estimates.items()
    }


def _check_settings(
    path: Path,
    n_ctx: int,
    depth: int,
    n_prompt: int,
    n_gen: int,
    quality_chunks: int,
    chunk_tokens: int,
) -> None:
    """Raises BadInputError for a missing model file or settings that do not fit the context."""
    if not path.is_file():
        raise BadInputError(f"No model file at {path}.")
    if n_ctx < 256:
        raise BadInputError("The context must be at least 256 tokens for a comparison.")
    if depth < 0 or depth + max(n_prompt, n_gen) > n_ctx:
        raise BadInputError(
            f"Depth {depth} plus {max(n_prompt, n_gen)} measured tokens must fit the "
            f"{n_ctx}-token context."
        )
    if quality_chunks < 0 or (quality_chunks and chunk_tokens > n_ctx):
        raise BadInputError(
            f"Quality chunks of {chunk_tokens} tokens must fit the {n_ctx}-token context."
        )


@dataclass(frozen=True)
class _ModeCommands:
    """What each mode's engine is asked to measure: the same speed run and quality pass."""

    depth: int
    n_prompt: int
    n_gen: int
    repetitions: int
    quality_chunks: int  # 0: no quality pass
    chunk_tokens: int
    text: str

    def for_mode(self, mode: KvMode, reference_path: str) -> tuple[Bench, Evaluate | None]:
        """The Bench and Evaluate for `mode`; f16/f16 writes the reference the others read."""
        bench = Bench(
            uuid.uuid4().hex,
            depth=self.depth,
            n_prompt=self.n_prompt,
            n_gen=self.n_gen,
            repetitions=self.repetitions,
        )
        if not self.quality_chunks:
            return bench, None
        evaluate = Evaluate(
            uuid.uuid4().hex,
            self.text,
            chunk_tokens=self.chunk_tokens,
            n_chunks=self.quality_chunks,
            logprobs_path=reference_path,
            write_reference=mode == FP16_KV_MODE,
        )
        return bench, evaluate


def _load_profiles(
    path: Path, modes: list[KvMode], n_ctx: int, n_gpu_layers: int, n_threads: int | None
) -> dict[KvMode, LoadProfile]:
    """Each mode's load: the same model, context and layers, Flash Attention on."""
    return {
        mode: LoadProfile(
            model_path=str(path),
            n_ctx=n_ctx,
            n_gpu_layers=n_gpu_layers,
            flash_attn=True,
            kv=mode,
            n_threads=n_threads,
        )
        for mode in modes
    }


def _prepared_recording(
    recording: Recording | None,
    probe: MemoryProbe,
    loads: dict[KvMode, LoadProfile],
    commands: _ModeCommands,
) -> Recording:
    """`recording` (a new one when None), named for the probe that fills it, with the run's
    settings and each mode's KV arithmetic in its metadata."""
    probe_name, device_name, limits = probe_description(probe)
    if recording is None:
        recording = Recording.new(probe_name, device_name, probe_limits=limits)
    else:
        recording.probe_name, recording.device_name = probe_name, device_name
        recording.probe_limits = limits
    first = next(iter(loads.values()))  # every load has the same model, context and layers
    path = Path(first.model_path)
    recording.metadata.update(
        {
            "source": "compare",
            "model": str(path),
            "n_ctx": first.n_ctx,
            "depth": commands.depth,
            "modes": [m.label for m in loads],
            "n_prompt": commands.n_prompt,
            "n_gen": commands.n_gen,
            "quality_chunks": commands.quality_chunks,
            "chunk_tokens": commands.chunk_tokens,
            "n_gpu_layers": first.n_gpu_layers,
            "repetitions": commands.repetitions,
            "kv_estimates": _kv_estimates(path, first.n_ctx, list(loads)),
        }
    )
    return recording


def _measure_each_mode(
    loads: dict[KvMode, LoadProfile],
    commands: _ModeCommands,
    recording: Recording,
    sampler: ProbeSampler,
    run: RunProgress,
) -> list[ModeResult]:
    """Each mode measured in turn (f16/f16 first: it writes the reference log-probabilities
    the others are scored against), while the sampler reads the memory probe."""
    results: list[ModeResult] = []
    with tempfile.TemporaryDirectory(prefix="kvstudio-compare-") as tmp:
        reference_path = str(Path(tmp) / "reference_logprobs.npy")
        sampler.start()
        try:
            for mode, options in loads.items():
                run.check_cancel()
                bench, evaluate = commands.for_mode(mode, reference_path)
                results.append(
                    measure_mode(mode, options, bench, evaluate, recording, sampler, run)
                )
        finally:
            sampler.stop()
    return results


def run_compare(
    model_path: str | Path,
    n_ctx: int = 8192,
    depth: int = 0,
    modes: Sequence[str | KvMode] | str | None = None,
    reference_text: str | None = None,
    progress_cb: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    n_gpu_layers: int = -1,
    n_prompt: int = 512,
    n_gen: int = 64,
    quality_chunks: int = 4,
    chunk_tokens: int = 512,
    n_threads: int | None = None,
    repetitions: int = 3,
    probe: MemoryProbe | None = None,
    sample_hz: float = 10.0,
    recording: Recording | None = None,
    force: bool = False,
    load_advice: str = CLI_ADVICE,
) -> CompareResult:
    """Measure every mode in `modes` (f16/f16 always first) on `model_path`.

    `recording`: an empty Recording to fill (so a GUI can draw it while the run goes on);
    by default a new one. `quality_chunks=0` skips the quality measurement. Every mode's load
    is checked against the free memory first (app.load.load_check; `force` skips what can be
    forced, `load_advice` ends the refusal). Raises BadInputError for bad settings,
    ContextTooLargeError before any engine starts when a load cannot fit,
    CompareCancelledError when `cancel` is set, EngineFailedError or EngineCrashedError
    when an engine fails (the result so far is lost).
    """

    kv_modes = parse_modes(modes)
    path = Path(model_path)
    _check_settings(path, n_ctx, depth, n_prompt, n_gen, quality_chunks, chunk_tokens)
    loads = _load_profiles(path, kv_modes, n_ctx, n_gpu_layers, n_threads)
    # Minutes of measuring must not end in an out-of-memory kill: refuse up front instead.
    check_model_load(path, *loads.values(), force=force, advice=load_advice)

    if probe is None:
        probe = detect_default_probe(gpu=n_gpu_layers != 0)
    commands = _ModeCommands(
        depth,
        n_prompt,
        n_gen,
        repetitions,
        quality_chunks,
        chunk_tokens,
        reference_text if reference_text is not None else default_reference_text(),
    )
    recording = _prepared_recording(recording, probe, loads, commands)
    sampler = ProbeSampler(probe, recording, hz=sample_hz)
    result = CompareResult(
        model_path=str(path),
        n_ctx=n_ctx,
        depth=depth,
        n_prompt=n_prompt,
        n_gen=n_gen,
        quality_chunks=quality_chunks,
        chunk_tokens=chunk_tokens,
        probe=recording.probe_name,
        device=recording.device_name,
        probe_limits=recording.probe_limits,
        recording=recording,
    )
    steps_per_mode = 3 if quality_chunks else 2
    run = RunProgress(len(kv_modes) * steps_per_mode, progress_cb, cancel)
    started = time.perf_counter()
    result.modes.extend(_measure_each_mode(loads, commands, recording, sampler, run))
    result.seconds = time.perf_counter() - started
    # A saved recording carries the table too, so the dashboard can show both from a file.
    recording.metadata["results"] = result.rows()
    recording.metadata["fa_kernel"] = result.fa_kernel
    recording.metadata["llama_switches"] = dict(result.switches)
    run.progress(f"done in {result.seconds:.0f} s")
    return result
