"""The A/B comparison of KV cache modes, measured (no Qt; used by `kvstudio bench` and the
dashboard's Compare section through app/services/compare_runner.py).

For each mode, a fresh engine process: load (KV bytes from llama.cpp's own log), Bench
(prompt and decode tokens/s at a depth), Evaluate (perplexity; KL divergence and top-1
agreement against the f16/f16 run), while a sampler thread reads the memory probe for the
engine's pid at 10 Hz. The whole run is one Recording with markers, so it can be replayed.

    result = run_compare("model.gguf", n_ctx=8192, depth=4096)
    print(result.to_csv()); result.recording.save("run.json")
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.engine.compare_result import CompareResult, ModeResult
from app.engine.messages import (
    Bench,
    BenchDone,
    Evaluate,
    Evaluated,
    Failed,
    KernelWarning,
    Load,
    Loaded,
)
from app.engine.process import EngineProcess
from app.engine.quality import default_reference_text
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import COMPARE_MODES, FP16_KV_MODE, KvMode
from app.load.load_check import CLI_ADVICE, check_model_load
from app.load.profile import LoadProfile
from app.models.gguf_read import read_gguf_header
from app.platform.errors import AppError, BadInputError, EngineFailedError
from app.platform.probes import detect_probe
from app.platform.recording import ProbeSampler, Recording

log = logging.getLogger(__name__)

DEFAULT_MODES = tuple(mode.label for mode in COMPARE_MODES)
STEP_TIMEOUT_S = 3600.0  # one load / bench / evaluation; a 131k-token fill on a GPU is minutes

ProgressCallback = Callable[[float, str], None]


class CompareCancelledError(AppError):
    """The comparison was cancelled by the user."""


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


def detect_default_probe(gpu: bool = True) -> Any:
    """The best memory probe here (NVML, amdsmi, AMD sysfs; psutil when `gpu` is False
    or none of those is available)."""

    return detect_probe(gpu=gpu)


def probe_description(probe: Any) -> tuple[str, str, str]:
    """(name, device name, limits in words) of a probe, read by attribute."""
    name = str(getattr(probe, "name", type(probe).__name__))
    device = getattr(probe, "device", "") or getattr(probe, "device_name", "")
    device = device() if callable(device) else device
    limits = getattr(probe, "limits", "")
    limits = limits() if callable(limits) else limits
    return name, str(device or ""), str(limits or "")


def _kv_estimates(path: Path, n_ctx: int, modes: list[KvMode]) -> dict[str, Any]:
    """Per mode, the caches app.kv.kv_cache computes for the GGUF (cells and bytes per
    cell), so a saved run can draw 'KV as the context fills' without the model file."""
    from dataclasses import asdict

    try:
        header = read_gguf_header(path)
        estimates = {m.label: kv_cache_bytes(header, n_ctx, m) for m in modes}
    except AppError as error:
        log.warning("no KV arithmetic for %s: %s", path, error)
        return {}
    return {
        label: {
            "n_ctx": e.n_ctx,
            "n_ubatch": e.n_ubatch,
            "total_bytes": e.total_bytes,
            "caches": [asdict(c) for c in e.caches],
        }
        for label, e in estimates.items()
    }


def _load_average() -> float | None:
    """The 1-minute load average right after the speed run (None where the OS has none):
    on a busy machine the speeds say more about the other programs than the KV mode."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


class _Run:
    """State of one comparison: the recording, progress and cancellation."""

    def __init__(
        self, total_steps: int, progress_cb: ProgressCallback | None, cancel: threading.Event | None
    ) -> None:
        self.total_steps = total_steps
        self.done_steps = 0
        self.progress_cb = progress_cb
        self.cancel = cancel

    def progress(self, message: str, step_done: bool = False) -> None:
        if step_done:
            self.done_steps += 1
        log.info("compare: %s", message)
        if self.progress_cb is not None:
            self.progress_cb(min(1.0, self.done_steps / self.total_steps), message)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CompareCancelledError("The comparison was cancelled.")


def _wait_for(proc: Any, kinds: tuple[type, ...], run: _Run, warnings: list[str]) -> Any:
    """The next event of one of `kinds`; collects KernelWarnings, raises on Failed/cancel."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        if run.cancel is not None and run.cancel.is_set():
            proc.cancel()
            raise CompareCancelledError("The comparison was cancelled.")
        event = proc.recv(timeout=0.2)
        if event is None:
            continue
        if isinstance(event, KernelWarning):
            warnings.append(f"{event.kind}: {event.text}")
        elif isinstance(event, Failed):
            raise EngineFailedError(event.message)
        elif isinstance(event, kinds):
            return event
    raise EngineFailedError("The engine did not answer within an hour.")


def _run_mode(
    mode: KvMode,
    options: LoadProfile,
    bench: Bench,
    evaluate: Evaluate | None,
    recording: Recording,
    sampler: ProbeSampler,
    run: _Run,
) -> ModeResult:
    result = ModeResult(mode=mode.label, k_type=mode.k.name, v_type=mode.v.name)
    warnings: list[str] = []
    proc = EngineProcess()
    t_start = recording.now()
    try:
        proc.start()
        sampler.set_pid(proc.pid)
        before = sampler.sample_once()
        result.baseline_memory_bytes = before.used_bytes if before else None
        recording.mark("mode", mode.label)
        recording.mark("load", f"{mode.label}: load")
        run.progress(f"{mode.label}: loading the model")
        proc.send(Load(options))
        loaded: Loaded = _wait_for(proc, (Loaded,), run, warnings)
        recording.mark("loaded", f"{mode.label}: loaded")
        result.apply_loaded(loaded)
        after_load = sampler.sample_once()
        result.memory_after_load_bytes = after_load.used_bytes if after_load else None
        run.progress(
            f"{mode.label}: loaded, KV {result.kv_allocated_bytes / 2**20:.1f} MiB", step_done=True
        )

        run.check_cancel()
        run.progress(f"{mode.label}: speed at depth {bench.depth}")
        proc.send(bench)
        done: BenchDone = _wait_for(proc, (BenchDone,), run, warnings)
        result.cpu_load = _load_average()
        t_done = recording.now()
        # The engine measured the phases; place their markers back in time from the answer.
        t_gen = t_done - (done.decode_total_seconds or done.decode_seconds)
        t_prompt = t_gen - (done.prompt_total_seconds or done.prompt_seconds)
        recording.mark(
            "prompt",
            f"{mode.label}: fill {done.depth} + prompt {done.n_prompt}",
            t=max(t_start, t_prompt - done.fill_seconds),
        )
        recording.mark("generation", f"{mode.label}: decode {done.n_gen}", t=t_gen)
        recording.mark("finished", f"{mode.label}: speed measured", t=t_done)
        result.apply_bench(done)
        # Peak over load + prompt + decode: the quality pass holds big logits arrays (and
        # maps the reference file) in the engine, which is not what the KV mode costs.
        peak = recording.peak(t_start, t_done)
        result.peak_memory_bytes = peak.used_bytes if peak else None
        result.peak_device_memory_bytes = recording.peak_device(t_start, t_done)
        run.progress(
            f"{mode.label}: {done.prompt_tokens_per_second:.0f} t/s prompt, "
            f"{done.decode_tokens_per_second:.1f} t/s decode",
            step_done=True,
        )

        if evaluate is not None:
            run.check_cancel()
            run.progress(f"{mode.label}: quality on the reference text")
            recording.mark("quality", f"{mode.label}: quality")
            proc.send(evaluate)
            evaluated: Evaluated = _wait_for(proc, (Evaluated,), run, warnings)
            result.apply_evaluated(evaluated)
            run.progress(f"{mode.label}: perplexity {evaluated.perplexity:.3f}", step_done=True)
        final = sampler.sample_once()
        result.memory_at_end_bytes = final.used_bytes if final else None
    finally:
        proc.stop()
        recording.mark("end", f"{mode.label}: engine stopped")
    result.warnings = tuple(dict.fromkeys([*result.warnings, *warnings]))
    return result


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
    probe: Any = None,
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
    loads = {
        mode: LoadProfile(
            model_path=str(path),
            n_ctx=n_ctx,
            n_gpu_layers=n_gpu_layers,
            flash_attn=True,
            kv=mode,
            n_threads=n_threads,
        )
        for mode in kv_modes
    }
    # Minutes of measuring must not end in an out-of-memory kill: refuse up front instead.
    check_model_load(path, *loads.values(), force=force, advice=load_advice)

    if probe is None:
        probe = detect_default_probe(gpu=n_gpu_layers != 0)
    probe_name, device_name, limits = probe_description(probe)
    metadata = {
        "source": "compare",
        "model": str(path),
        "n_ctx": n_ctx,
        "depth": depth,
        "modes": [m.label for m in kv_modes],
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "quality_chunks": quality_chunks,
        "chunk_tokens": chunk_tokens,
        "n_gpu_layers": n_gpu_layers,
        "repetitions": repetitions,
    }
    if recording is None:
        recording = Recording.new(probe_name, device_name, probe_limits=limits)
    else:
        recording.probe_name, recording.device_name = probe_name, device_name
        recording.probe_limits = limits
    metadata["kv_estimates"] = _kv_estimates(path, n_ctx, kv_modes)
    recording.metadata.update(metadata)
    sampler = ProbeSampler(probe, recording, hz=sample_hz)
    steps_per_mode = 3 if quality_chunks else 2
    run = _Run(len(kv_modes) * steps_per_mode, progress_cb, cancel)
    text = reference_text if reference_text is not None else default_reference_text()
    result = CompareResult(
        model_path=str(path),
        n_ctx=n_ctx,
        depth=depth,
        n_prompt=n_prompt,
        n_gen=n_gen,
        quality_chunks=quality_chunks,
        chunk_tokens=chunk_tokens,
        probe=probe_name,
        device=device_name,
        probe_limits=limits,
        recording=recording,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kvstudio-compare-") as tmp:
        reference_path = str(Path(tmp) / "reference_logprobs.npy")
        sampler.start()
        try:
            for mode in kv_modes:
                run.check_cancel()
                options = loads[mode]
                bench = Bench(
                    uuid.uuid4().hex,
                    depth=depth,
                    n_prompt=n_prompt,
                    n_gen=n_gen,
                    repetitions=repetitions,
                )
                evaluate = None
                if quality_chunks:
                    evaluate = Evaluate(
                        uuid.uuid4().hex,
                        text,
                        chunk_tokens=chunk_tokens,
                        n_chunks=quality_chunks,
                        logprobs_path=reference_path,
                        write_reference=mode == FP16_KV_MODE,
                    )
                result.modes.append(
                    _run_mode(mode, options, bench, evaluate, recording, sampler, run)
                )
        finally:
            sampler.stop()
    result.seconds = time.perf_counter() - started
    # A saved recording carries the table too, so the dashboard can show both from a file.
    recording.metadata["results"] = result.rows()
    recording.metadata["fa_kernel"] = result.fa_kernel
    run.progress(f"done in {result.seconds:.0f} s")
    return result
