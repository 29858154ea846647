"""`kvstudio advise MODEL`: the K/V mode and context to load MODEL with on this machine, by a
stated rule, from measured quality (app.kv.advisor); `--measure` measures first.

--json prints one AdviceReport (docs/advisor.md describes every field)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from typing import TypedDict

from app.engine.advisor_measure import (
    SHORT,
    ShortMeasurement,
    measure_for_advice,
    measurement_steps,
)
from app.kv.advisor import DEFAULT_MAX_KL, Advice, ModeAdvice, check_max_kl
from app.load.advice import advise_model
from app.models.model_ref import resolve_model
from app.platform.errors import BadInputError
from app.platform.safe_text import safe_text
from app.platform.text_table import aligned_rows


class ModeRow(TypedDict):
    kv: str  # the mode's label, "q8_0/f16"
    available: bool
    unavailable_reason: str
    largest_n_ctx: int
    mean_kl_divergence: float | None
    top1_agreement: float | None
    quality_source: str  # reference | measured | estimate | unknown
    quality_from_model: str
    scored_tokens: int
    within_budget: bool
    decode_tokens_per_second: float | None
    speed_source: str  # measured | extrapolated | unknown
    speed_depths: list[int]


class Choice(TypedDict):
    kv: str
    type_k: str
    type_v: str
    n_ctx: int


class AdviceReport(TypedDict):
    """What `kvstudio advise --json` prints."""

    model: str  # the file's path
    sha256: str
    architecture: str
    parameters: int
    budget_bytes: int
    budget: str  # in words
    max_kl: float
    context: int | None
    rule: str
    choice: Choice | None
    sentence: str
    notes: list[str]
    modes: list[ModeRow]


MIN_CHUNK_TOKENS = 64  # a chunk's second half is scored: 31 tokens at the least


def _max_kl(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-kl must be a number, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"--max-kl must be 0 or more, not {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a .gguf file or the word 'starter'")
    parser.add_argument("--context", type=int, default=None, help="the context you need, in tokens")
    parser.add_argument(
        "--max-kl",
        type=_max_kl,
        default=DEFAULT_MAX_KL,
        help=f"quality budget: the largest mean KL divergence from f16/f16 (default "
        f"{DEFAULT_MAX_KL})",
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help=f"first measure every K/V mode on this model ({SHORT.scored_tokens} scored tokens "
        "each by default; the time is said before it starts)",
    )
    parser.add_argument(
        "--chunks",
        type=int,
        default=None,
        help=f"with --measure: chunks of the reference text to score (default "
        f"{SHORT.quality_chunks}; more rest the KL on more text and take longer)",
    )
    parser.add_argument(
        "--chunk-tokens",
        type=int,
        default=None,
        help=f"with --measure: tokens per chunk, the second half scored (default "
        f"{SHORT.chunk_tokens})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _row(row: ModeAdvice) -> ModeRow:
    return {
        "kv": row.mode.label,
        "available": not row.unavailable,
        "unavailable_reason": row.unavailable,
        "largest_n_ctx": row.largest_n_ctx,
        "mean_kl_divergence": row.quality.kl,
        "top1_agreement": row.quality.top1,
        "quality_source": row.quality.source,
        "quality_from_model": row.quality.from_model,
        "scored_tokens": row.quality.scored_tokens,
        "within_budget": row.within_budget,
        "decode_tokens_per_second": row.speed.decode_tokens_per_second,
        "speed_source": row.speed.source,
        "speed_depths": list(row.speed.depths),
    }


def report(path: str, advice: Advice) -> AdviceReport:
    choice = advice.choice
    return {
        "model": path,
        "sha256": advice.model.sha256,
        "architecture": advice.model.architecture,
        "parameters": advice.model.parameters,
        "budget_bytes": advice.budget_bytes,
        "budget": advice.budget_words,
        "max_kl": advice.max_kl,
        "context": advice.context,
        "rule": advice.rule,
        "choice": (
            {
                "kv": choice.mode.label,
                "type_k": choice.mode.k.name,
                "type_v": choice.mode.v.name,
                "n_ctx": advice.n_ctx,
            }
            if choice is not None
            else None
        ),
        "sentence": advice.sentence,
        "notes": list(advice.notes),
        "modes": [_row(row) for row in advice.rows],
    }


def text(advice: Advice) -> str:
    rows = [["K/V", "largest n_ctx", "KL", "top-1", "quality", "decode t/s", "within"]]
    for row in advice.rows:
        q = row.quality
        rows.append(
            [
                row.mode.label,
                f"{row.largest_n_ctx:,}" if not row.unavailable else "-",
                "-" if q.kl is None else f"{q.kl:.4f}",
                "-" if q.top1 is None else f"{q.top1:.1%}",
                q.source,
                (
                    "?"
                    if row.speed.decode_tokens_per_second is None
                    else f"{row.speed.decode_tokens_per_second:.1f}"
                ),
                "yes" if row.within_budget else "no",
            ]
        )
    lines = [advice.sentence, f"Rule: {advice.rule} (budget KL <= {advice.max_kl:g})."]
    lines += aligned_rows(rows, right={1, 2, 3, 5}, indent="  ")
    lines += [f"Note: {note}" for note in advice.notes]
    lines += [f"{r.mode.label}: {r.unavailable}" for r in advice.rows if r.unavailable]
    return "\n".join(lines)


def measurement_size(args: argparse.Namespace) -> ShortMeasurement:
    """The short run --measure makes: SHORT, with --chunks and --chunk-tokens when given."""
    if not args.measure:
        if args.chunks is not None or args.chunk_tokens is not None:
            raise BadInputError("--chunks and --chunk-tokens size a measurement: add --measure.")
        return SHORT
    chunks = SHORT.quality_chunks if args.chunks is None else args.chunks
    tokens = SHORT.chunk_tokens if args.chunk_tokens is None else args.chunk_tokens
    if chunks < 1:
        raise BadInputError(f"--chunks must be 1 or more, not {chunks}.")
    if tokens < MIN_CHUNK_TOKENS:
        raise BadInputError(f"--chunk-tokens must be {MIN_CHUNK_TOKENS} or more, not {tokens}.")
    # The context holds one chunk; never below SHORT's, where the timed decode runs too.
    return replace(
        SHORT, quality_chunks=chunks, chunk_tokens=tokens, n_ctx=max(SHORT.n_ctx, tokens)
    )


def _measure(path_arg: str, short: ShortMeasurement) -> None:
    path = resolve_model(path_arg)
    steps = measurement_steps(path, short)
    print(
        f"Measuring {len(steps.names) // 3} K/V modes on {safe_text(path.name, 120)}: about "
        f"{steps.total_seconds:.0f} s ({steps.rates.source}).",
        file=sys.stderr,
        flush=True,
    )
    measure_for_advice(
        path,
        short,
        progress_cb=lambda f, m: print(f"[{f * 100:3.0f}%] {m}", file=sys.stderr, flush=True),
    )


def run(args: argparse.Namespace) -> int:
    check_max_kl(args.max_kl)
    if args.context is not None and args.context < 1:
        raise BadInputError(f"--context must be a positive number of tokens, not {args.context}.")
    short = measurement_size(args)
    if args.measure:
        _measure(args.model, short)
    path = resolve_model(args.model)
    advice = advise_model(path, max_kl=args.max_kl, context=args.context)
    if args.json:
        print(json.dumps(report(str(path), advice), indent=2))
    else:
        print(text(advice))
    return 0
