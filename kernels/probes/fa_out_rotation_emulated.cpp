// Candidate G's kernels (the attention output stored rotated, docs/kernel-log/2026-12-04-run34-fa-out-rotation.patch.txt)
// run on the CPU, before a GPU does, against the kernel they replace and against an independent reference.
//
// tests/kernels/test_fa_out_rotation_candidate.py cuts from the patched llama.cpp, into
// fa_out_rotation_kernels.inc: fattn-common.cuh's kvstudio_rotate_64, kvstudio_rotate_output_64 and
// flash_attn_combine_results (the combine step of the vector kernel, with and without the rotation),
// and fwht.cu's fwht_cuda (what the backend runs for llama.cpp's MUL_MAT by the Hadamard matrix).
// They are compiled here as C++ over stand-ins for CUDA: every thread of a block is a thread, a warp's
// shuffle an exchange among its 32 at a barrier, __syncthreads a barrier of the block, and
// __shared__ memory one array a block (blocks run one at a time).
//
//   fa_out_rotation_emulated D ROWS PARALLEL_BLOCKS
//     D: the head size (a multiple of 64: the output rows, rotated in groups of 64)
//     ROWS: output rows (heads x tokens); PARALLEL_BLOCKS: partial results a row the combine step merges
//
// Checks, for random partial results: the combine step with the rotation gives exactly (bit for bit)
// what fwht_cuda gives from the combine step without it; the rotation-only kernel exactly what fwht_cuda
// gives from the same rows; and both the product with the explicit normalized Sylvester matrix in
// double (relative 1e-5). Prints the counts and exits 0 if all hold, 1 if not, 2 for bad arguments.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

// ---- stand-ins for what the kernels use from CUDA and ggml-cuda ---------------------------------
#include "cuda_on_cpu.h"

#define GGML_CUDA_RESTRICT
#define __builtin_assume(x)

using std::max;
struct float2 { float x, y; };

// the combine step's `extern __shared__ float2 meta[]` (the test renames it to this)
static std::vector<float2> dynamic_shared;
#define KVSTUDIO_DYNAMIC_SHARED_FLOAT2 (dynamic_shared.data())

#include "fa_out_rotation_kernels.inc"

// fwht_cuda as ggml_cuda_op_fwht_impl launches it for 64-wide rows: 4 rows a block of 32 x 4
static void fwht_64(const float * src, float * dst, int64_t rows) {
    launch({unsigned((rows + 3) / 4), 1, 1}, {32, 4, 1}, [&] { fwht_cuda<64, float>(src, dst, rows, 1 / sqrtf(64)); });
}

// the combine step as launch_fattn launches it: a block of D threads a row (col, head, sequence)
template <int D, bool rotate>
static void combine(const float * parts, const float2 * meta, float * dst, int rows, int parallel_blocks) {
    dynamic_shared.assign(parallel_blocks, float2{0, 0});
    launch({1, unsigned(rows), 1}, {D, 1, 1}, [&] {
        flash_attn_combine_results<D, rotate>(parts, meta, dst, parallel_blocks);
    });
}

template <int D>
static int check(int rows, int parallel_blocks) {
    std::mt19937 rng(4321);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> parts((size_t) rows * parallel_blocks * D);
    for (auto & v : parts) v = uniform(rng);
    std::vector<float2> meta((size_t) rows * parallel_blocks);
    for (auto & m : meta) m = {4.0f * uniform(rng), 1.0f + uniform(rng) + 1.0f};  // the block's max and sum

    const size_t n = (size_t) rows * D;
    std::vector<float> combined(n), fwht_of_combined(n), fused(n), rotated(n), fwht_of_rows(n);
    combine<D, false>(parts.data(), meta.data(), combined.data(), rows, parallel_blocks);
    fwht_64(combined.data(), fwht_of_combined.data(), (int64_t) n / 64);
    combine<D, true>(parts.data(), meta.data(), fused.data(), rows, parallel_blocks);
    // the rotation-only kernel (after a kernel that wrote the rows itself), on the same rows
    launch({unsigned(rows), 1, 1}, {D, 1, 1}, [&] { kvstudio_rotate_output_64<D>(combined.data(), rotated.data()); });
    fwht_64(combined.data(), fwht_of_rows.data(), (int64_t) n / 64);

    size_t combine_diff = 0, rotate_diff = 0, off_reference = 0;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        combine_diff += memcmp(&fused[i], &fwht_of_combined[i], sizeof(float)) != 0;
        rotate_diff += memcmp(&rotated[i], &fwht_of_rows[i], sizeof(float)) != 0;
    }
    for (size_t g = 0; g < n / 64; ++g) {  // each group of 64 times the normalized Sylvester matrix, in double
        for (int i = 0; i < 64; ++i) {
            double want = 0;
            for (int j = 0; j < 64; ++j) {
                want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * combined[g * 64 + j];
            }
            want /= 8.0;
            const double err = std::fabs(fused[g * 64 + i] - want);
            worst = std::max(worst, err);
            off_reference += !(err <= 1e-5 * std::max(1.0, std::fabs(want)));
        }
    }
    printf("D=%d rows=%d parallel_blocks=%d: %zu values; combine+rotation vs fwht_cuda after combine: %zu differ; "
           "rotation kernel vs fwht_cuda: %zu differ; largest error against the matrix %.3g, %zu outside 1e-5\n",
           D, rows, parallel_blocks, n, combine_diff, rotate_diff, worst, off_reference);
    return combine_diff == 0 && rotate_diff == 0 && off_reference == 0 ? 0 : 1;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s D ROWS PARALLEL_BLOCKS\n", argv[0]);
        return 2;
    }
    const int d = atoi(argv[1]), rows = atoi(argv[2]), parallel_blocks = atoi(argv[3]);
    if (rows < 1 || parallel_blocks < 1) {
        fprintf(stderr, "fa_out_rotation_emulated: ROWS and PARALLEL_BLOCKS must be positive.\n");
        return 2;
    }
    switch (d) {
        case 64: return check<64>(rows, parallel_blocks);
        case 128: return check<128>(rows, parallel_blocks);
        case 256: return check<256>(rows, parallel_blocks);
        case 512: return check<512>(rows, parallel_blocks);
        default:
            fprintf(stderr, "fa_out_rotation_emulated: D must be 64, 128, 256 or 512.\n");
            return 2;
    }
}
