"""docs/kernel-log.md, section I: the fa.5-against-fa.6 table and the README's ratio are what the
raw file of run 27 (test-backend-ops perf on the H200, both builds timed in turns) says: every
time listed, each build's median ratio, and each q8_0-K time against f16's of the same build."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "docs" / "kernel-log" / "2026-12-04-run27-perf.txt"
LOG = ROOT / "docs" / "kernel-log.md"
README = ROOT / "README.md"

Case = tuple[int, int, int, str]  # head size, Q heads per KV head, cells, K/V


def _raw_times() -> dict[tuple[Case, str], list[float]]:
    times: dict[tuple[Case, str], list[float]] = defaultdict(list)
    for line in RAW.read_text().splitlines():
        if line.startswith("#"):
            continue
        build = line.split()[0]
        field = dict(re.findall(r"(\w+)=(\[[^\]]*\]|[^,)]+)", line))
        if float(field["logit_softcap"]) != 0:
            continue
        case = (
            int(field["hsk"]),
            int(field["nr23"].strip("[]").split(",")[0]),
            int(field["kv"]),
            f"{field['type_K']}/{field['type_V']}",
        )
        times[case, build].append(float(re.search(r"([\d.]+) us/run", line).group(1)))
    return times


def _fa6_over_fa5(times: dict[tuple[Case, str], list[float]], case: Case) -> float:
    return statistics.median(times[case, "6"]) / statistics.median(times[case, "5"])


def _table_rows() -> list[list[str]]:
    section = LOG.read_text().split("### I. ")[1].split("\n### ")[0]
    table = section.split("| head, Q heads per KV head |")[1].split("\n\n")[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()[2:]
        if line.startswith("|")
    ]


def _numbers(cell: str) -> list[float]:
    return [float(n) for n in re.findall(r"[\d.]+", cell.replace("*", ""))]


def test_every_row_is_the_raw_file() -> None:
    times = _raw_times()
    rows = _table_rows()
    assert len(rows) == 15
    for head, cells, kv, fa5, fa6, ratio, vs_f16 in rows:
        size, heads = (int(n) for n in head.split(", "))
        case = (size, heads, int(cells.replace(",", "")), kv)
        assert sorted(_numbers(fa5)) == sorted(times[case, "5"]), case
        assert sorted(_numbers(fa6)) == sorted(times[case, "6"]), case
        assert _numbers(ratio) == [round(_fa6_over_fa5(times, case), 3)], case
        if vs_f16:
            f16 = statistics.median(times[(*case[:3], "f16/f16"), "6"])
            assert _numbers(vs_f16) == [round(statistics.median(times[case, "6"]) / f16, 2)], case


def test_every_q8_0_k_case_is_faster_and_f16_unchanged() -> None:
    """What the section and the README conclude from the table."""
    times = _raw_times()
    for case in {case for case, _ in times}:
        ratio = _fa6_over_fa5(times, case)
        if case[3].startswith("q8_0"):
            assert ratio < 0.99, case
        else:
            assert abs(ratio - 1) < 0.005, case


def test_the_readme_ratio_at_131072_cells() -> None:
    times = _raw_times()
    case = (128, 4, 131072, "q8_0/q8_0")
    ratio = _fa6_over_fa5(times, case)
    assert f"takes {ratio:.2f}x fa.5's time with K=V=q8_0" in " ".join(README.read_text().split())
