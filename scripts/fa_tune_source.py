"""Edit a llama.cpp source tree for the int8-K decode-kernel experiments (issue 15; run by
scripts/fa_kernel_tune.sh on a GPU machine, never on the sources the app builds from).

    python scripts/fa_tune_source.py LLAMA_CPP_DIR perf-cases
        adds Llama-3-8B decode and prompt shapes (128-wide heads, 32 query heads over 8 KV heads)
        at several depths to test-backend-ops' perf list, for f16/f16, q8_0/f16 and q8_0/q8_0,
        and decode at depth 32,768 with 64- and 256-wide heads
    python scripts/fa_tune_source.py LLAMA_CPP_DIR aligned-k
        (step 3) the q8_0 K dot product reads each thread's K values as aligned 4-byte words
        and realigns them with a funnel shift (a q8_0 block is 34 bytes: every other block's
        values start 2 bytes off a 4-byte boundary, which upstream loads as two 2-byte halves
        per int), one fp16 scale per block instead of one per int; for that each thread takes
        a contiguous run of a row's ints (its Q ints loaded to match), not every nth int
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


_UPSTREAM_KQ_Q8_0 = """#pragma unroll
    for (int k_KQ_0 = 0; k_KQ_0 < int(D/sizeof(int)); k_KQ_0 += nthreads) {
        const int k_KQ = k_KQ_0 + (nthreads == WARP_SIZE ? threadIdx.x : threadIdx.x % nthreads);

        const int ib  = k_KQ / QI8_0;
        const int iqs = k_KQ % QI8_0;

        int v;
        ggml_cuda_memcpy_1<sizeof(v), 2>(&v, K_q8_0[ib].qs + 4*iqs);

        const float2 * Q_ds = (const float2 *) Q_ds_v;
        const float Q_d = Q_ds[k_KQ_0/nthreads].x;

        sum += vec_dot_q8_0_q8_1_impl<float, 1>(&v, &Q_q8[k_KQ_0/nthreads], K_q8_0[ib].d, Q_d);
    }
"""

_ALIGNED_KQ_Q8_0 = """    // kvstudio-tune aligned-k: a contiguous run of ints per thread, read as aligned words
    constexpr int n_int = D/(sizeof(int)*nthreads);
    constexpr int run   = n_int < QI8_0 ? n_int : QI8_0;
    const int t = nthreads == WARP_SIZE ? threadIdx.x : threadIdx.x % nthreads;
    const float2 * Q_ds = (const float2 *) Q_ds_v;
#pragma unroll
    for (int b = 0; b < n_int; b += run) {
        const int k   = t*n_int + b;
        const int ib  = k / QI8_0;
        const int iqs = k % QI8_0;
        const uintptr_t addr  = (uintptr_t) (K_q8_0[ib].qs + 4*iqs);
        const int     * w     = (const int *) (addr & ~uintptr_t(3));
        const int       shift = (addr & 3) * 8;
        int words[run + 1];
#pragma unroll
        for (int l = 0; l < run; ++l) {
            words[l] = w[l];
        }
        words[run] = shift ? w[run] : 0;
        int sumi = 0;
#pragma unroll
        for (int l = 0; l < run; ++l) {
            sumi = ggml_cuda_dp4a(__funnelshift_r(words[l], words[l + 1], shift), Q_q8[b + l], sumi);
        }
        sum += __half2float(K_q8_0[ib].d) * Q_ds[b].x * sumi;
    }
"""

_UPSTREAM_Q_LOAD = """                const int i = i0 + (nthreads_KQ == WARP_SIZE ? threadIdx.x : threadIdx.x % nthreads_KQ);

                Q_i32[j][i0/nthreads_KQ] = tmp_q_i32[i];"""

_ALIGNED_Q_LOAD = """                const int i = type_K == GGML_TYPE_Q8_0 ? // kvstudio-tune aligned-k
                    (nthreads_KQ == WARP_SIZE ? threadIdx.x : threadIdx.x % nthreads_KQ)*int(D/(sizeof(int)*nthreads_KQ)) + i0/nthreads_KQ :
                    i0 + (nthreads_KQ == WARP_SIZE ? threadIdx.x : threadIdx.x % nthreads_KQ);

                Q_i32[j][i0/nthreads_KQ] = tmp_q_i32[i];"""


def set_aligned_k(root: Path) -> None:
    cuda = root / "ggml" / "src" / "ggml-cuda"
    for name, old, new in (
        ("fattn-common.cuh", _UPSTREAM_KQ_Q8_0, _ALIGNED_KQ_Q8_0),
        ("fattn-vec.cuh", _UPSTREAM_Q_LOAD, _ALIGNED_Q_LOAD),
    ):
        path = cuda / name
        text = path.read_text()
        if new in text:
            continue
        if text.count(old) != 1:
            raise SystemExit(
                f"{path}: the upstream code to replace was found {text.count(old)} times"
            )
        path.write_text(text.replace(old, new))


def main(argv: list[str]) -> int:
    root, command = Path(argv[0]), argv[1]
    if command == "perf-cases":
        add_perf_cases(root)
    elif command == "aligned-k":
        set_aligned_k(root)
    elif command == "split":
        set_split(root, *(int(value) for value in argv[2:5]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
