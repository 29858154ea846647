"""What the kernel-log tests read: a section's Markdown tables in docs/kernel-log.md, the numbers
in their cells, and the raw perf files they come from, parsed by the very script the write-ups
are made with (scripts/fa_turns.py), so there is one reader of test-backend-ops' lines."""

from __future__ import annotations

import csv
import importlib.util
import io
import lzma
import re
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "docs" / "kernel-log"
LOG = ROOT / "docs" / "kernel-log.md"


@cache
def _fa_turns() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fa_turns", ROOT / "scripts" / "fa_turns.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def perf_times(name: str) -> dict[tuple[tuple[int, int, int, int, str], str], list[float]]:
    """us a call per ((head size, Q heads per KV head, cells, tokens, K/V), label) of the raw file
    `name`, in the order timed; cases with a logit softcap left out."""
    times, _ = _fa_turns().read_turns([RAW / name])
    return times


def section(letter: str) -> str:
    return LOG.read_text().split(f"### {letter}. ")[1].split("\n### ")[0]


def table(text: str, header: str) -> list[list[str]]:
    """The cells of the table in `text` whose header row starts with `header`."""
    rows = text.split(header)[1].split("\n\n")[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in rows.splitlines()[2:]
        if line.startswith("|")
    ]


def numbers(cell: str) -> list[float]:
    """The numbers in a table cell; "17,350,656" is one number, "384, 167, 3" three."""
    return [float(n.replace(",", "")) for n in re.findall(r"\d+(?:,\d{3})*(?:\.\d+)?", cell)]


@dataclass(frozen=True)
class NcuRow:
    """One row of the Nsight Compute CSV that scripts/fa_prompt_run.sh's `ncuv` writes: the
    variant it put first, then ncu's own columns (kernel, metric, value, and, with NCU_SECTIONS,
    the rules' descriptions after them)."""

    variant: str
    kernel: str
    metric: str
    value: str
    rules: tuple[str, ...]

    def number(self) -> float:
        return float(self.value.replace(",", ""))


def ncu_rows(name: str) -> list[NcuRow]:
    """The metric rows of the raw file `name` (plain or .xz), header rows left out."""
    data = (RAW / name).read_bytes()
    text = (lzma.decompress(data) if name.endswith(".xz") else data).decode()
    return [
        NcuRow(row[0], row[5], row[13], row[15], tuple(row[16:]))
        for row in csv.reader(io.StringIO(text))
        if len(row) > 15 and row[1] != "ID"
    ]


def ncu_medians(name: str) -> dict[tuple[str, str], float]:
    """Median per (kernel instance, its name up to the arguments; metric) of one ncuv file."""
    values: dict[tuple[str, str], list[float]] = {}
    for row in ncu_rows(name):
        kernel = row.kernel.split("(")[0].removeprefix("void ")
        values.setdefault((kernel, row.metric), []).append(row.number())
    return {key: statistics.median(v) for key, v in values.items()}
