"""The test run leaves the checkout as it found it: no test writes into the repository.

At the start of a run this plugin notes what `git status --porcelain` shows and a hash of every
changed or untracked file; at the end it looks again. Anything the run added, removed or
rewrote fails the run, named, even when every test passed: a run that rewrites tracked files
(screenshots, generated pages) makes the next commit carry changes nobody looked at.

Tests write screenshots and generated pages to the `docs_folder` fixture (a temporary folder);
`scripts/refresh_docs.py` is the one command that writes them into docs/ on purpose, and the
check is off in that run (KVSTUDIO_REFRESH_DOCS=1).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFRESH_VARIABLE = "KVSTUDIO_REFRESH_DOCS"


def refreshing_docs() -> bool:
    return os.environ.get(REFRESH_VARIABLE) == "1"


def tree_state(root: Path = ROOT) -> dict[str, str] | None:
    """Path -> hash of every file git reports as changed or untracked; None outside a git
    checkout (an unpacked sdist, say), where there is nothing to compare."""
    try:
        listed = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    state: dict[str, str] = {}
    entries = iter(listed.decode("utf-8", "surrogateescape").split("\0"))
    for entry in entries:
        if not entry:
            continue
        status, name = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            next(entries, None)  # a rename's second field is the old name
        path = root / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "-"
        state[name] = f"{status} {digest}"
    return state


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per path the run changed, in the order git would list them."""
    lines = []
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            was = "clean" if name not in before else before[name].split()[0].strip()
            now = "clean" if name not in after else after[name].split()[0].strip()
            lines.append(f"{name} ({was} -> {now}, or its content changed)")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._kvstudio_tree = None if refreshing_docs() else tree_state()  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the run's main process checks once, after every worker
    before = getattr(session.config, "_kvstudio_tree", None)
    if before is None or getattr(session.config.option, "collectonly", False):
        return
    after = tree_state()
    if after is None:
        return
    changed = changes(before, after)
    if not changed:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = (
        "The test run changed the checkout; tests must write to temporary folders "
        "(scripts/refresh_docs.py refreshes docs/ on purpose):\n  " + "\n  ".join(changed)
    )
    if reporter is not None:
        reporter.write_line(message, red=True, bold=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
