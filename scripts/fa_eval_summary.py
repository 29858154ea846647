"""Counts of a `test-backend-ops test -o FLASH_ATTN_EXT` run, for docs/kernel-log.md.

    python scripts/fa_eval_summary.py EVAL_LOG

Reads test-backend-ops' own output (one line per case, colour codes and all) and prints how many
cases passed, failed or were not supported, per K/V pair, head size and batch (1 and 2 tokens
take the vector kernel on the H200, more the prompt kernels), then every failing case and
test-backend-ops' own summary lines. Run by scripts/fa_kernel_tune.sh on the device machine.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CASE = re.compile(r"FLASH_ATTN_EXT\((?P<vars>[^)]*)\): (?P<rest>.*)$")


def status(rest: str) -> str:
    if rest.startswith("not supported"):
        return "not supported"
    if rest.startswith("skipping"):
        return "skipped"
    if rest.endswith("OK"):
        return "OK"
    return "FAIL" if "FAIL" in rest else "?"


def fields(text: str) -> dict[str, str]:
    # "nr23=[4,1]" and "permute=[0,1,2,3]" hold commas: split only before "name=".
    return dict(part.split("=", 1) for part in re.split(r",(?=\w+=)", text))


def packed(case: dict[str, str]) -> bool:
    """Does this case run on a kernel of patches 0003/0004 (Q heads sharing a block)? One token,
    a quantized K, no ALiBi, a KV length the vector kernel takes, and a GQA ratio that is a
    multiple of the heads per block (2 for 256-wide heads, else 4)."""
    ratio = int(case["nr23"].strip("[]").split(",")[0])
    heads = 2 if case["hsk"] == "256" else 4
    quantized = case["type_K"] not in ("f16", "bf16", "f32")
    return (
        case["nb"] == "1"
        and quantized
        and case["hsk"] == case["hsv"]
        and case["hsk"] in ("64", "128", "256")
        and float(case["max_bias"]) == 0.0
        and int(case["kv"]) % 256 == 0
        and ratio % heads == 0
    )


def batch(nb: str) -> str:
    return nb if int(nb) <= 2 else ">2"


def summarize(log: str) -> list[str]:
    counts: Counter[tuple[str, str, str, str]] = Counter()
    on_packed: Counter[str] = Counter()
    failures, summary = [], []
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        match = _CASE.search(line)
        if match is None:
            if "tests passed" in line or "Backend CUDA0" in line:
                summary.append(line.strip())
            continue
        case, result = fields(match["vars"]), status(match["rest"])
        pair = f"{case['type_K']}/{case['type_V']}"
        counts[(pair, case["hsk"], batch(case["nb"]), result)] += 1
        if packed(case):
            on_packed[f"{result} (head size {case['hsk']})"] += 1
        if result in ("FAIL", "?"):
            failures.append(line.strip())
    keys = sorted({k[:3] for k in counts}, key=lambda k: (k[0], int(k[1]), k[2]))
    out = ["| K/V | head size | tokens | OK | FAIL | not supported |", "|---|---|---|---|---|---|"]
    for key in keys:
        row = [counts[(*key, s)] for s in ("OK", "FAIL", "not supported")]
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(map(str, row)) + " |")
    totals: Counter[str] = Counter()
    for (_, _, _, result), n in counts.items():
        totals[result] += n
    out.append("cases: " + ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
    out.append(
        "one-token cases on the heads-per-block kernels: "
        + (", ".join(f"{n} {s}" for s, n in sorted(on_packed.items())) or "none")
    )
    out += [f"FAILED: {line}" for line in failures[:60]]
    return out + summary


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    text = Path(argv[0]).read_text(errors="replace")
    print("\n".join(summarize(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
