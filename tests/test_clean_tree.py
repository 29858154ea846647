"""The check that a test run leaves the checkout as it found it (tests/clean_tree.py), on a
real git repository: a rewritten tracked file, a new file and a file already changed before the
run and changed again are named; a file changed before the run and left alone is not."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.clean_tree import changes, tree_state


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_what_the_run_changed_is_named_and_nothing_else(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in ("shot.png", "edited.py", "kept.py"):
        (repo / name).write_text(name)
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (repo / "edited.py").write_text("a developer's edit before the run")
    (repo / "kept.py").write_text("another edit before the run")

    before = tree_state(repo)
    assert before is not None and set(before) == {"edited.py", "kept.py"}
    assert changes(before, tree_state(repo) or {}) == []  # nothing done: nothing named

    (repo / "shot.png").write_text("re-rendered by a test")
    (repo / "new.md").write_text("a page a test generated")
    (repo / "edited.py").write_text("changed again by the run")
    named = changes(before, tree_state(repo) or {})
    assert [line.split()[0] for line in named] == ["edited.py", "new.md", "shot.png"]


def test_outside_a_git_checkout_there_is_nothing_to_compare(tmp_path: Path) -> None:
    assert tree_state(tmp_path) is None
