"""scripts/fa_turns.py, the table the next device session's turns are written up with: run as a
user runs it, on a raw file committed from the H200, it gives the ratios docs/kernel-log.md J
states, and bad input gets one sentence and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "fa_turns.py"
RUN28 = ROOT / "docs" / "kernel-log" / "2026-12-04-run28-perf.txt"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def _rows(stdout: str) -> dict[tuple[str, str, str], list[str]]:
    """(cells, K/V, label) -> the row's cells."""
    rows = {}
    for line in stdout.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[1], cells[3], cells[4]] = cells
    return rows


def test_the_run_28_table_gives_section_js_ratios() -> None:
    result = _run(str(RUN28))
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    # Every case of the raw file, once per build: 3 depths x 3 K/V pairs x 2 builds.
    assert len(rows) == 18
    staged = rows["131,072", "q8_0/q8_0", "7"]
    assert staged[5] == "122.99" and staged[7:] == ["0.977", "0.54"]
    fa6 = rows["32,768", "q8_0/q8_0", "6"]
    assert fa6[5] == "38.45, 38.64" and fa6[7:] == ["", "0.62"]
    log = " ".join((ROOT / "docs" / "kernel-log.md").read_text().split())
    assert "| 131,072 | q8_0/q8_0 | 125.81, 125.99 | 122.99 | 0.977 | 0.55 | 0.54 |" in log


def test_another_base_and_bad_input() -> None:
    by_candidate = _rows(_run(str(RUN28), "--base", "7").stdout)
    assert by_candidate["131,072", "q8_0/q8_0", "6"][7] == f"{125.9 / 122.99:.3f}"
    missing = _run(str(RUN28), "--base", "9")
    assert missing.returncode == 2
    assert missing.stderr.strip() == "No label 9 in those files (they hold 6, 7)."
    empty = _run(str(ROOT / "README.md"))
    assert (empty.returncode, empty.stderr.strip()) == (
        2,
        "No FLASH_ATTN_EXT lines in those files.",
    )
