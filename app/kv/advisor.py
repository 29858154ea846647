"""The KV advisor: which K/V mode and context to load a model with on this machine, from
measured quality. Pure logic: the caller hands it each mode's fit (app.kv.fit, the same
arithmetic as `kvstudio fit`) and the stored measurements (app.kv.advisor_store).

Per mode it gives the largest context that fits with the fit's 10% margin, the quality cost
against f16/f16 (mean KL divergence and top-1 agreement) and the expected decode speed at
that depth. Quality comes, best first, from a measurement of this very file (by sha256), else
from the nearest measured model of the same architecture and size (marked as an estimate),
else it is unknown. f16/f16 is the reference: its KL is 0 by definition.

The rule (RULE below): among the modes whose KL is within the budget (default 0.01), the one
with the largest context that fits; a tie goes to the lower KL, then to the faster mode.
With a context asked for, the mode with the lowest KL among those that reach it.

    advice = advise(model, fits, store.measurements(), max_kl=0.01)
    advice.choice.mode.label, advice.n_ctx, advice.sentence
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.kv.fit import MARGIN, UNSUPPORTED, ModeFit
from app.kv.kv_types import FP16_KV_MODE, KV_MODES, KvMode
from app.platform.errors import BadInputError

DEFAULT_MAX_KL = 0.01
# Parameter counts within this factor count as one size (another quantization of one model,
# or a sibling a few percent apart); the nearest such model lends its quality as an estimate.
SAME_SIZE_FACTOR = 1.5
RULE = (
    f"the largest context that fits with {MARGIN:.0%} to spare, among the K/V modes whose KL "
    "divergence from f16/f16 is within the quality budget; a tie goes to the lower KL, then to "
    "the faster mode"
)
RULE_WITH_CONTEXT = (
    f"the lowest KL divergence among the K/V modes that fit the context asked for (with "
    f"{MARGIN:.0%} to spare) within the quality budget"
)

MEASURED, ESTIMATE, REFERENCE, UNKNOWN = "measured", "estimate", "reference", "unknown"
EXTRAPOLATED = "extrapolated"


@dataclass(frozen=True)
class ModelIdentity:
    """A model file as the store keys it: its sha256, and what finds its siblings."""

    sha256: str
    file_name: str
    architecture: str
    parameters: int


@dataclass(frozen=True)
class ModeMeasurement:
    """One mode measured on one model file (a Compare run or the advisor's short run)."""

    mode: str  # the mode's label, "q8_0/f16"
    mean_kl_divergence: float | None  # against f16/f16; None: quality not measured
    top1_agreement: float | None  # 0..1
    scored_tokens: int
    decode_tokens_per_second: float | None
    depth: int  # tokens in the context when decode speed was measured
    measured_at: float  # unix time


@dataclass(frozen=True)
class ModelMeasurements:
    model: ModelIdentity
    modes: tuple[ModeMeasurement, ...]


@dataclass(frozen=True)
class Quality:
    """A mode's quality cost against f16/f16, and where the figure comes from."""

    kl: float | None
    top1: float | None
    source: str  # REFERENCE | MEASURED | ESTIMATE | UNKNOWN
    scored_tokens: int = 0
    from_model: str = ""  # ESTIMATE: the file name of the model measured

    @property
    def words(self) -> str:
        if self.source == REFERENCE:
            return "the reference"
        if self.source == MEASURED:
            return f"measured on this file, {self.scored_tokens:,} tokens scored"
        if self.source == ESTIMATE:
            return f"estimated from {self.from_model}, a measured model of the same family"
        return "not measured"


@dataclass(frozen=True)
class Speed:
    """Expected decode tokens/s at a depth, and where it comes from."""

    decode_tokens_per_second: float | None
    source: str  # MEASURED (at that depth or the nearest measured), EXTRAPOLATED, UNKNOWN
    depths: tuple[int, ...] = ()  # the depths measured

    @property
    def words(self) -> str:
        if self.decode_tokens_per_second is None:
            return "unknown (no speed measured for this mode)"
        measured = ", ".join(f"{d:,}" for d in self.depths)
        if self.source == EXTRAPOLATED:
            return f"{self.decode_tokens_per_second:.1f} t/s (from depths {measured})"
        return f"{self.decode_tokens_per_second:.1f} t/s (measured at depth {measured})"


@dataclass(frozen=True)
class ModeAdvice:
    """One row of the advisor's table."""

    mode: KvMode
    largest_n_ctx: int  # with the fit's margin; 0: not even 256 tokens, or not available
    quality: Quality
    speed: Speed  # at the context this row would load with
    within_budget: bool
    unavailable: str = ""  # why the mode cannot be used here, one sentence


@dataclass(frozen=True)
class Advice:
    model: ModelIdentity
    budget_bytes: int
    budget_words: str  # "1.2 GiB free in system RAM (KVSTUDIO_FREE_MEMORY)"
    max_kl: float
    context: int | None  # asked for
    rows: tuple[ModeAdvice, ...]
    choice: ModeAdvice | None
    n_ctx: int  # the context to load with (0 with no choice)
    sentence: str
    rule: str
    notes: tuple[str, ...] = field(default=())


def check_max_kl(max_kl: float) -> float:
    if not math.isfinite(max_kl) or max_kl < 0:
        raise BadInputError(
            f"The quality budget must be a KL divergence of 0 or more, not {max_kl}."
        )
    return max_kl


def quality_of(
    mode: KvMode, model: ModelIdentity, measured: Sequence[ModelMeasurements]
) -> Quality:
    """The mode's quality on `model`: measured on it, else estimated from the nearest
    measured model of the same architecture and size, else unknown."""
    if mode == FP16_KV_MODE:
        return Quality(0.0, 1.0, REFERENCE)
    own = next((m for m in measured if m.model.sha256 == model.sha256), None)
    found = _latest_quality(own, mode) if own else None
    if found is not None:
        return Quality(
            found.mean_kl_divergence, found.top1_agreement, MEASURED, found.scored_tokens
        )
    for other in sorted(_siblings(model, measured), key=lambda m: _distance(model, m.model)):
        found = _latest_quality(other, mode)
        if found is not None:
            return Quality(
                found.mean_kl_divergence,
                found.top1_agreement,
                ESTIMATE,
                found.scored_tokens,
                other.model.file_name,
            )
    return Quality(None, None, UNKNOWN)


def _latest_quality(measured: ModelMeasurements, mode: KvMode) -> ModeMeasurement | None:
    rows = [m for m in measured.modes if m.mode == mode.label and m.mean_kl_divergence is not None]
    return max(rows, key=lambda m: m.measured_at, default=None)


def _siblings(
    model: ModelIdentity, measured: Sequence[ModelMeasurements]
) -> list[ModelMeasurements]:
    return [
        m
        for m in measured
        if m.model.sha256 != model.sha256
        and m.model.architecture == model.architecture
        and _distance(model, m.model) <= math.log(SAME_SIZE_FACTOR)
    ]


def _distance(a: ModelIdentity, b: ModelIdentity) -> float:
    """How far apart two models' sizes are (0: the same parameter count)."""
    if a.parameters <= 0 or b.parameters <= 0:
        return 0.0 if a.parameters == b.parameters else math.inf
    return abs(math.log(a.parameters / b.parameters))


def speed_at(
    mode: KvMode, model: ModelIdentity, measured: Sequence[ModelMeasurements], depth: int
) -> Speed:
    """Decode speed of `mode` on this file at `depth`: the one measured depth's figure, or
    with two or more depths the time per token fitted as a straight line in the depth (each
    token reads the whole KV cache in use, so its time grows linearly)."""
    own = next((m for m in measured if m.model.sha256 == model.sha256), None)
    points: dict[int, float] = {}  # depth -> seconds per token, the latest measurement
    for m in sorted(own.modes if own else (), key=lambda m: m.measured_at):
        if m.mode == mode.label and m.decode_tokens_per_second:
            points[m.depth] = 1.0 / m.decode_tokens_per_second
    depths = tuple(sorted(points))
    if not depths:
        return Speed(None, UNKNOWN)
    if len(depths) == 1 or depth in points:
        nearest = min(depths, key=lambda d: abs(d - depth))
        return Speed(1.0 / points[nearest], MEASURED, (nearest,))
    xs, ys = depths, [points[d] for d in depths]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    seconds = mean_y + max(slope, 0.0) * (depth - mean_x)
    return Speed(1.0 / seconds if seconds > 0 else None, EXTRAPOLATED, depths)


def advise(
    model: ModelIdentity,
    fits: Sequence[ModeFit],
    measured: Sequence[ModelMeasurements],
    *,
    budget_words: str,
    max_kl: float = DEFAULT_MAX_KL,
    context: int | None = None,
    unavailable: Mapping[KvMode, str] | None = None,
) -> Advice:
    """The advice for `model` from each mode's fit against this machine's budget (one
    ModeFit per mode, in KV_MODES order) and the stored measurements. `unavailable`: modes the
    running backend has no kernel for, with the reason."""
    check_max_kl(max_kl)
    missing = unavailable or {}
    rows = []
    for fit in fits:
        reason = missing.get(fit.mode) or (fit.reason if fit.verdict == UNSUPPORTED else "")
        largest = 0 if reason else fit.largest_n_ctx_with_margin
        quality = quality_of(fit.mode, model, measured)
        depth = min(context, largest) if context else largest
        within = quality.kl is not None and quality.kl <= max_kl
        rows.append(
            ModeAdvice(
                fit.mode,
                largest,
                quality,
                speed_at(fit.mode, model, measured, depth),
                within,
                reason,
            )
        )
    choice, n_ctx, notes = _choose(rows, context)
    budget_bytes = fits[0].budget_bytes if fits else 0
    return Advice(
        model,
        budget_bytes,
        budget_words,
        max_kl,
        context,
        tuple(rows),
        choice,
        n_ctx,
        _sentence(choice, n_ctx, rows, max_kl, context, budget_words),
        RULE_WITH_CONTEXT if context else RULE,
        tuple(notes),
    )


def _order(row: ModeAdvice) -> int:
    return KV_MODES.index(row.mode) if row.mode in KV_MODES else len(KV_MODES)


def _preference(row: ModeAdvice) -> tuple[float, float, int]:
    """Lower is better among modes of equal context: lower KL, then faster, then listed first."""
    speed = row.speed.decode_tokens_per_second or 0.0
    return (row.quality.kl if row.quality.kl is not None else math.inf, -speed, _order(row))


def _choose(
    rows: Sequence[ModeAdvice], context: int | None
) -> tuple[ModeAdvice | None, int, list[str]]:
    fitting = [r for r in rows if r.largest_n_ctx > 0]
    within = [r for r in fitting if r.within_budget]
    notes: list[str] = []
    unknown = [r.mode.label for r in fitting if r.quality.source == UNKNOWN]
    if unknown:
        notes.append(
            f"The quality of {', '.join(unknown)} is not measured for this model; a "
            "measurement (Compare, or `kvstudio advise --measure`) can change the advice."
        )
    if context:
        reach = [r for r in within if r.largest_n_ctx >= context]
        if reach:
            return min(reach, key=_preference), context, notes
        if within:
            notes.append(f"No mode within the quality budget fits {context:,} tokens here.")
    if within:
        best = min(within, key=lambda r: (-r.largest_n_ctx, *_preference(r)))
        return best, best.largest_n_ctx, notes
    return None, 0, notes


def _sentence(
    choice: ModeAdvice | None,
    n_ctx: int,
    rows: Sequence[ModeAdvice],
    max_kl: float,
    context: int | None,
    budget_words: str,
) -> str:
    if choice is None:
        if not any(r.largest_n_ctx > 0 for r in rows):
            return (
                f"Not even 256 tokens of context fit {budget_words} in any K/V mode: free "
                "memory, or choose a smaller model."
            )
        return (
            f"No K/V mode that fits {budget_words} has a KL divergence within {max_kl:g}: "
            "raise the quality budget, or measure the quantized modes."
        )
    quality = choice.quality
    why = (
        "the f16/f16 reference, full quality"
        if quality.source == REFERENCE
        else f"KL {quality.kl:.4f} ({quality.words}), within the budget of {max_kl:g}"
    )
    reached = (
        f"the {n_ctx:,} tokens asked for"
        if context and n_ctx == context
        else f"the largest context that fits {budget_words} with {MARGIN:.0%} to spare"
    )
    fp16 = next((r for r in rows if r.mode == FP16_KV_MODE), None)
    beside = ""
    if choice.mode != FP16_KV_MODE and fp16 is not None and fp16.largest_n_ctx < n_ctx:
        beside = f"; f16/f16 would fit {fp16.largest_n_ctx:,}"
    return (
        f"Load with K {choice.mode.k.name} / V {choice.mode.v.name} at {n_ctx:,} tokens: "
        f"{reached}, with {why}{beside}."
    )
