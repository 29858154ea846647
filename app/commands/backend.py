"""`kvstudio backend ls | use NAME | add FILE|URL | verify [NAME] | rm NAME`: llama.cpp builds.

A backend package (built with `python -m kernels package VARIANT`) holds llama.cpp's libraries
for one variant; the engine runs the one chosen here, the GUI's Backends panel shows the same.
A package must be signed with a key the app trusts (app/backends/signing.py); one that is not,
or does not match its signed manifest, or does not load, is refused and the previous backend
stays in use (exit 2). `add --allow-unsigned` takes an unsigned package (one you built), with a
warning; a wrongly signed one is refused all the same. `add https://…` downloads the archive first
(app/backends/install.py: https only, or http from this machine) into a hidden folder that is
removed afterwards, its progress on one self-rewriting line when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.backends.built_in import built_in_folder
from app.backends.install import archive_name, downloaded_package
from app.backends.manifest import built_in_kernel
from app.backends.store import BackendStore, InstalledBackend
from app.commands import print_error
from app.engine.backend_probe import probe
from app.engine.backend_verify import verify
from app.platform.errors import AppError
from app.platform.paths import data_dir
from app.platform.safe_text import safe_text
from app.platform.text_table import aligned_rows
from app.platform.units import size

if TYPE_CHECKING:
    from app.backends.store import BackendStore

LINE_LIMIT = 300
UNSIGNED_WARNING = (
    "kvstudio: warning: --allow-unsigned installs a package without a signature, so nothing "
    "proves who built it; use it only for a package you built yourself."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("ls", help="the installed backends; * marks the one the engine runs")
    use = sub.add_parser("use", help="run the engine on this backend (checked and loaded first)")
    use.add_argument("name")
    add = sub.add_parser(
        "add", help="install a backend package archive (.tar.gz, or its https:// address)"
    )
    add.add_argument("archive")
    add.add_argument("--use", action="store_true", help="and switch to it")
    add.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="install a package that carries no signature (only one you built yourself)",
    )
    verify = sub.add_parser(
        "verify",
        help="check a backend's files, that it loads, and its int8-K kernels",
        description="Exit status: 0 verified; 1 the backend has a problem; 2 bad input.",
    )
    verify.add_argument("name", nargs="?", help="default: the one in use")
    remove = sub.add_parser("rm", help="delete an installed backend package")
    remove.add_argument("name")


def run(args: argparse.Namespace) -> int:
    store = BackendStore(data_dir())
    try:
        if args.action == "ls":
            _list(store)
        elif args.action == "use":
            backend = store.use(args.name, probe)
            print(f"The engine now runs the {backend.name} backend.")
        elif args.action == "add":
            if args.allow_unsigned:
                print(UNSIGNED_WARNING, file=sys.stderr)
            backend = _add(store, args.archive, allow_unsigned=args.allow_unsigned)
            if args.use:
                store.use(backend.name, probe)
                print(f"Added the {backend.name} backend; the engine now runs it.")
            else:
                name = backend.name
                print(f"Added the {name} backend; switch with `kvstudio backend use {name}`.")
        elif args.action == "rm":
            store.remove(args.name)
            print(f"Removed the {args.name} backend; the engine runs {store.chosen_name()}.")
        else:
            result = verify(store, args.name or store.chosen_name())
            # the manifest's words (its note, versions, targets) are the package author's text
            print("\n".join(safe_text(line, LINE_LIMIT) for line in result.lines()))
            return 0 if result.ok else 1
    except AppError as error:
        print_error(error)
        return 2
    return 0


def _add(store: BackendStore, archive: str, *, allow_unsigned: bool) -> InstalledBackend:
    """The package in the file `archive`, or at the address, added (not yet chosen)."""
    if not archive.startswith(("https://", "http://")):
        return store.add(Path(archive), probe, allow_unsigned=allow_unsigned)
    line = _ProgressLine(archive_name(archive)) if sys.stderr.isatty() else None
    try:
        with downloaded_package(store, archive, on_progress=line) as downloaded:
            return store.add(downloaded, probe, allow_unsigned=allow_unsigned)
    finally:
        if line is not None:
            line.end()


class _ProgressLine:
    """`NAME: 42% of 66.0 MiB` on stderr, rewritten in place as the download grows (a terminal
    only: a script reading stderr gets the one-sentence result alone)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        text = f"{self.name}: {percent}% of {size(total)}"
        print(f"\r{text}\033[K", end="", file=sys.stderr, flush=True)
        self.drawn = True

    def end(self) -> None:
        if self.drawn:
            print(file=sys.stderr)  # what comes next starts on a line of its own


def _list(store: BackendStore) -> None:
    chosen = store.chosen_name()
    # FA KERNEL: the Flash Attention GPU kernels a build carries (kvstudio-fa.N: with our patches).
    rows = [["  BACKEND", "GPU TARGETS", "FA PAIRS", "FA KERNEL", "WHAT"]]
    for backend in store.installed():
        manifest = backend.manifest
        if backend.folder is None:
            what, targets, pairs = "llama-cpp-python's own build", "-", "-"
            kernel = built_in_kernel(built_in_folder()) or "-"
        elif manifest is None:
            what, targets, pairs = f"damaged: {safe_text(backend.problem, LINE_LIMIT)}", "-", "-"
            kernel = "-"
        else:  # a manifest is the package author's text: no escapes, no megabyte summary
            what = safe_text(manifest.summary, 120)
            targets = safe_text(",".join(manifest.gpu_targets), 80) or "-"
            pairs = safe_text(",".join(manifest.fa_pairs), 80) or "all"
            kernel = manifest.kernel or "-"
        mark = "*" if backend.name == chosen else " "
        rows.append([f"{mark} {backend.name}", targets, pairs, kernel, what])
    print("\n".join(aligned_rows(rows)))
