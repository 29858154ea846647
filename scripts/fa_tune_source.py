"""Add our perf cases to a llama.cpp source tree's test-backend-ops (issue 15; run by
scripts/fa_kernel_tune.sh on a GPU machine, never on the sources the app builds from).

    python scripts/fa_tune_source.py LLAMA_CPP_DIR perf-cases
        adds Llama-3-8B decode and prompt shapes (128-wide heads, 32 query heads over 8 KV heads)
        at several depths to test-backend-ops' perf list, for f16/f16, q8_0/f16 and q8_0/q8_0,
        and decode at depth 32,768 with 64- and 256-wide heads

The kernel edits of steps 1-3 (the `split` and `aligned-k` commands that were here) are now
patches 0001 and 0002 of kernels/patches, applied by `python -m kernels.patch_set`.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARK = "// kvstudio-tune"
DEPTHS = (4096, 16384, 32768, 131072)
PAIRS = (("F16", "F16"), ("Q8_0", "F16"), ("Q8_0", "Q8_0"))
OTHER_HEADS = (64, 256)  # Gemma 3 (the starter) has 256-wide heads; many small models 64


def add_perf_cases(root: Path) -> None:
    path = root / "tests" / "test-backend-ops.cpp"
    text = path.read_text()
    if MARK in text:
        return
    shapes = [(128, kv, nb) for kv in DEPTHS for nb in (1, 512)]
    shapes += [(head, 32768, 1) for head in OTHER_HEADS]  # decode at 32k for the other heads
    cases = [
        f"    test_cases.emplace_back(new test_flash_attn_ext({head}, {head}, 8, {{4, 1}}, {kv}, "
        f"{nb}, true, false, 0, 0, GGML_PREC_F32, GGML_TYPE_{k}, GGML_TYPE_{v})); {MARK}"
        for head, kv, nb in shapes
        for k, v in PAIRS
    ]
    head = (
        "static std::vector<std::unique_ptr<test_case>> make_test_cases_perf() {\n"
        "    std::vector<std::unique_ptr<test_case>> test_cases;\n"
    )
    if head not in text:
        raise SystemExit(f"{path}: make_test_cases_perf() not found")
    path.write_text(text.replace(head, head + "\n".join(cases) + "\n", 1))


def main(argv: list[str]) -> int:
    root, command = Path(argv[0]), argv[1]
    if command != "perf-cases":
        raise SystemExit(__doc__)
    add_perf_cases(root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
