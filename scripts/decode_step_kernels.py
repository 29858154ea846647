"""Every GPU kernel of one decode step, by mode, from scripts/fa_prompt_run.sh's `step:N`
(docs/kernel-log.md, N): where the 8-bit KV modes' extra time a token outside the attention op
goes, kernel by kernel, and how much of a token's wall time the GPU is busy at all.

    python3 scripts/decode_step_kernels.py ncu-step-7-32768.csv step-7-32768.jsonl [PROFILED_STEPS]

The CSV is Nsight Compute's (`--csv --metrics gpu__time_duration.sum`) with the build and the
mode put first on each line, PROFILED_STEPS decodes a mode (default 1, as `step:N` profiles);
the JSON lines are scripts/decode_step_profile.py's timed runs without the profiler, one a mode.
Prints, per mode, the kernels of a step with their GPU time, then each kernel family's us a step
side by side for every mode.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

_DURATION = "gpu__time_duration.sum"
_UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}


@dataclass
class Step:
    """One mode's profiled decodes: GPU us per kernel family, summed over the profiled steps."""

    build: str
    mode: str
    launches: int = 0
    family_us: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def gpu_us(self) -> float:
        return sum(self.family_us.values())


def family(kernel: str) -> str:
    """A kernel's name without its return type, template arguments and parameters:
    "void flash_attn_ext_vec<128, 1, 4, ...>(const char *, ...)" -> "flash_attn_ext_vec"."""
    name = kernel.removeprefix("void ").split("(")[0]
    return re.sub(r"<.*", "", name).strip() or kernel


def read_steps(rows: list[list[str]]) -> dict[tuple[str, str], Step]:
    """(build, mode) -> Step, from the CSV rows (build, mode, then ncu's columns: ID, process
    id, process name, host, kernel name, ..., metric name, unit, value)."""
    steps: dict[tuple[str, str], Step] = {}
    for row in rows:
        if len(row) < 17 or row[2] == "ID" or row[14] != _DURATION:
            continue
        build, mode, kernel, unit, value = row[0], row[1], row[6], row[15], row[16]
        step = steps.setdefault((build, mode), Step(build, mode))
        step.launches += 1
        step.family_us[family(kernel)] += float(value.replace(",", "")) * _UNITS[unit]
    return steps


def report(steps: dict[tuple[str, str], Step], walls: dict[str, float], n: int) -> str:
    """The text printed: per mode the totals, then the families side by side (us a step);
    `walls`: ms a token by mode, `n`: the decodes profiled a mode."""
    lines = []
    for (build, mode), step in steps.items():
        wall = walls.get(mode)
        gpu_ms = step.gpu_us / n / 1000
        busy = f", wall {wall:.3f} ms a token: GPU busy {gpu_ms / wall:.0%}" if wall else ""
        lines.append(
            f"{build} {mode}: {step.launches / n:.0f} kernels, GPU {gpu_ms:.3f} ms a step{busy}"
        )
    families = sorted({f for s in steps.values() for f in s.family_us})
    modes = list(steps.values())
    lines.append("kernel family | " + " | ".join(s.mode for s in modes))
    for name in sorted(families, key=lambda f: -max(s.family_us.get(f, 0.0) for s in modes)):
        lines.append(
            f"{name} | " + " | ".join(f"{s.family_us.get(name, 0.0) / n:.1f}" for s in modes)
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or (len(argv) == 3 and not argv[2].isdigit()):
        print(
            "usage: decode_step_kernels.py NCU_STEP_CSV STEP_JSONL [PROFILED_STEPS]",
            file=sys.stderr,
        )
        return 2
    csv_path, jsonl_path = Path(argv[0]), Path(argv[1])
    n = max(1, int(argv[2])) if len(argv) == 3 else 1
    with csv_path.open(newline="") as f:
        steps = read_steps(list(csv.reader(f)))
    walls = {}
    for line in jsonl_path.read_text().splitlines():
        if line.strip():
            result = json.loads(line)
            walls[result["mode"]] = float(result["ms_per_token"])
    print(report(steps, walls, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
