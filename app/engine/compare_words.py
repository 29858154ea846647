"""A comparison in plain words: the column headings a user reads (the short abbreviations of
`kvstudio bench` go in their tooltips), whether its quality figures rest on enough tokens, and
the one sentence that says what int8-K gains on this model. Works on the saved rows
(CompareResult.rows(), a recording's "results"), so an opened run reads the same. No Qt.

    gain_sentence(rows)  # "On this model int8-K saves 9.1 MiB of KV cache (23%), ..."
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from app.kv.kv_types import DEFAULT_KV_MODE, FP16_KV_MODE

Row = Mapping[str, object]

# key -> (heading in words, tooltip: the abbreviation and what it is)
HEADINGS: dict[str, tuple[str, str]] = {
    "mode": ("K/V cache types", "mode: the K and V cache types, K/V"),
    "kv_allocated_mib": ("KV cache (MiB)", "KV alloc MiB: the KV cache llama.cpp allocated"),
    "peak_memory_mib": ("Peak memory (MiB)", "peak MiB: the highest memory while it ran"),
    "peak_saving_mib": (
        "Saved vs f16 (MiB)",
        "saved vs f16 MiB: peak memory less than f16/f16's",
    ),
    "kv_saving_percent": ("KV cache saved (%)", "KV saved %: the KV cache less than f16/f16's"),
    "prompt_tokens_per_second": (
        "Prompt speed (tokens/s)",
        "pp t/s: prompt processing, tokens per second",
    ),
    "decode_tokens_per_second": (
        "Reply speed (tokens/s)",
        "tg t/s: token generation (decode), tokens per second",
    ),
    "perplexity": ("Perplexity", "PPL: perplexity on the reference text; lower is better"),
    "mean_kl_divergence": (
        "Difference from f16",
        "KLD: mean Kullback-Leibler divergence of the next-token probabilities from "
        "f16/f16's; 0 is identical",
    ),
    "top1_agreement": (
        "Same top token (%)",
        "top-1 %: how often the most likely next token is f16/f16's",
    ),
}

# The same-top-token share is a proportion of the scored tokens; its 95% interval is
# +-1.96 * sqrt(p(1-p)/n). Below +-2 points it tells 95% from 93%, the size of the differences
# measured between modes (94.0% vs 93.1% on the starter); above it the figures are noise.
MARGIN_POINTS = 2.0
Z_95 = 1.96


def agreement_margin_points(top1_percent: float, scored: int) -> float:
    """The 95% margin, in percentage points, of a same-top-token share from `scored` tokens
    (at 100%, where the formula gives 0, the rule of three: 3/n)."""
    if scored <= 0:
        return math.inf
    p = min(max(top1_percent / 100, 0.0), 1.0)
    return 100 * max(Z_95 * math.sqrt(p * (1 - p) / scored), 3 / scored)


def tokens_needed(top1_percent: float) -> int:
    """How many scored tokens bring the margin of that share within MARGIN_POINTS."""
    p = min(max(top1_percent / 100, 0.0), 1.0)
    half = MARGIN_POINTS / 100
    return max(math.ceil(Z_95**2 * p * (1 - p) / half**2), math.ceil(3 / half))


def too_few_scored(row: Row) -> bool:
    """Whether the row's quality figures rest on too few tokens to mean anything (False where
    nothing was scored, or for an older saved run that does not say how many)."""
    top1, scored = row.get("top1_agreement"), row.get("scored_tokens")
    if not isinstance(top1, (int, float)) or not isinstance(scored, int) or scored <= 0:
        return False
    return agreement_margin_points(float(top1), scored) > MARGIN_POINTS


def few_tokens_note(row: Row) -> str:
    """The tooltip of a flagged quality figure."""
    top1, scored = float(_number(row, "top1_agreement")), int(_number(row, "scored_tokens"))
    return (
        f"Only {scored:,} tokens were scored: the same-top-token share is good to "
        f"+-{agreement_margin_points(top1, scored):.1f} points (95%); {tokens_needed(top1):,} "
        f"tokens bring it within +-{MARGIN_POINTS:.0f}. Raise Quality for meaningful figures."
    )


def gain_sentence(rows: Sequence[Row]) -> str:
    """What int8-K (K q8_0, V f16) gains against f16/f16 on this model, in one sentence, from
    the measured rows; "" when the run lacks either mode."""
    by_mode = {row.get("mode"): row for row in rows}
    ref, k8 = by_mode.get(FP16_KV_MODE.label), by_mode.get(DEFAULT_KV_MODE.label)
    if ref is None or k8 is None or not isinstance(k8.get("kv_saving_mib"), (int, float)):
        return ""
    saved = (
        f"saves {_number(k8, 'kv_saving_mib'):,.1f} MiB of KV cache "
        f"({_number(k8, 'kv_saving_percent'):.0f}%)"
    )
    peak, peak_saving = ref.get("peak_memory_mib"), k8.get("peak_saving_mib")
    if isinstance(peak, (int, float)) and peak > 0 and isinstance(peak_saving, (int, float)):
        saved += f", {100 * peak_saving / peak:.1f}% of peak memory"
    return f"On this model int8-K {saved}; {quality_clause(k8)}; {speed_clause(ref, k8)}."


def quality_clause(row: Row) -> str:
    kl, top1 = row.get("mean_kl_divergence"), row.get("top1_agreement")
    if not isinstance(kl, (int, float)) or not isinstance(top1, (int, float)):
        return "quality not measured"
    if too_few_scored(row):
        scored = int(_number(row, "scored_tokens"))
        return (
            f"quality: too few tokens scored to tell ({scored:,}; "
            f"{tokens_needed(float(top1)):,} needed)"
        )
    return f"quality: KL {kl:.3f}, {top1:.0f}% same top token"


def speed_clause(ref: Row, mode: Row) -> str:
    """Decode speed against f16/f16, judged against how much each mode's own repetitions
    varied: a change within that spread is noise."""
    base, speed = ref.get("decode_tokens_per_second"), mode.get("decode_tokens_per_second")
    if not isinstance(base, (int, float)) or not isinstance(speed, (int, float)) or base <= 0:
        return "decode speed not measured"
    change = 100 * (speed / base - 1)
    spreads = [r.get("decode_spread_percent") for r in (ref, mode)]
    known = [float(s) for s in spreads if isinstance(s, (int, float))]
    direction = "slower" if change < 0 else "faster"
    if len(known) < 2:
        return (
            f"decode speed {abs(change):.0f}% {direction} "
            "(one repetition each, so its noise is unknown)"
        )
    noise = max(known)
    if abs(change) <= noise:
        return f"decode speed unchanged within noise (repetitions varied by {noise:.0f}%)"
    return f"decode speed {abs(change):.0f}% {direction} (repetitions varied by {noise:.0f}%)"


def _number(row: Row, key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0
