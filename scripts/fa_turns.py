"""A Markdown table from test-backend-ops perf lines timed in turns on the GPU machine.

    python scripts/fa_turns.py FILE [FILE ...] [--base LABEL]

Each line of the FILEs (scripts/fa_prompt_run.sh's perfk-N.txt and perfv-V.txt, or the raw files
under docs/kernel-log/) is a label (a build such as 6, or a variant such as 16) and then
test-backend-ops' FLASH_ATTN_EXT(...) line; lines starting with "#" are notes. Printed, one row
per case and label: the times in the order timed, their median, the median against the base
label's (the first label seen unless --base names one), and against f16/f16 of the same label.
Turns are what make a ratio worth reading on a noisy machine (docs/kernel-log.md, METHOD), so a
label's times are all listed, not only the median.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

_FIELD = re.compile(r"(\w+)=(\[[^\]]*\]|[^,)]+)")
_TIME = re.compile(r"([\d.]+) us/run")

# head size, Q heads per KV head, cells, tokens, K/V
Case = tuple[int, int, int, int, str]


def read_turns(paths: list[Path]) -> tuple[dict[tuple[Case, str], list[float]], list[str]]:
    """Times per (case, label) in file order, and the labels in the order first seen. Cases with
    a logit softcap are left out: the tables compare the plain decode and prompt kernels."""
    times: dict[tuple[Case, str], list[float]] = defaultdict(list)
    labels: list[str] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip() or line.startswith("#") or "FLASH_ATTN_EXT(" not in line:
                continue
            label = line.split()[0]
            field = dict(_FIELD.findall(line))
            if float(field.get("logit_softcap", 0)) != 0:
                continue
            case = (
                int(field["hsk"]),
                int(field["nr23"].strip("[]").split(",")[0]),
                int(field["kv"]),
                int(field["nb"]),
                f"{field['type_K']}/{field['type_V']}",
            )
            match = _TIME.search(line)
            if match is None:
                raise SystemExit(f"{path}: a line without a time: {line[:80]}")
            times[case, label].append(float(match.group(1)))
            if label not in labels:
                labels.append(label)
    return times, labels


def table(times: dict[tuple[Case, str], list[float]], labels: list[str], base: str) -> str:
    rows = [
        "| head, Q heads a KV head | cells | tokens | K/V | label | us a call (turns) | median "
        f"| vs {base} | vs f16/f16 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case in sorted({case for case, _ in times}):
        head, heads, cells, tokens, kv = case
        f16 = (head, heads, cells, tokens, "f16/f16")
        for label in labels:
            if (case, label) not in times:
                continue
            median = statistics.median(times[case, label])
            against_base = (
                f"{median / statistics.median(times[case, base]):.3f}"
                if (case, base) in times and label != base
                else ""
            )
            against_f16 = (
                f"{median / statistics.median(times[f16, label]):.2f}"
                if (f16, label) in times and kv != "f16/f16"
                else ""
            )
            listed = ", ".join(f"{t:g}" for t in times[case, label])
            rows.append(
                f"| {head}, {heads} | {cells:,} | {tokens} | {kv} | {label} | {listed} "
                f"| {median:g} | {against_base} | {against_f16} |"
            )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--base", help="the label the others are compared with")
    args = parser.parse_args(argv)
    times, labels = read_turns(args.files)
    if not labels:
        print("No FLASH_ATTN_EXT lines in those files.", file=sys.stderr)
        return 2
    base = args.base or labels[0]
    if base not in labels:
        print(f"No label {base} in those files (they hold {', '.join(labels)}).", file=sys.stderr)
        return 2
    print(table(times, labels, base))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
