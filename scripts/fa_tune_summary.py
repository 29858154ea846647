"""Tables for docs/kernel-log.md from what scripts/fa_kernel_tune.sh brought back.

    python scripts/fa_tune_summary.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds a run's perf.txt (test-backend-ops perf lines under "== variant ..." headers;
"== split ..." in runs 1-6) and ncu.csv (Nsight Compute, one row per kernel and metric, the
variant first). Prints two Markdown tables: decode time per depth and K/V pair for each variant
(with the ratio to f16/f16 measured in the same build), and the kernels' Nsight Compute medians
at depth 32,768.
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

_PERF = re.compile(
    r"FLASH_ATTN_EXT\(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(\d+),nb=(\d+),.*?"
    r"type_K=(\w+),type_V=(\w+),.*?(\d+\.\d+) us/run"
)
# Since patch 0003 the template has the heads per block after the tokens: <128, 1, 4, 8, 1, 0>.
_KERNEL = re.compile(r"flash_attn_ext_vec<128, 1, (?:\d+, )?(\d+), (\d+), 0>")
_SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
_TYPE = {"1": "f16", "8": "q8_0"}
PAIRS = ("f16/f16", "q8_0/f16", "q8_0/q8_0")


def perf_times(run: Path) -> dict[str, dict[tuple[int, int, str], float]]:
    """variant -> (depth, batch, pair) -> microseconds (the first line of each, our own cases)."""
    times: dict[str, dict[tuple[int, int, str], float]] = defaultdict(dict)
    variant = "?"
    for line in (run / "perf.txt").read_text().splitlines():
        if line.startswith(("== split ", "== variant ")):
            variant = line.split(" ", 2)[2].strip()
            continue
        match = _PERF.search(line)
        if match:
            kv, nb, k, v, us = match.groups()
            times[variant].setdefault((int(kv), int(nb), f"{k}/{v}"), float(us))
    return times


def ncu_medians(run: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(variant, pair) -> metric -> median over the profiled launches."""
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in (run / "ncu.csv").read_text().splitlines():
        variant, _, rest = line.partition(",")
        row = next(csv.reader([rest]))
        if row[0] == "ID":
            continue
        kernel = _KERNEL.search(row[4])
        if kernel is None:
            continue
        pair = f"{_TYPE[kernel.group(1)]}/{_TYPE[kernel.group(2)]}"
        scale = _SCALE.get(row[13], 1)  # Nsight Compute may scale byte counts
        values[(variant, pair)][row[12]].append(float(row[14].replace(",", "")) * scale)
    return {key: {m: statistics.median(v) for m, v in ms.items()} for key, ms in values.items()}


def _cell(metrics: dict[str, float], name: str, unit: float) -> str:
    """One value, or "-" for runs before the metric was read."""
    return f"{metrics[name] / unit:.1f}" if name in metrics else "-"


def main(argv: list[str]) -> int:
    runs = [Path(a) for a in argv] or [Path("out")]
    print("| variant | depth | f16/f16 us | q8_0/f16 us (x f16) | q8_0/q8_0 us (x f16) |")
    print("|---|---|---|---|---|")
    for run in runs:
        for variant, times in perf_times(run).items():
            for depth in sorted({d for d, nb, _ in times if nb == 1}):
                f16 = times.get((depth, 1, "f16/f16"))
                cells = []
                for pair in PAIRS[1:]:
                    us = times.get((depth, 1, pair))
                    cells.append(f"{us:.1f} ({us / f16:.2f})" if us and f16 else "-")
                print(f"| {variant} | {depth:,} | {f16:.1f} | {cells[0]} | {cells[1]} |")
    print()
    print(
        "| variant | K/V | time us | DRAM read MB | % of DRAM peak | L2 MB | % of L2 peak "
        "| grid | registers |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for (variant, pair), m in ncu_medians(run).items():
            print(
                f"| {variant} | {pair} | {m['gpu__time_duration.sum'] / 1000:.1f} | "
                f"{m['dram__bytes_read.sum'] / 1e6:.1f} | "
                f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f} | "
                f"{_cell(m, 'lts__t_bytes.sum', 1e6)} | "
                f"{_cell(m, 'lts__throughput.avg.pct_of_peak_sustained_elapsed', 1)} | "
                f"{m['launch__grid_size']:.0f} | {m['launch__registers_per_thread']:.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
