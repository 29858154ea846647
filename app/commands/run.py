"""`kvstudio run MODEL -p PROMPT`: one raw completion through the engine process."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import replace

from app.commands import print_error
from app.commands.model_load import add_rpc_argument, checked_load_options
from app.engine.messages import (
    Failed,
    Finished,
    Generate,
    KernelWarning,
    Load,
    Loaded,
    SamplingSettings,
    Token,
)
from app.engine.process import EngineProcess, until
from app.kv.kv_types import DEFAULT_KV_MODE
from app.platform.errors import BadInputError, EngineFailedError
from app.platform.safe_text import safe_stream
from app.platform.units import size_number

INTERRUPTED_EXIT = 130
LOAD_TIMEOUT_S = 600.0
TOKEN_TIMEOUT_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a .gguf file or the word 'starter'")
    parser.add_argument("-p", "--prompt", required=True, help="the text to continue")
    parser.add_argument(
        "-n", "--max-tokens", type=int, default=128, help="tokens to generate (default 128)"
    )
    parser.add_argument(
        "--ctx", type=int, default=4096, help="context size in tokens (default 4096)"
    )
    parser.add_argument(
        "--kv",
        default=DEFAULT_KV_MODE.label,
        help=f"KV cache types K/V (default {DEFAULT_KV_MODE.label})",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)"
    )
    parser.add_argument(
        "--gpu-layers", type=int, default=-1, help="layers on the GPU (-1: all; 0: none)"
    )
    parser.add_argument("--temp", type=float, default=0.7, help="sampling temperature (0: greedy)")
    parser.add_argument("--seed", type=int, default=None, help="sampling seed")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object at the end instead"
    )
    add_rpc_argument(parser)
    parser.add_argument(
        "--repack",
        action="store_true",
        help="let llama.cpp repack CPU weights (faster on the CPU; greedy text then differs "
        "from the same model split across workers)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="load even beyond the trained context or the free memory the device reports",
    )


def run(args: argparse.Namespace) -> int:
    # Every bad input is refused here, before an engine process is spawned (the --rpc workers
    # included: checked_load_options asks each one).
    if args.max_tokens <= 0:
        raise BadInputError(f"-n must be a positive number of tokens, not {args.max_tokens}.")
    options, mode = checked_load_options(args)
    options = replace(options, repack_weights=args.repack)

    sampling = SamplingSettings(temperature=args.temp, max_tokens=args.max_tokens, seed=args.seed)
    proc = EngineProcess()
    try:
        proc.send(Load(options))
        loaded = until(proc, "Loaded", LOAD_TIMEOUT_S)
        if not args.json:
            for warning in loaded.warnings:
                print_error(f"warning: {warning.text}")
        proc.send(Generate("run", sampling, prompt=args.prompt))
        finished, interrupted = _stream(proc, echo=not args.json)
    finally:
        proc.stop()
    if args.json:
        print(json.dumps(_report(loaded, finished), indent=2))
    else:
        kv_mib = sum(c.total_mib for c in loaded.kv_caches)
        print(
            f"\n[{finished.generated_tokens} tokens, {finished.tokens_per_second:.1f} t/s, "
            f"first token {finished.time_to_first_token_s * 1000:.0f} ms, "
            f"KV cache {size_number(kv_mib * 2**20, 'MiB', 2)} MiB ({mode.label})]",
            file=sys.stderr,
        )
    return INTERRUPTED_EXIT if interrupted else 0


def _stream(proc: EngineProcess, echo: bool) -> tuple[Finished, bool]:
    """Print tokens as they come; Ctrl+C stops generating and keeps what came (a second
    Ctrl+C gives up at once). Returns (the Finished event, whether Ctrl+C stopped it)."""
    interrupts = 0

    def on_sigint(_signum: int, _frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            raise KeyboardInterrupt
        proc.cancel()  # only sets a shared byte: safe inside a signal handler

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return _stream_events(proc, echo), interrupts > 0
    finally:
        signal.signal(signal.SIGINT, previous)


def _stream_events(proc: EngineProcess, echo: bool) -> Finished:
    while True:
        event = proc.recv(timeout=TOKEN_TIMEOUT_S)
        if event is None:
            raise EngineFailedError(f"The engine sent nothing for {TOKEN_TIMEOUT_S:.0f} seconds.")
        if isinstance(event, Token) and echo:
            # A model can write escape sequences (colours, a new window title, a cleared
            # screen): the reply reaches the terminal as text only. --json escapes them itself.
            sys.stdout.write(safe_stream(event.text))
            sys.stdout.flush()
        elif isinstance(event, KernelWarning) and echo:
            print(file=sys.stderr)
            print_error(f"warning: {event.text}")
        elif isinstance(event, Finished):
            return event
        elif isinstance(event, Failed):
            raise EngineFailedError(event.message)


def _report(loaded: Loaded, finished: Finished) -> dict[str, object]:
    caches = [
        {
            "sliding_window": c.swa,
            "cells": c.cells,
            "layers": c.layers,
            "k_type": c.k_type,
            "v_type": c.v_type,
            "k_bytes": c.k_bytes,
            "v_bytes": c.v_bytes,
            "total_bytes": c.total_bytes,
            "k_mib": c.k_mib,
            "v_mib": c.v_mib,
            "total_mib": c.total_mib,
            "devices": list(c.devices),
        }
        for c in loaded.kv_caches
    ]
    return {
        "model": loaded.model_path,
        "architecture": loaded.architecture,
        "kv_mode": loaded.options.kv.label,
        "n_ctx": loaded.n_ctx,
        "text": finished.text,
        "prompt_tokens": finished.prompt_tokens,
        "generated_tokens": finished.generated_tokens,
        "stop_reason": finished.stop_reason,
        "time_to_first_token_s": round(finished.time_to_first_token_s, 4),
        "tokens_per_second": round(finished.tokens_per_second, 2),
        "load_seconds": round(loaded.load_seconds, 3),
        "kv_caches": caches,
        "kv_total_bytes": sum(c.total_bytes for c in loaded.kv_caches),
        "kv_total_mib": round(sum(c.total_mib for c in loaded.kv_caches), 2),
        "compute_buffers": [
            {"device": b.device, "bytes": b.bytes, "mib": b.mib} for b in loaded.compute_buffers
        ],
        "warnings": [{"kind": w.kind, "text": w.text} for w in loaded.warnings],
    }
