"""`kvstudio bench MODEL`: the fp16-vs-int8-K comparison, measured, without the GUI.

Each KV mode runs in a fresh engine process: KV bytes from llama.cpp's log, peak memory
from the memory probe (NVML / AMD sysfs / RSS), prompt and decode speed at a depth, and
quality against f16/f16 on a reference text. Needs no Qt (only --plot does).

`kvstudio bench --results run.json --plot out.png` re-prints and plots a saved --json result
(so a run made on a GPU machine without PySide6 is plotted elsewhere).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from app.engine.advisor_measure import remember_comparison
from app.engine.compare import parse_modes, run_compare
from app.engine.compare_result import format_table, run_title
from app.engine.compare_words import gain_sentence
from app.engine.llama_switches import switches_text
from app.kv.kv_types import COMPARE_MODES, FP16_KV_MODE
from app.load.load_check import check_context_size
from app.models.model_ref import resolve_model
from app.platform.errors import BadInputError
from app.platform.safe_text import safe_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", metavar="MODEL", nargs="?", help="a .gguf file or the word 'starter'"
    )
    parser.add_argument(
        "--ctx", type=int, default=8192, help="context size in tokens (default 8192)"
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=0,
        help="tokens already in the context when speed is measured (default 0)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(mode.label for mode in COMPARE_MODES),
        help=f"K/V modes, comma-separated ({FP16_KV_MODE.label} is always measured first)",
    )
    parser.add_argument(
        "--gpu-layers", type=int, default=-1, help="layers on the GPU (-1: all; 0: none)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)"
    )
    parser.add_argument(
        "--prompt-tokens", type=int, default=512, help="prompt batch timed (default 512)"
    )
    parser.add_argument(
        "--gen-tokens", type=int, default=128, help="tokens decoded and timed (default 128)"
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=3,
        help="speed runs per mode; the median is reported (default 3)",
    )
    parser.add_argument(
        "--chunks",
        type=int,
        default=4,
        help="quality: chunks of the reference text (default 4; 0 skips quality)",
    )
    parser.add_argument(
        "--chunk-tokens", type=int, default=512, help="quality: tokens per chunk (default 512)"
    )
    parser.add_argument(
        "--text",
        metavar="FILE",
        default=None,
        help="reference text file for quality (default: Python's pydoc topics)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="load even beyond the trained context or the free memory the device reports",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the results as JSON instead of a table"
    )
    parser.add_argument(
        "--csv", metavar="OUT.csv", default=None, help="also write the results as CSV"
    )
    parser.add_argument(
        "--plot", metavar="OUT.png", default=None, help="draw a bar chart (needs PySide6)"
    )
    parser.add_argument(
        "--record",
        metavar="OUT.json",
        default=None,
        help="save the memory samples and markers of the whole run (dashboard: Open recording)",
    )
    parser.add_argument(
        "--results",
        metavar="RUN.json",
        default=None,
        help="instead of measuring, re-print (and --plot) a result saved with --json",
    )


def _check(args: argparse.Namespace) -> None:
    """Refuse bad input before any engine is spawned."""

    if args.results is None and not args.model:
        raise BadInputError("Give a MODEL (a .gguf file or 'starter'), or --results RUN.json.")
    check_context_size(args.ctx, "--ctx")
    for name in ("prompt_tokens", "gen_tokens", "chunk_tokens", "repetitions"):
        if getattr(args, name) <= 0:
            raise BadInputError(
                f"--{name.replace('_', '-')} must be a positive number, not {getattr(args, name)}."
            )
    if args.depth < 0:
        raise BadInputError(f"--depth must be 0 or more, not {args.depth}.")
    if args.chunks < 0:
        raise BadInputError(f"--chunks must be 0 or more, not {args.chunks}.")
    if args.threads is not None and args.threads <= 0:
        raise BadInputError(f"--threads must be positive, not {args.threads}.")
    if args.depth + max(args.prompt_tokens, args.gen_tokens) > args.ctx:
        raise BadInputError(
            f"--depth {args.depth} plus {max(args.prompt_tokens, args.gen_tokens)} measured tokens "
            f"does not fit --ctx {args.ctx}."
        )
    if args.chunks and args.chunk_tokens > args.ctx:
        raise BadInputError(f"--chunk-tokens {args.chunk_tokens} does not fit --ctx {args.ctx}.")
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        raise BadInputError("--plot must name a .png file.")


def _progress(fraction: float, message: str) -> None:
    print(f"[{fraction * 100:3.0f}%] {message}", file=sys.stderr, flush=True)


def _plotter() -> Callable[[Sequence[dict[str, object]], str, str], object]:
    """The PNG renderer (Qt, imported only for --plot), or BadInputError without PySide6."""
    try:
        # Qt, only for --plot: a command never imports it at its top (tests/test_layers.py).
        from app.services.compare_chart import render_compare_png
    except ImportError:
        raise BadInputError(
            "--plot needs PySide6; save the results with --json and plot them elsewhere with "
            "`kvstudio bench --results RUN.json --plot OUT.png`."
        ) from None
    return render_compare_png


def _plot(rows: Sequence[Mapping[str, object]], title: str, path: str) -> None:
    _plotter()([dict(row) for row in rows], path, title)
    print(f"plot written to {path}", file=sys.stderr)


def _from_results(args: argparse.Namespace) -> int:
    try:
        data = json.loads(Path(args.results).read_text(encoding="utf-8"))
        rows = data["modes"]
    except FileNotFoundError:
        raise BadInputError(f"No results file at {args.results}.") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise BadInputError(
            f"{args.results} is not a result saved by `kvstudio bench --json`."
        ) from None
    print(json.dumps(data, indent=2) if args.json else format_table(rows))
    if not args.json and gain_sentence(rows):
        print(gain_sentence(rows))
    if args.plot:
        _plot(rows, _title(data), args.plot)
    return 0


def _title(data: Mapping[str, object]) -> str:
    return run_title(data)


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.plot:
        _plotter()  # refuse before minutes of measuring, not after
    if args.results is not None:
        return _from_results(args)

    modes = parse_modes(args.modes)
    path = resolve_model(args.model)
    text = None
    if args.text is not None:
        try:
            text = Path(args.text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise BadInputError(
                f"The reference text {args.text} cannot be read ({error})."
            ) from None

    result = run_compare(
        path,
        n_ctx=args.ctx,
        depth=args.depth,
        modes=modes,
        reference_text=text,
        progress_cb=_progress,
        n_gpu_layers=args.gpu_layers,
        n_prompt=args.prompt_tokens,
        n_gen=args.gen_tokens,
        quality_chunks=args.chunks,
        chunk_tokens=args.chunk_tokens,
        n_threads=args.threads,
        repetitions=args.repetitions,
        force=args.force,
    )
    remember_comparison(result)  # what `kvstudio advise` reads for this model file
    if args.record and result.recording is not None:
        result.recording.save(args.record)
        print(f"memory recording written to {args.record}", file=sys.stderr)
    if args.csv:
        Path(args.csv).write_text(result.to_csv(), encoding="utf-8")
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(
            f"{safe_text(path.name, 120)}: n_ctx {args.ctx}, depth {args.depth}; "
            f"memory from {result.probe}"
            f"{' (' + result.device + ')' if result.device else ''}"
            f"{'; Flash Attention GPU kernels: ' + result.fa_kernel if result.fa_kernel else ''}"
            f"{'; measured with ' + switches_text(result.switches) if result.switches else ''}"
        )
        print(result.table())
        if gain_sentence(result.rows()):
            print(gain_sentence(result.rows()))  # what int8-K gains, in words
        for mode in result.modes:
            for warning in mode.warnings:
                print(f"warning ({mode.mode.label}): {safe_text(warning, 300)}")
        for note in result.notes():
            print(f"note: {note}")
    if args.plot:
        _plot(result.rows(), _title(data), args.plot)
    return 0
