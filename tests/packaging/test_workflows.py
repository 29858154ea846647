"""The GitHub workflow files: every third-party action pinned to a commit, each file valid YAML,
and the ones no project machine runs say so at the top."""

from __future__ import annotations

import importlib.util
import plistlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# owner/repo[/path]@<40 hex> # v<version>: a tag can be moved, a commit cannot.
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d[\w.-]*$")
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(.+?)\s*$")


def uses_lines(path: Path) -> list[str]:
    return [
        match.group(1)
        for line in path.read_text(encoding="utf-8").splitlines()
        if (match := USES.match(line))
    ]


def test_there_are_workflows_using_actions() -> None:
    assert {path.name for path in WORKFLOWS} >= {"windows.yml", "macos.yml", "appimage.yml"}
    assert all(uses_lines(path) for path in WORKFLOWS)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_every_action_is_pinned_to_a_commit_with_its_version(path: Path) -> None:
    unpinned = [uses for uses in uses_lines(path) if not PINNED.match(uses)]
    assert not unpinned, f"{path.name}: pin to a full commit SHA with '# vX.Y.Z': {unpinned}"


def test_the_pin_check_refuses_a_tag_or_a_short_sha() -> None:
    assert PINNED.match("actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2")
    for bad in (
        "actions/checkout@v4",
        "actions/checkout@11bd719 # v4.2.2",
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
    ):
        assert not PINNED.match(bad)


def test_each_action_has_one_pin_across_the_workflows() -> None:
    pins: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for uses in uses_lines(path):
            action, _, ref = uses.partition("@")
            pins.setdefault(action, set()).add(ref)
    drifted = {action: refs for action, refs in pins.items() if len(refs) > 1}
    assert not drifted, f"one action pinned to different commits: {drifted}"


@pytest.mark.parametrize("name", ["windows.yml", "macos.yml", "appimage.yml", "release.yml"])
def test_workflows_no_project_machine_runs_say_so_first(name: str) -> None:
    head = (ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8").split("\nname:")[0]
    assert head.startswith("#") and "NOT RUN HERE" in head


@pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None, reason="PyYAML is not installed (not a dependency)"
)
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_each_workflow_parses_with_jobs_and_steps(path: Path) -> None:
    import yaml

    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(workflow, dict) and workflow.get("jobs"), f"{path.name} has no jobs"
    parsed_uses = []
    for name, job in workflow["jobs"].items():
        assert job.get("runs-on") and job.get("steps"), f"{path.name}: job {name} is incomplete"
        parsed_uses += [step["uses"] for step in job["steps"] if "uses" in step]
    # What the pin check read line by line is what GitHub reads (jobs may use different actions).
    assert all(uses.split(" #")[0] in parsed_uses for uses in uses_lines(path))


def test_macos_signing_entitlements_parse() -> None:
    entitlements = plistlib.loads(
        (ROOT / "packaging" / "macos" / "entitlements.plist").read_bytes()
    )
    assert entitlements["com.apple.security.cs.disable-library-validation"] is True
