"""docs/kernel-log.md, section K: the tables of runs 29 and 30 are what their raw files say
(test-backend-ops perf in turns, Nsight Compute's warp-state sections, the correctness runs), and
the section's conclusions (where the long-KV kernel pays, that the prefetch candidate does not
make the in-place prompt path the default) follow from them."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from kernels import patch_set
from kernels.isa_proof import DEFAULT_TARGETS
from kernels.patch_set import PATCH_DIR
from tests.kernels.kernel_log_tables import (
    RAW,
    ncu_rows,
    numbers,
    perf_times,
    section,
    table,
)

Case = tuple[int, int, str]  # cells, tokens, K/V


def _medians(name: str) -> dict[tuple[Case, str], float]:
    """Median us a call per ((cells, tokens, K/V), label); every case has 128-wide heads, 4 Q
    heads per KV head."""
    times = perf_times(name)
    medians = {
        ((cells, tokens, kv), label): statistics.median(t)
        for ((_, _, cells, tokens, kv), label), t in times.items()
    }
    assert len(medians) == len(times)  # no two shapes folded into one case
    return medians


def _table(header: str) -> list[list[str]]:
    return table(section("K"), header)


def _cells(text: str) -> int:
    return int(text.replace(",", ""))


def _shown(median: float) -> float:
    """A median as scripts/fa_turns.py prints it (six significant digits), the tables' source."""
    return float(f"{median:g}")


def _check_pair_table(
    rows: list[list[str]],
    medians: dict[tuple[Case, str], float],
    labels: dict[int, tuple[str, str]],
) -> None:
    """Rows of cells | K/V | A | B | B / A | A / f16 | B / f16, A and B the labels per depth."""
    for cells, kv, a, b, b_a, a_f16, b_f16 in rows:
        depth = _cells(cells)
        label_a, label_b = labels[depth]
        ma, mb = medians[(depth, 1, kv), label_a], medians[(depth, 1, kv), label_b]
        fa = medians[(depth, 1, "f16/f16"), label_a]
        fb = medians[(depth, 1, "f16/f16"), label_b]
        assert float(a) == _shown(ma), (cells, kv)
        assert float(b) == _shown(mb), (cells, kv)
        assert float(b_a) == round(mb / ma, 3), (cells, kv)
        assert float(a_f16) == round(ma / fa, 2), (cells, kv)
        assert float(b_f16) == round(mb / fb, 2), (cells, kv)


def test_run_29_variant_table_is_the_raw_file() -> None:
    medians = _medians("2026-12-04-run29-perf.txt")
    rows = _table("| cells | K/V | variant 0 (fa.6) | variant 3 |")
    assert len(rows) == 6
    _check_pair_table(rows, medians, {d: ("0", "3") for d in (32768, 65536, 131072)})


def test_run_30_threshold_table_is_the_raw_file() -> None:
    medians = _medians("2026-12-04-run30-perf.txt")
    rows = _table("| cells | K/V | off (fa.6) | on |")
    assert len(rows) == 8
    labels = {d: ("6-off", "6-on") for d in (32768, 65536, 131072)}
    labels[49152] = ("6-off48", "6-on48")
    _check_pair_table(rows, medians, labels)


def test_the_long_kv_kernel_pays_from_49152_cells_and_not_at_32768() -> None:
    """The threshold the section proposes for patch 0007: faster for both pairs at every depth
    from 49,152 on, slower for q8_0/q8_0 at 32,768; below the candidate's threshold its dispatch
    runs fa.6's kernel (the same time within 1%)."""
    run29 = _medians("2026-12-04-run29-perf.txt")
    run30 = _medians("2026-12-04-run30-perf.txt")
    assert run29[(32768, 1, "q8_0/q8_0"), "3"] > 1.02 * run29[(32768, 1, "q8_0/q8_0"), "0"]
    for kv in ("q8_0/f16", "q8_0/q8_0"):
        assert run30[(49152, 1, kv), "6-on48"] < 0.96 * run30[(49152, 1, kv), "6-off48"]
        for depth in (65536, 131072):
            assert run30[(depth, 1, kv), "6-on"] < 0.97 * run30[(depth, 1, kv), "6-off"]
            assert run29[(depth, 1, kv), "3"] < 0.96 * run29[(depth, 1, kv), "0"]
        for depth in (32768, 49152):
            ratio = run30[(depth, 1, kv), "6-on"] / run30[(depth, 1, kv), "6-off"]
            assert abs(ratio - 1) < 0.01, (depth, kv)
        # From 65,536 on, run 30's `on` is run 29's variant 3 again, within 1.2%.
        for depth in (65536, 131072):
            again = run30[(depth, 1, kv), "6-on"] / run29[(depth, 1, kv), "3"]
            assert abs(again - 1) < 0.012, (depth, kv)
    assert "reproduces run 29's variant 3 within 1.2%" in section("K")


def test_the_long_kv_kernel_is_correct_and_its_one_new_failure_is_fa6s_too() -> None:
    run29 = (RAW / "2026-12-04-run29-v3-eval.txt").read_text()
    assert "2268/2274 tests passed" in run29
    run30 = (RAW / "2026-12-04-run30-eval.txt").read_text()
    assert "2269/2276 tests passed" in run30
    failing = re.findall(r"ERR = ([\d.]+) > [\d.]+ +FLASH_ATTN_EXT\((.*?)\): FAIL", run30)
    new = [(err, case) for err, case in failing if "kv=65536" in case]
    # The whole run's failure, then the case alone with fa.6's kernel and with the long-KV one.
    assert len(new) == 3 and all("type_K=q8_0,type_V=f16" in case for _, case in new)
    assert len({case for _, case in new}) == 1
    fa6, long_kv = float(new[1][0]), float(new[2][0])
    assert round(fa6, 5) == 0.00133 and round(long_kv, 5) == 0.00134
    older = [case for _, case in failing if "kv=65536" not in case]
    assert len(older) == 6 and all("kv=32768" in case for case in older)


def _ncu(cells: int) -> dict[tuple[str, str], dict[str, float]]:
    """Medians per (variant, K/V) of the metrics the section's table shows."""
    metric = {
        "gpu__time_duration.sum": "ns",
        "launch__registers_per_thread": "registers",
        "launch__grid_size": "grid",
        "Active Warps Per Scheduler": "active",
        "Eligible Warps Per Scheduler": "eligible",
        "Issued Warp Per Scheduler": "issued",
        "sm__inst_executed.sum": "instructions",
    }
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in ncu_rows(f"2026-12-04-run29-ncu-{cells}.csv.xz"):
        kernel = re.search(r"flash_attn_ext_vec<128, 1, 4, 8, (\d), 0", row.kernel)
        if not kernel:
            continue
        key = (row.variant, {"8": "q8_0/q8_0", "1": "q8_0/f16"}[kernel.group(1)])
        got = values.setdefault(key, {})
        if row.metric in metric:
            got.setdefault(metric[row.metric], []).append(row.number())
        for cell in row.rules:
            stall = re.search(
                r"spends ([\d.]+) cycles being stalled waiting for a scoreboard dependency on a "
                r"L1TEX.*?total average of ([\d.]+) cycles",
                cell,
            )
            if stall:
                got.setdefault("l1tex", []).append(float(stall.group(1)))
                got.setdefault("between", []).append(float(stall.group(2)))
    return {key: {m: statistics.median(v) for m, v in got.items()} for key, got in values.items()}


def test_the_stall_table_is_nsights_files() -> None:
    rows = _table("| cells | K/V | variant | us | registers | grid |")
    assert len(rows) == 8
    ncu = {cells: _ncu(cells) for cells in (32768, 131072)}
    for cells, kv, variant, us, registers, grid, warps, between, l1tex in rows:
        got = ncu[_cells(cells)][variant, kv]
        assert float(us) == round(got["ns"] / 1000, 2), (cells, kv, variant)
        assert numbers(registers + " " + grid) == [got["registers"], got["grid"]]
        active, eligible, issued = numbers(warps)
        assert (active, eligible, issued) == tuple(
            round(got[m], 2) for m in ("active", "eligible", "issued")
        )
        assert float(between) == round(got["between"], 1)
        assert float(l1tex) == round(got["l1tex"], 2)
    # More instructions with the third block's kernel, by the percentages the text gives.
    more = {
        (depth, kv): round(
            100 * (ncu[depth]["3", kv]["instructions"] / ncu[depth]["0", kv]["instructions"] - 1), 1
        )
        for depth in (32768, 131072)
        for kv in ("q8_0/f16", "q8_0/q8_0")
    }
    assert more == {
        (32768, "q8_0/q8_0"): 9.8,
        (131072, "q8_0/q8_0"): 9.1,
        (32768, "q8_0/f16"): 4.0,
        (131072, "q8_0/f16"): 2.8,
    }
    assert "q8_0/q8_0 +9.8% at 32,768 cells and +9.1% at 131,072, q8_0/f16 +4.0% and +2.8%" in (
        " ".join(section("K").split())
    )
    # The reading: a third block raises warps and issue rate; each warp waits longer on loads.
    for depth in (32768, 131072):
        for kv in ("q8_0/f16", "q8_0/q8_0"):
            fa6, third = ncu[depth]["0", kv], ncu[depth]["3", kv]
            assert third["active"] > 1.4 * fa6["active"] and third["issued"] > 1.15 * fa6["issued"]
            assert third["l1tex"] > fa6["l1tex"]


def test_the_prefetch_candidate_leaves_the_in_place_path_slower_than_the_copy() -> None:
    medians = _medians("2026-12-04-run29-mma-perf.txt")
    rows = _table("| cells | K/V | fa.6 in place | candidate in place |")
    assert len(rows) == 4
    for cells, kv, fa6, cand, ratio, copy, f16 in rows:
        case = (_cells(cells), 512, kv)
        f16_case = (_cells(cells), 512, "f16/f16")
        assert float(fa6) == _shown(medians[case, "6"])
        assert float(cand) == _shown(medians[case, "7"])
        assert float(ratio) == round(medians[case, "7"] / medians[case, "6"], 3)
        assert float(copy) == _shown(medians[case, "6-copy"])
        assert float(f16) == _shown(medians[f16_case, "6"])
        # Faster than fa.6 in place, yet slower than the f16 copy and than f16/f16.
        assert medians[case, "7"] < 0.96 * medians[case, "6"]
        assert medians[case, "7"] > 1.1 * medians[case, "6-copy"] > medians[f16_case, "6"]
    assert "2268/2274 tests passed" in (RAW / "2026-12-04-run29-mma-eval.txt").read_text()


def _added_lines(path: Path) -> list[str]:
    """The new side of every hunk, as the patch set's own parser (which the device script's XPATCH
    applies with) reads the file."""
    patch = patch_set.parse(path.read_text(), path.stem)
    return [line for f in patch.files for hunk in f.hunks for line in hunk.new]


def test_patch_0007_is_the_measured_kernel_with_the_lower_threshold() -> None:
    """Patch 0007 is run 30's candidate with the threshold at 49,152 (section K): the code it adds
    is the candidate's line for line, but for the threshold and the comment citing the runs."""
    measured = _added_lines(RAW / "2026-12-04-run30-vec-long-kv.patch.txt")
    ready = _added_lines(PATCH_DIR / "0007-fattn-vec-long-kv-3-blocks.patch")

    def code(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.lstrip().startswith("//")]

    differing = [(a, b) for a, b in zip(code(measured), code(ready), strict=True) if a != b]
    assert differing == [
        (
            "        return value != nullptr ? (int64_t) atoll(value) : (int64_t) 65536;",
            "        return value != nullptr ? (int64_t) atoll(value) : (int64_t) 49152;",
        )
    ]


def test_the_probes_machine_code_is_what_the_section_says() -> None:
    """K's counts of the int8 probe's instructions per tile, from the recorded local compile."""
    counts = {
        (mode, op): int(n)
        for mode, op, n in (
            line.split()
            for line in (RAW / "2026-12-04-qk-probe-sass.txt").read_text().splitlines()
            if line.startswith("mode")
        )
    }
    text = " ".join(section("K").split())
    f16, i8, row = "mode0", "mode1", "mode2"
    assert counts[f16, "HMMA.16816.F32"] == 64 and counts[f16, "LDS"] == 128
    assert "64 `HMMA` and 128 shared loads" in text
    assert counts[i8, "IMMA.16832.S8.S8"] == 32
    assert counts[i8, "LDS"] + counts[i8, "LDS.64"] == 96
    assert all(counts[i8, op] == 128 for op in ("I2FP.F32.S32", "FMUL", "FFMA"))
    assert (
        "32 `IMMA`, 96 shared loads, and the scaling's 128 `I2FP`, 128 `FMUL`, 128 `FFMA`" in text
    )
    assert counts[i8, "FMUL"] - counts[row, "FMUL"] == 96 and "(96 `FMUL` fewer)" in text


def test_0007_leaves_the_radeon_kernels_as_they_are() -> None:
    """K says 0007 changes no HIP code: its recorded HIP compile has fa.6's 1,200 v_dot4_i32_iu8
    per q8_0-K pair on every RDNA3 target the rocm-rdna3 package ships."""
    rows = [
        line.split()
        for line in (RAW / "2026-12-04-0007-hip-check.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    targets = {target for _, target, _ in rows}
    assert targets == set(DEFAULT_TARGETS)  # the rocm-rdna3 variant's targets
    assert {pair for pair, _, _ in rows} == {"q8_0-f16", "q8_0-q8_0"} and len(rows) == 10
    assert {int(n) for _, _, n in rows} == {1200}
    assert "with 1,200 `v_dot4_i32_iu8` each, as fa.6" in " ".join(section("K").split())
