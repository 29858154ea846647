"""docs/kernel-log.md, section I: the fa.5-against-fa.6 table and the README's ratio are what the
raw file of run 27 (test-backend-ops perf on the H200, both builds timed in turns) says: every
time listed, each build's median ratio, and each q8_0-K time against f16's of the same build."""

from __future__ import annotations

import statistics
from pathlib import Path

from tests.kernels.kernel_log_tables import numbers, perf_times, section, table

README = Path(__file__).resolve().parents[2] / "README.md"

Case = tuple[int, int, int, str]  # head size, Q heads per KV head, cells, K/V


def _raw_times() -> dict[tuple[Case, str], list[float]]:
    """Run 27's times by build; every case is one token."""
    times = perf_times("2026-12-04-run27-perf.txt")
    by_case = {
        ((head, heads, cells, kv), build): t
        for ((head, heads, cells, _, kv), build), t in times.items()
    }
    assert len(by_case) == len(times)  # no two token counts folded into one case
    return by_case


def _fa6_over_fa5(times: dict[tuple[Case, str], list[float]], case: Case) -> float:
    return statistics.median(times[case, "6"]) / statistics.median(times[case, "5"])


def _table_rows() -> list[list[str]]:
    return table(section("I"), "| head, Q heads per KV head |")


def test_every_row_is_the_raw_file() -> None:
    times = _raw_times()
    rows = _table_rows()
    assert len(rows) == 15
    for head, cells, kv, fa5, fa6, ratio, vs_f16 in rows:
        size, heads = (int(n) for n in head.split(", "))
        case = (size, heads, int(cells.replace(",", "")), kv)
        assert sorted(numbers(fa5)) == sorted(times[case, "5"]), case
        assert sorted(numbers(fa6)) == sorted(times[case, "6"]), case
        assert numbers(ratio) == [round(_fa6_over_fa5(times, case), 3)], case
        if vs_f16:
            f16 = statistics.median(times[(*case[:3], "f16/f16"), "6"])
            assert numbers(vs_f16) == [round(statistics.median(times[case, "6"]) / f16, 2)], case


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
