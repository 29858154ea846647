"""Edit a llama.cpp source tree for the int8-K decode-kernel experiments (issue 15; run by
scripts/fa_kernel_tune.sh on a GPU machine, never on the sources the app builds from).

    python scripts/fa_tune_source.py LLAMA_CPP_DIR perf-cases
        adds Llama-3-8B decode and prompt shapes (128-wide heads, 32 query heads over 8 KV heads)
        at several depths to test-backend-ops' perf list, for f16/f16, q8_0/f16 and q8_0/q8_0
    python scripts/fa_tune_source.py LLAMA_CPP_DIR split KQ V [BLOCKS]
        sets how many threads of a warp share one K row's dot product (KQ) and one V column (V)
        in the CUDA vector kernel for quantized K/V; upstream uses a whole warp (32) for both;
        BLOCKS (default 1, upstream's) is the launch bound's minimum of blocks per multiprocessor,
        which caps the registers the compiler may use

Both edits can be applied again with other values.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MARK = "// kvstudio-tune"
DEPTHS = (4096, 16384, 32768, 131072)
PAIRS = (("F16", "F16"), ("Q8_0", "F16"), ("Q8_0", "Q8_0"))


def add_perf_cases(root: Path) -> None:
    path = root / "tests" / "test-backend-ops.cpp"
    text = path.read_text()
    if MARK in text:
        return
    cases = [
        f"    test_cases.emplace_back(new test_flash_attn_ext(128, 128, 8, {{4, 1}}, {kv}, {nb}, "
        f"true, false, 0, 0, GGML_PREC_F32, GGML_TYPE_{k}, GGML_TYPE_{v})); {MARK}"
        for kv in DEPTHS
        for nb in (1, 512)
        for k, v in PAIRS
    ]
    head = (
        "static std::vector<std::unique_ptr<test_case>> make_test_cases_perf() {\n"
        "    std::vector<std::unique_ptr<test_case>> test_cases;\n"
    )
    if head not in text:
        raise SystemExit(f"{path}: make_test_cases_perf() not found")
    path.write_text(text.replace(head, head + "\n".join(cases) + "\n", 1))


_CUDA_SPLIT = re.compile(
    r"(#else\n)    constexpr int nthreads_KQ_q = [^\n]*\n    constexpr int nthreads_V_q  = [^\n]*\n"
    r"(#endif // GGML_USE_HIP)"
)


_LAUNCH_BOUNDS = re.compile(
    r"__launch_bounds__\(ggml_cuda_fattn_vec_get_nthreads_device\(\), \d+\)[^\n]*\n"
)


def set_split(root: Path, kq: int, v: int, blocks: int = 1) -> None:
    for value in (kq, v):
        if value not in (1, 2, 4, 8, 16, 32):
            raise SystemExit(f"{value}: threads per row must divide the warp (1-32, a power of 2)")
    path = root / "ggml" / "src" / "ggml-cuda" / "fattn-vec.cuh"
    text = path.read_text()
    new = (
        rf"\g<1>    constexpr int nthreads_KQ_q = (D/4 < {kq} ? D/4 : {kq}); {MARK}\n"
        rf"    constexpr int nthreads_V_q  = (D/4 < {v} ? D/4 : {v}); {MARK}\n\g<2>"
    )
    text, count = _CUDA_SPLIT.subn(new, text)
    if count != 1:
        raise SystemExit(f"{path}: the CUDA thread split was found {count} times, not once")
    bound = f"__launch_bounds__(ggml_cuda_fattn_vec_get_nthreads_device(), {blocks}) {MARK}\n"
    text, count = _LAUNCH_BOUNDS.subn(lambda _m: bound, text)
    if count != 1:
        raise SystemExit(f"{path}: the vector kernel's launch bounds were found {count} times")
    path.write_text(text)


def main(argv: list[str]) -> int:
    root, command = Path(argv[0]), argv[1]
    if command == "perf-cases":
        add_perf_cases(root)
    elif command == "split":
        set_split(root, *(int(value) for value in argv[2:5]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
