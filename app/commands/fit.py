"""`kvstudio fit MODEL`: the KV cache per mode at a context, and the largest context that fits."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, NotRequired, TypedDict

from app.kv.fit import MARGIN, fit_estimate
from app.kv.kv_types import COMPARE_MODES, KvMode
from app.load.load_check import check_context_size, check_trained_context
from app.models.gguf_read import read_gguf_header
from app.models.model_ref import resolve_model
from app.platform.errors import BadInputError
from app.platform.probes import read_free_memory
from app.platform.safe_text import clip, safe_text
from app.platform.text_table import aligned_rows
from app.platform.units import parse_size, size_figure
from app.platform.units import size as _size

if TYPE_CHECKING:
    from pathlib import Path

    from app.kv.fit import ModeFit
    from app.models.gguf_header import GgufHeader


DEFAULT_CTX = 4096  # the app's default context (LoadProfile.n_ctx)
JSON_TEXT_LIMIT = 1000  # characters of a file's own text in --json


class CacheReport(TypedDict):
    cache: str
    cells: int
    layers: int
    k_bytes: int
    v_bytes: int
    total_bytes: int
    llama_log_line: str


class ModeReport(TypedDict):
    kv: str  # the mode's label
    kv_bytes: int
    k_bytes: int
    v_bytes: int
    fp16_kv_bytes: int
    saving_bytes: int
    caches: list[CacheReport]
    compute_bytes_estimate: int
    need_bytes: int
    verdict: str
    largest_n_ctx: int
    largest_n_ctx_with_margin: int


class ModelFacts(TypedDict):
    path: str
    name: str | None
    architecture: str
    quantization: str | None
    parameters: int
    context_length: int | None


class FitReport(TypedDict):
    """What `kvstudio fit --json` prints (and the text is written from)."""

    model: ModelFacts
    n_ctx: int
    n_ctx_allocated: int
    budget_bytes: int
    budget_source: str
    on_gpu: bool
    weights_bytes: int
    output_bytes: int
    exact_kv: bool
    note: str
    modes: list[ModeReport]
    margin: NotRequired[float]  # the share verdicts keep spare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a .gguf file or the word 'starter'")
    parser.add_argument(
        "--vram", metavar="SIZE", help="memory budget, e.g. 24GiB (default: free memory now)"
    )
    parser.add_argument(
        "--ctx",
        type=int,
        default=DEFAULT_CTX,
        help=f"context size in tokens (default {DEFAULT_CTX})",
    )
    parser.add_argument(
        "--kv",
        metavar="K/V",
        help="one KV mode, e.g. q8_0/f16 (default: compare f16/f16, q8_0/f16, q8_0/q8_0)",
    )
    parser.add_argument(
        "--ubatch", type=int, default=512, help="physical batch size n_ubatch (default 512)"
    )
    parser.add_argument(
        "--swa-full",
        action="store_true",
        help="full-size sliding-window cache (llama.cpp --swa-full)",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="the model runs on the CPU: budget is system RAM"
    )
    parser.add_argument(
        "--force", action="store_true", help="show a context beyond the model's trained context"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _budget(args: argparse.Namespace) -> tuple[int, str, bool]:
    """(bytes, where the number came from, whether the model is on a GPU)."""

    if args.vram is not None:
        return parse_size(args.vram), "--vram", not args.cpu

    free = read_free_memory(gpu=not args.cpu)
    return free.bytes, f"free {free.device} now, read with {free.source}", free.on_gpu


def run(args: argparse.Namespace) -> int:
    check_context_size(args.ctx, "--ctx")
    if args.ubatch <= 0:
        raise BadInputError(f"--ubatch must be a positive number of tokens, not {args.ubatch}.")
    modes = (KvMode.parse(args.kv),) if args.kv else COMPARE_MODES
    budget, source, on_gpu = _budget(args)

    path = resolve_model(args.model)
    header = read_gguf_header(path)
    if not args.force:
        check_trained_context(header, args.ctx, "lower --ctx, or pass --force to see it anyway")
    options = {"n_ubatch": args.ubatch, "swa_full": args.swa_full, "on_gpu": on_gpu}
    fits = fit_estimate(header, path.stat().st_size, args.ctx, budget, modes, **options)
    report = _report(path, header, args.ctx, budget, source, on_gpu, fits)
    report["margin"] = MARGIN
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_text(report))
    return 0


def _report(
    path: Path,
    header: GgufHeader,
    n_ctx: int,
    budget: int,
    source: str,
    on_gpu: bool,
    fits: tuple[ModeFit, ...],
) -> FitReport:
    needs = [(fit, fit.need) for fit in fits if fit.need is not None]  # fit_estimate sets each
    first = needs[0][1]
    modes: list[ModeReport] = []
    for fit, need in needs:
        kv = need.kv
        fp16 = kv.fp16_equivalent()
        modes.append(
            {
                "kv": fit.mode.label,
                "kv_bytes": kv.total_bytes,
                "k_bytes": kv.k_bytes,
                "v_bytes": kv.v_bytes,
                "fp16_kv_bytes": fp16.total_bytes,
                "saving_bytes": fp16.total_bytes - kv.total_bytes,
                "caches": [
                    {
                        "cache": c.name,
                        "cells": c.cells,
                        "layers": c.layers,
                        "k_bytes": c.k_bytes,
                        "v_bytes": c.v_bytes,
                        "total_bytes": c.total_bytes,
                        "llama_log_line": c.log_line(),
                    }
                    for c in kv.caches
                ],
                "compute_bytes_estimate": need.compute_bytes,
                "need_bytes": need.total_bytes,
                "verdict": fit.verdict,
                "largest_n_ctx": fit.largest_n_ctx,
                "largest_n_ctx_with_margin": fit.largest_n_ctx_with_margin,
            }
        )
    return {
        "model": {
            "path": str(path),
            # The file's own words, cut (JSON escaping already keeps escapes off the terminal):
            # a 300 KB "name" is no name, and one such line floods a terminal like any other.
            # The path stays whole: a script opens it, and the system bounds its length.
            "name": clip(header.name, JSON_TEXT_LIMIT) if header.name else header.name,
            "architecture": clip(header.architecture, JSON_TEXT_LIMIT),
            "quantization": header.quantization,
            "parameters": header.parameter_count,
            "context_length": header.context_length,
        },
        "n_ctx": n_ctx,
        "n_ctx_allocated": first.kv.n_ctx,
        "budget_bytes": budget,
        "budget_source": source,
        "on_gpu": on_gpu,
        "weights_bytes": first.weights_bytes,
        "output_bytes": first.output_bytes,
        "exact_kv": first.kv.exact,
        "note": first.kv.note,
        "modes": modes,
    }


def _mib(n: int) -> str:
    return size_figure(n, "MiB")


def _text(r: FitReport) -> str:
    m = r["model"]
    params = m["parameters"]
    trained = f"{m['context_length']:,}" if m["context_length"] else "?"
    lines = [
        (
            # the name, architecture and path are the file author's text
            f"{safe_text(m['name'] or 'model', 120)}  ({safe_text(m['architecture'], 40)}, "
            f"{safe_text(m['quantization'] or '?', 20)}, "
            f"{params / 1e9:.2f}B parameters, trained context {trained})"
        ),
        f"  {safe_text(m['path'], 300)}",
        (
            f"Budget {_size(r['budget_bytes'])} ({r['budget_source']}); "
            f"verdicts keep {r['margin']:.0%} spare."
        ),
        (
            f"Weights {_size(r['weights_bytes'])}, output buffer {_size(r['output_bytes'])}, "
            f"compute buffer estimated (llama.cpp reports it only at load)."
        ),
    ]
    caches = r["modes"][0]["caches"]
    shape = "; ".join(f"{c['cache']}: {c['layers']} layers x {c['cells']:,} cells" for c in caches)
    lines.append(f"KV cache at n_ctx {r['n_ctx']:,} ({shape}), MiB:")
    rows = [["K/V", "KV total", "K", "V", "saved", "compute", "need", "verdict", "largest n_ctx"]]
    for mode in r["modes"]:
        saved = mode["saving_bytes"] / mode["fp16_kv_bytes"] if mode["fp16_kv_bytes"] else 0.0
        rows.append(
            [
                mode["kv"],
                _mib(mode["kv_bytes"]),
                _mib(mode["k_bytes"]),
                _mib(mode["v_bytes"]),
                f"{saved:.1%}",
                _mib(mode["compute_bytes_estimate"]),
                _mib(mode["need_bytes"]),
                mode["verdict"],
                f"{mode['largest_n_ctx']:,}",
            ]
        )
    lines += aligned_rows(rows, right={1, 2, 3, 4, 5, 6, 8}, indent="  ")
    if len(caches) > 1:
        lines.append(
            "  per cache (K / V MiB): "
            + "; ".join(
                f"{mode['kv']} "
                + ", ".join(
                    f"{c['cache']} {_mib(c['k_bytes'])} / {_mib(c['v_bytes'])}"
                    for c in mode["caches"]
                )
                for mode in r["modes"]
            )
        )
    if r["modes"] and r["modes"][0]["largest_n_ctx"] == m["context_length"]:
        lines.append("  (largest n_ctx stops at the trained context)")
    if r["note"]:
        lines.append(f"Note: {r['note']}")
    return "\n".join(lines)
