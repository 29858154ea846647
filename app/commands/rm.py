"""`kvstudio rm NAME`: delete a downloaded model, or what a failed download of a repo left.

No question asked; ambiguous names are refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.commands import print_error
from app.models.hub_env import hub_cache_dir
from app.models.leftovers import delete_leftovers, download_leftovers
from app.models.library import find_model
from app.models.library_delete import delete_model
from app.models.model_folders import ModelFolders
from app.platform.errors import AppError, ModelNotFoundError
from app.platform.safe_text import safe_text
from app.platform.units import size


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
    try:
        try:
            model = find_model(args.name, extra_dirs=args.dir)
        except ModelNotFoundError:
            # No finished model by that name: an unfinished download of the repo may have
            # left files the library does not list; those can always be removed by repo.
            if _delete_leftovers(args.name, args.dir):
                return 0
            raise
        delete_model(model)
    except AppError as error:
        print_error(error)
        return 2
    name, where = safe_text(model.name, 120), safe_text(model.path, 300)
    print(f"Deleted {name} ({size(model.file_size)}) from {where}")
    return 0


def _delete_leftovers(name: str, extra_dirs: list[Path]) -> bool:
    """Delete what unfinished downloads of OWNER/REPO (from OWNER/REPO[:QUANT]) left; False
    when `name` is no repo or nothing is left."""

    repo_id = name.strip().partition(":")[0]
    choices = ModelFolders.of_app().read()
    folders = [*choices.download_folders, *extra_dirs]
    if choices.download_to is not None:
        folders.append(choices.download_to)
    cache = hub_cache_dir()
    try:
        found = download_leftovers(repo_id, cache_dir=cache, folders=folders)
    except AppError:  # not an OWNER/REPO name
        return False
    if not found:
        return False
    freed = delete_leftovers(repo_id, found, cache_dir=cache)
    print(
        f"Deleted what unfinished downloads of {repo_id} left: {len(found)} "
        f"file{'s' if len(found) != 1 else ''} ({size(freed)})"
    )
    return True
