"""`kvstudio ls [--json]`: the models in the library (HF cache, download folders, starter)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.models.library import list_models
from app.platform.safe_text import safe_text
from app.platform.text_table import aligned_rows
from app.platform.units import parameters, size


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    parser.add_argument(
        "--dir",
        type=Path,
        action="append",
        default=[],
        help="also look in this folder (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    models = list_models(extra_dirs=args.dir)
    if args.json:
        print(json.dumps([m.to_json() for m in models], indent=1))
        return 0
    if not models:
        print("No models yet: `kvstudio pull OWNER/REPO:QUANT` downloads one.")
        return 0
    rows = [("NAME", "REPO", "ARCH", "PARAMS", "QUANT", "CONTEXT", "SIZE", "PATH")]
    for m in models:
        # file names and metadata are the file author's text: no escapes, no megabyte names
        rows.append(
            (
                safe_text(m.name, 80),
                safe_text(m.repo_id or "-", 80),
                safe_text(m.architecture or "?", 30),
                parameters(m.parameter_count),
                safe_text(m.quantization or "?", 20),
                f"{m.context_length:,}" if m.context_length else "?",
                size(m.file_size),
                safe_text(m.path, 300) + (f"  ({safe_text(m.error, 300)})" if m.error else ""),
            )
        )
    print("\n".join(aligned_rows(rows)))
    return 0
