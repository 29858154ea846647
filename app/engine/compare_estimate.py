"""How long a KV mode comparison (app.engine.compare) will take, before it starts, and how
long is left while it runs. No Qt.

A comparison is a fixed list of steps (per mode: load, speed, and quality when asked for),
and run_compare reports each step's end. Each step's time is estimated from three rates:
seconds to start an engine and load the model, prompt tokens/s and decode tokens/s. The
rates come, best first, from a previous comparison of the same model, from the loaded
model's load time and last reply, or from the model file's size (a rough guess). While it
runs, the steps already done say how far off the estimate was, and the time left is
scaled by that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from app.engine.compare import parse_modes
from app.kv.kv_types import KvMode

if TYPE_CHECKING:
    from app.engine.compare_result import CompareResult

ENGINE_START_S = 2.0  # a fresh engine process: Python, llama_cpp's import, the backend
# With nothing measured: decode reads every weight once per token; a CPU reads ~5 GB/s of
# them in practice, and a prompt batch is ~10x faster per token than decode.
GUESS_WEIGHT_BYTES_PER_S = 5e9
GUESS_PROMPT_OVER_DECODE = 10.0
GUESS_LOAD_BYTES_PER_S = 1e9
QUALITY_OVER_PROMPT = 0.8  # quality is prompt work plus copying the logits of every token


@dataclass(frozen=True)
class CompareRates:
    """The speeds an estimate rests on, and where they came from, in words."""

    load_seconds: float  # start an engine and load the model
    prompt_tokens_per_second: float
    decode_tokens_per_second: float
    source: str
    # Measured over estimated time of a previous run's speed and quality steps: what the
    # tokens/s leave out (warm-up, a context's creation, logits copied, a busy machine).
    work_factor: float = 1.0


@dataclass(frozen=True)
class CompareSteps:
    """The steps of one comparison, in run order, each with its estimated seconds."""

    names: tuple[str, ...]  # "f16/f16: load", "f16/f16: speed", ...
    seconds: tuple[float, ...]
    rates: CompareRates

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds)

    def done_fraction(self, done_steps: int) -> float:
        """The share of the estimated work in the first `done_steps` steps."""
        total = self.total_seconds
        return sum(self.seconds[:done_steps]) / total if total else 0.0

    def seconds_left(self, done_steps: int, elapsed: float) -> float:
        """Seconds left after `done_steps` steps that took `elapsed` seconds: the
        estimate of the remaining steps, scaled by how far off the done ones were."""
        done_estimate = sum(self.seconds[:done_steps])
        scale = elapsed / done_estimate if done_steps and done_estimate > 0 else 1.0
        return sum(self.seconds[done_steps:]) * scale


class CompareSettings(TypedDict, total=False):
    """The run_compare settings an estimate depends on (others given are passed over)."""

    modes: Sequence[str | KvMode] | str | None
    depth: int
    n_prompt: int
    n_gen: int
    repetitions: int
    quality_chunks: int
    chunk_tokens: int


def compare_steps(rates: CompareRates, **settings: Unpack[CompareSettings]) -> CompareSteps:
    """The steps of a comparison with run_compare's settings (modes, depth, n_prompt, n_gen,
    repetitions, quality_chunks, chunk_tokens; run_compare's defaults for those missing)."""
    modes = parse_modes(settings.get("modes"))
    depth = int(settings.get("depth", 0))
    n_prompt = int(settings.get("n_prompt", 512))
    n_gen = int(settings.get("n_gen", 64))
    reps = max(1, int(settings.get("repetitions", 3)))
    quality_tokens = int(settings.get("quality_chunks", 4)) * int(settings.get("chunk_tokens", 512))
    pp, tg = rates.prompt_tokens_per_second, rates.decode_tokens_per_second
    # The bench fills `depth` once, then repeats the prompt batch and the decodes (and warms up).
    speed = ((depth + 64 + reps * n_prompt) / pp + (1 + reps * n_gen) / tg) * rates.work_factor
    names: list[str] = []
    seconds: list[float] = []
    for mode in modes:
        names += [f"{mode.label}: load", f"{mode.label}: speed"]
        seconds += [rates.load_seconds, speed]
        if quality_tokens:
            names.append(f"{mode.label}: quality")
            seconds.append(quality_tokens / (pp * QUALITY_OVER_PROMPT) * rates.work_factor)
    return CompareSteps(tuple(names), tuple(seconds), rates)


def rates_from_result(
    result: CompareResult,
    names: Sequence[str],
    step_seconds: Sequence[float],
    **settings: Unpack[CompareSettings],
) -> CompareRates:
    """Rates measured by a finished comparison (an app.engine.compare_result.CompareResult):
    its speeds, the seconds each of its steps took (`names` and `step_seconds`, from its
    progress events) and the settings it ran with. Raises ZeroDivisionError when it measured
    no speed."""
    loads = [s for n, s in zip(names, step_seconds, strict=True) if n.endswith(": load")]
    pp = [m.prompt_tokens_per_second for m in result.modes if m.prompt_tokens_per_second]
    tg = [m.decode_tokens_per_second for m in result.modes if m.decode_tokens_per_second]
    plain = CompareRates(
        load_seconds=sum(loads) / len(loads),
        prompt_tokens_per_second=sum(pp) / len(pp),
        decode_tokens_per_second=sum(tg) / len(tg),
        source="this model's last comparison",
    )
    estimated = compare_steps(plain, **settings)
    work = [
        (measured, guess)
        for name, measured, guess in zip(names, step_seconds, estimated.seconds, strict=True)
        if not name.endswith(": load")
    ]
    factor = sum(m for m, _ in work) / sum(g for _, g in work)
    return replace(plain, work_factor=factor)


def rates_from_session(
    model_bytes: int,
    load_seconds: float | None = None,
    prompt_tokens: int = 0,
    time_to_first_token_s: float = 0.0,
    decode_tokens_per_second: float = 0.0,
) -> CompareRates:
    """Rates from what the loaded model did (its load, its last reply), and from the model
    file's size for what it has not done yet."""
    tg = decode_tokens_per_second or GUESS_WEIGHT_BYTES_PER_S / max(model_bytes, 1)
    # A prompt of a handful of tokens says little about batch speed.
    measured_pp = prompt_tokens >= 32 and time_to_first_token_s > 0
    pp = prompt_tokens / time_to_first_token_s if measured_pp else tg * GUESS_PROMPT_OVER_DECODE
    load = load_seconds if load_seconds is not None else model_bytes / GUESS_LOAD_BYTES_PER_S
    if decode_tokens_per_second:
        source = "this model's load and last reply"
    elif load_seconds is not None:
        source = "this model's load and its size (no reply measured yet)"
    else:
        source = "the model's size (nothing measured yet)"
    return CompareRates(ENGINE_START_S + load, pp, tg, source)
