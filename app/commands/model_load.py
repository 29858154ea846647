"""The load `kvstudio run` and `kvstudio serve` ask for, from their shared options (MODEL, --ctx,
--kv, --threads, --gpu-layers, --rpc, --split, --force), checked before any engine process is
spawned."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from app.commands import print_error
from app.engine.rpc_load_check import backend_with_rpc, check_rpc_load
from app.kv.kv_types import KvMode
from app.load.load_check import check_context_size, check_model_load
from app.load.profile import LoadProfile
from app.load.rpc_workers import parse_layer_split, parse_workers
from app.models.model_ref import resolve_model
from app.platform.errors import BadInputError
from app.platform.paths import data_dir

if TYPE_CHECKING:
    from app.kv.kv_types import KvMode
    from app.load.profile import LoadProfile


def add_rpc_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rpc",
        metavar="HOST:PORT[,...]",
        help="split the model across these workers ('kvstudio worker' on each machine)",
    )
    parser.add_argument(
        "--split",
        metavar="SHARE[,...]",
        help="with --rpc: each device's share of the layers, in the order the load lists them "
        "(the workers' devices, then this machine's GPUs), e.g. 1,3; default: by free memory",
    )


def checked_load_options(args: argparse.Namespace) -> tuple[LoadProfile, KvMode]:
    """LoadProfile for args.model and the KV mode asked for, or BadInputError with one sentence
    (a bad option, a file that is not a model, a context that will not fit without --force).
    With args.rpc the workers are checked too (each answers, runs the K/V mode, and the model
    fits on every device), instead of this machine's memory alone."""

    check_context_size(args.ctx, "--ctx")
    if args.threads is not None and args.threads <= 0:
        raise BadInputError(f"--threads must be positive, not {args.threads}.")
    mode = KvMode.parse(args.kv)
    path = resolve_model(args.model)
    options = LoadProfile(
        model_path=str(path),
        n_ctx=args.ctx,
        n_gpu_layers=args.gpu_layers,
        kv=mode,
        n_threads=args.threads,
    )
    split = getattr(args, "split", None)
    if getattr(args, "rpc", None) is not None:
        return _checked_workers(args.rpc, split, options, args.force), mode
    if split is not None:
        raise BadInputError("--split divides the layers between the --rpc workers: give --rpc too.")
    check_model_load(path, options, force=args.force)
    return options, mode


def _checked_workers(
    text: str, split: str | None, options: LoadProfile, force: bool
) -> LoadProfile:
    """`options` with the --rpc workers (and --split shares), refused with one sentence unless
    the chosen backend has RPC, every worker answers (llama.cpp aborts the engine on a worker it
    cannot reach), runs the K/V mode, the split has a share per device, and the model fits on
    every device."""

    workers = parse_workers(text)
    shares = parse_layer_split(split) if split is not None else ()
    folder = backend_with_rpc(data_dir())
    options = replace(options, rpc_workers=workers, layer_split=shares)
    checked = check_rpc_load(options, folder, force=force)
    for notice in checked.notices():
        print_error(f"warning: {notice}")
    return options
