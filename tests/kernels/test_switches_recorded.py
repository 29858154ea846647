"""Every environment switch our kernels read, in the adopted patches and in the candidates the next
device run builds (those the kernel log's last section names), is one the app records with a
bench or comparison: a run measured with one set says so (app.engine.llama_switches)."""

from __future__ import annotations

import re

from app.engine.llama_switches import SWITCHES
from kernels import patch_set
from tests.kernels.candidates import LOG, ROOT


def _read_by(text: str) -> set[str]:
    """The names an added line passes to getenv."""
    return {
        name
        for line in text.splitlines()
        if line.startswith("+")
        for name in re.findall(r'getenv\("([A-Z0-9_]+)"\)', line)
    }


def _last_sections_candidates() -> list[str]:
    log = (ROOT / "docs" / "kernel-log.md").read_text()
    last = log[log.rindex("\n### ") :]
    return sorted(set(re.findall(r"docs/kernel-log/([\w.-]+\.patch\.txt)", last)))


def test_the_switches_our_kernels_read_are_recorded() -> None:
    candidates = _last_sections_candidates()
    assert "2026-12-05-run34-scale-fwht.patch.txt" in candidates
    read: set[str] = set()
    for path in [*patch_set.patch_files(), *(LOG / name for name in candidates)]:
        read |= _read_by(path.read_text())
    assert {"KVSTUDIO_FA_Q8_0_K_IN_PLACE", "KVSTUDIO_FUSE_ROTATION"} <= read
    assert read <= set(SWITCHES), sorted(read - set(SWITCHES))
