"""`kvstudio rm NAME`: delete a downloaded model.

No question asked; ambiguous names are refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "rm"
HELP = "delete a model from the library (by name, OWNER/REPO:QUANT or path)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="as `kvstudio ls` shows it, or OWNER/REPO:QUANT, or a path")
    parser.add_argument(
        "--dir",
        type=Path,
        action="append",
        default=[],
        help="also look in this folder (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from app.core.errors import AppError
    from app.core.library import delete_model, find_model
    from app.core.units import size

    try:
        model = find_model(args.name, extra_dirs=args.dir)
        delete_model(model)
    except AppError as error:
        print(f"kvstudio: {error}", file=sys.stderr)
        return 2
    print(f"Deleted {model.name} ({size(model.file_size)}) from {model.path}")
    return 0
