"""The project stands alone: nothing in it points at notes kept outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\.\./shared|\bFACTS\.md\b|\bFACTS\b")
CHECKED = ("*.py", "*.md", "*.sh", "*.toml")
SKIPPED = {".venv", ".git", "build", "dist", "node_modules"}


def test_no_file_points_outside_the_repository() -> None:
    offenders = []
    for pattern in CHECKED:
        for path in ROOT.rglob(pattern):
            if SKIPPED & set(path.relative_to(ROOT).parts) or path == Path(__file__).resolve():
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
