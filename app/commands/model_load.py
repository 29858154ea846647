"""The load `kvstudio run` and `kvstudio serve` ask for, from their shared options (MODEL, --ctx,
--kv, --threads, --gpu-layers, --force), checked before any engine process is spawned."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.core.errors import BadInputError

if TYPE_CHECKING:
    from app.core.kv_types import KvMode
    from app.engine.messages import LoadOptions


def checked_load_options(args: argparse.Namespace) -> tuple[LoadOptions, KvMode]:
    """LoadOptions for args.model and the KV mode asked for, or BadInputError with one sentence
    (a bad option, a file that is not a model, a context that will not fit without --force)."""
    from app.core.kv_types import KvMode
    from app.core.load_check import check_context_size, check_model_load
    from app.core.model_ref import resolve_model
    from app.engine.messages import LoadOptions

    check_context_size(args.ctx, "--ctx")
    if args.threads is not None and args.threads <= 0:
        raise BadInputError(f"--threads must be positive, not {args.threads}.")
    mode = KvMode.parse(args.kv)
    path = resolve_model(args.model)
    options = LoadOptions(
        model_path=str(path),
        n_ctx=args.ctx,
        n_gpu_layers=args.gpu_layers,
        type_k=mode.k.name,
        type_v=mode.v.name,
        n_threads=args.threads,
    )
    check_model_load(path, options, force=args.force)
    return options, mode
