"""One KV mode of the comparison (app.engine.compare), measured in a fresh engine process:
load (KV bytes from llama.cpp's own log), Bench (speed at a depth), Evaluate (quality), each
step marked in the Recording while the sampler reads the engine's memory."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from app.engine.compare_result import ModeResult
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
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from app.platform.errors import AppError, EngineFailedError
from app.platform.recording import ProbeSampler, Recording
from app.platform.units import size_number

log = logging.getLogger(__name__)

STEP_TIMEOUT_S = 3600.0  # one load / bench / evaluation; a 131k-token fill on a GPU is minutes

ProgressCallback = Callable[[float, str], None]
EventT = TypeVar("EventT")


class CompareCancelledError(AppError):
    """The comparison was cancelled by the user."""


def _load_average() -> float | None:
    """The 1-minute load average right after the speed run (None where the OS has none):
    on a busy machine the speeds say more about the other programs than the KV mode."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


class RunProgress:
    """Progress and cancellation of one comparison, across its modes."""

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


def _wait_for(
    proc: EngineProcess, kind: type[EventT], run: RunProgress, warnings: list[str]
) -> EventT:
    """The next event of `kind`; collects KernelWarnings, raises on Failed/cancel."""
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
        elif isinstance(event, kind):
            return event
    raise EngineFailedError("The engine did not answer within an hour.")


def _mark_speed_phases(
    recording: Recording, mode: KvMode, done: BenchDone, t_start: float, t_done: float
) -> None:
    """Markers for the fill, prompt and decode of a speed run that ended at `t_done`: the
    engine measured the phases, so they are placed back in time from its answer."""
    t_gen = t_done - (done.decode_total_seconds or done.decode_seconds)
    t_prompt = t_gen - (done.prompt_total_seconds or done.prompt_seconds)
    recording.mark(
        "prompt",
        f"{mode.label}: fill {done.depth} + prompt {done.n_prompt}",
        t=max(t_start, t_prompt - done.fill_seconds),
    )
    recording.mark("generation", f"{mode.label}: decode {done.n_gen}", t=t_gen)
    recording.mark("finished", f"{mode.label}: speed measured", t=t_done)


def measure_mode(
    mode: KvMode,
    options: LoadProfile,
    bench: Bench,
    evaluate: Evaluate | None,
    recording: Recording,
    sampler: ProbeSampler,
    run: RunProgress,
) -> ModeResult:
    """Load, Bench and (when given) Evaluate `mode` in its own engine, stopped at the end.
    Raises CompareCancelledError, EngineFailedError or EngineCrashedError."""
    result = ModeResult(mode=mode, k_type=mode.k.name, v_type=mode.v.name)
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
        loaded = _wait_for(proc, Loaded, run, warnings)
        recording.mark("loaded", f"{mode.label}: loaded")
        result.apply_loaded(loaded)
        after_load = sampler.sample_once()
        result.memory_after_load_bytes = after_load.used_bytes if after_load else None
        run.progress(
            f"{mode.label}: loaded, KV {size_number(result.kv_allocated_bytes, 'MiB')} MiB",
            step_done=True,
        )

        run.check_cancel()
        run.progress(f"{mode.label}: speed at depth {bench.depth}")
        proc.send(bench)
        done = _wait_for(proc, BenchDone, run, warnings)
        result.cpu_load = _load_average()
        t_done = recording.now()
        _mark_speed_phases(recording, mode, done, t_start, t_done)
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
            evaluated = _wait_for(proc, Evaluated, run, warnings)
            result.apply_evaluated(evaluated)
            run.progress(f"{mode.label}: perplexity {evaluated.perplexity:.3f}", step_done=True)
        final = sampler.sample_once()
        result.memory_at_end_bytes = final.used_bytes if final else None
    finally:
        proc.stop()
        recording.mark("end", f"{mode.label}: engine stopped")
    result.warnings = tuple(dict.fromkeys([*result.warnings, *warnings]))
    return result
