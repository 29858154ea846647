"""docs/kernel-log.md, section J: the two tables of run 28 are what its raw files say
(test-backend-ops perf of fa.6 against the candidate in turns, the f16 kernels timed in turns and
profiled by Nsight Compute), and the section's conclusions follow from them."""

from __future__ import annotations

import re
import statistics

from tests.kernels.kernel_log_tables import RAW, ncu_rows, numbers, perf_times, section, table

Case = tuple[int, str]  # cells, K/V


def _times(name: str) -> dict[tuple[Case, str], list[float]]:
    """us a call per (case, build or variant), in the file's order; every case is one token of
    128-wide heads, 4 Q heads per KV head."""
    times = perf_times(name)
    by_case = {((cells, kv), label): t for ((_, _, cells, _, kv), label), t in times.items()}
    assert len(by_case) == len(times)  # no two shapes folded into one case
    return by_case


def _section() -> str:
    return section("J")


def _table(header: str) -> list[list[str]]:
    return table(_section(), header)


def _median(times: dict[tuple[Case, str], list[float]], case: Case, build: str) -> float:
    return statistics.median(times[case, build])


def test_the_candidate_table_is_the_raw_file() -> None:
    times = _times("2026-12-04-run28-perf.txt")
    rows = _table("| cells | K/V | fa.6 | candidate |")
    assert len(rows) == 6
    for cells, kv, fa6, cand, ratio, fa6_f16, cand_f16 in rows:
        case = (int(cells.replace(",", "")), kv)
        f16 = (case[0], "f16/f16")
        assert numbers(fa6) == times[case, "6"], case
        assert numbers(cand) == times[case, "7"], case
        assert float(ratio) == round(_median(times, case, "7") / _median(times, case, "6"), 3), case
        assert float(fa6_f16) == round(_median(times, case, "6") / _median(times, f16, "6"), 2), (
            case
        )
        assert float(cand_f16) == round(_median(times, case, "7") / _median(times, f16, "7"), 2), (
            case
        )


def test_the_candidate_is_not_worth_shipping_and_v_does_not_limit_at_32k() -> None:
    """The section's verdict: at most 2.3% anywhere, nothing at 32k, and at 32k fa.6 takes the same
    time with an f16 V (twice V's bytes) as with a q8_0 V."""
    times = _times("2026-12-04-run28-perf.txt")
    gains = {case: _median(times, case, "7") / _median(times, case, "6") for case, _ in times}
    assert min(gains.values()) > 0.97
    assert gains[32768, "q8_0/q8_0"] > 0.995
    fa6_32k = [_median(times, (32768, kv), "6") for kv in ("q8_0/f16", "q8_0/q8_0")]
    assert abs(fa6_32k[0] / fa6_32k[1] - 1) < 0.01


def _ncu(variant: str, metric: str) -> list[float]:
    return [
        row.number()
        for row in ncu_rows("2026-12-04-run28-f16-ncu.csv")
        if row.variant == variant and row.metric == metric
    ]


def test_the_f16_table_is_the_raw_files() -> None:
    times = _times("2026-12-04-run28-f16-perf.txt")
    rows = {row[0]: row[1:] for row in _table("| f16/f16, 128-wide |")}
    for column, variant in enumerate(("0", "16")):
        assert (
            numbers(rows["us a call, 32,768 cells (turns)"][column])
            == times[(32768, "f16/f16"), variant]
        )
        assert (
            numbers(rows["us a call, 131,072 cells (turns)"][column])
            == times[(131072, "f16/f16"), variant]
        )
        ncu_us = [round(ns / 1000, 1) for ns in _ncu(variant, "gpu__time_duration.sum")]
        assert numbers(rows["Nsight time, 32,768 cells"][column]) == ncu_us
        for label, metric, scale, digits in (
            ("DRAM read", "dram__bytes_read.sum", 1e6, 1),
            ("L2 bytes", "lts__t_bytes.sum", 1e6, 0),
            ("warps active (% of peak)", "sm__warps_active.avg.pct_of_peak_sustained_active", 1, 1),
            (
                "DRAM throughput (% of peak)",
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                1,
                1,
            ),
        ):
            value = round(statistics.mean(_ncu(variant, metric)) / scale, digits)
            assert numbers(rows[label][column]) == [value], (label, variant)
        for label, metric in (
            ("L1 sectors, global loads", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
            ("instructions executed", "sm__inst_executed.sum"),
        ):
            assert numbers(rows[label][column]) == _ncu(variant, metric)[:1], label
        grid, registers, blocks = numbers(
            rows["grid, registers, blocks a SM (register limit)"][column]
        )
        assert grid == _ncu(variant, "launch__grid_size")[0]
        assert registers == _ncu(variant, "launch__registers_per_thread")[0]
        assert blocks == _ncu(variant, "launch__occupancy_limit_registers")[0]


def test_the_packed_f16_kernel_is_slower_with_fewer_bytes_and_fewer_warps() -> None:
    """The section's answer to item 3: slower in every turn, though it moves fewer L2 bytes and runs
    fewer instructions, with fewer warps a SM and about as many instructions a warp."""
    times = _times("2026-12-04-run28-f16-perf.txt")
    for cells in (32768, 131072):
        assert min(times[(cells, "f16/f16"), "16"]) > 1.3 * max(times[(cells, "f16/f16"), "0"])
    assert _ncu("16", "lts__t_bytes.sum")[0] < _ncu("0", "lts__t_bytes.sum")[0] / 2.5
    assert _ncu("16", "sm__warps_active.avg.pct_of_peak_sustained_active")[0] < 13
    per_warp = {
        v: _ncu(v, "sm__inst_executed.sum")[0] / (_ncu(v, "launch__grid_size")[0] * 4)
        for v in ("0", "16")
    }
    assert abs(per_warp["16"] / per_warp["0"] - 1) < 0.03


def _load_groups(kernel: str) -> list[int]:
    text = (RAW / "2026-12-04-run28-f16-load-groups.txt").read_text()
    line = re.search(rf"{kernel}: load groups ([\d ]+)", text)
    assert line is not None
    return [int(n) for n in line.group(1).split()]


def test_the_load_groups_are_what_the_section_says() -> None:
    """One head: K and V loads issued 16 at a time (three groups of 16); four heads: after Q's 17,
    one or two at a time, none more than 6; and the registers are the H200 build's."""
    one, four = _load_groups("heads a block 1"), _load_groups("heads a block 4")
    assert one.count(16) == 3
    assert four[0] == 17 and max(four[1:]) == 6 and four[1:].count(1) + four[1:].count(2) >= 30
    section = " ".join(_section().split())
    assert "(groups of 16, 16 and 16)" in section and "(no group larger than 6)" in section
    registers = re.findall(r"(\S+) REG:(\d+)", (RAW / "2026-12-04-run28-registers.txt").read_text())
    f16_heads = {
        name.split("ILi128ELi1ELi")[1][0]: int(n)
        for name, n in registers
        if "type1ELS0_1ELb0E" in name
    }
    assert f16_heads == {"1": 167, "4": 243}
    header = (RAW / "2026-12-04-run28-f16-load-groups.txt").read_text().splitlines()[0]
    assert "registers here 167 with one head a block and 243 with 4" in header


def test_the_q8_0_kernel_issues_its_loads_together() -> None:
    """Why the f16 answer does not carry over: fa.6's K=V=q8_0 4-head kernel sends K's loads (36)
    and V's (63) out in groups before using them."""
    groups = _load_groups("K=V=q8_0 fa.6 4 heads")
    assert groups[1:3] == [36, 63]
    section = " ".join(_section().split())
    assert "(a group of 36, with 0006's 20 eight-byte loads)" in section
    assert "V loads together (63)" in section
    text = (RAW / "2026-12-04-run28-f16-load-groups.txt").read_text()
    assert "LD.E.64 20," in text
