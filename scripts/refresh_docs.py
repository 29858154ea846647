"""Refresh the screenshots and generated pages the tests make, in docs/ (the one command that
writes them there; a plain test run writes them to a temporary folder and fails if it changes
the checkout, tests/clean_tree.py).

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/refresh_docs.py        # the screenshot tests
    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/refresh_docs.py --all  # the whole suite:
        also docs/reliability.json and .md, from the facts every test records

Extra arguments go to pytest. Look at what changed (`git diff --stat docs/`, open the PNGs)
before committing it. The pages of the app itself: scripts/screenshots.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="run the whole suite")
    args, pytest_args = parser.parse_known_args(argv)
    env = dict(os.environ, KVSTUDIO_REFRESH_DOCS="1")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    selection = [] if args.all else ["-m", "docs"]
    # One process (no -n): every test's reliability facts are merged in one place.
    command = [sys.executable, "-m", "pytest", *selection, *pytest_args]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
