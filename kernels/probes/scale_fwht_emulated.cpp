// Candidate I's kernel (Q's SCALE and its Hadamard rotation in one, docs/kernel-log/2026-12-05-run34-scale-fwht.patch.txt)
// run on the CPU, before a GPU does, against the two kernels it replaces.
//
// tests/kernels/test_scale_fwht_candidate.py cuts from the patched llama.cpp, into scale_fwht_kernels.inc:
// rope.cu's rope_fwht (with the rope_yarn it calls), which candidate I runs without RoPE and with the
// SCALE's scale and bias; scale.cu's scale_f32 (the SCALE op's kernel); fwht.cu's fwht_cuda (the
// product by the Hadamard matrix). They are compiled here as C++ over stand-ins for CUDA
// (cuda_on_cpu.h: every thread a thread, a warp's shuffle an exchange among its 32).
//
//   scale_fwht_emulated N ROWS SCALE BIAS
//     N: the rotation's width (64, 128 or 256); ROWS: rows of N values (heads x tokens)
//
// Checks, for random rows (some values zero, some negative zero): the fused kernel gives bit for bit
// what scale_f32 then fwht_cuda give, writing into new memory and over its input (as llama.cpp's
// allocator may lay the product on RoPE's output), and within 1e-5 (relative to the row's largest)
// of the scaled rows times the explicit normalized Sylvester matrix in double. Prints the counts and
// exits 0 if all hold, 1 if not, 2 for bad arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

// ---- stand-ins for what the kernels use from CUDA and ggml-cuda ---------------------------------
#include "rope_fwht_on_cpu.h"

using std::max;
using std::min;

#define CUDA_SCALE_BLOCK_SIZE 256

#include "scale_fwht_kernels.inc"

// ---- launching them as the backend does ---------------------------------------------------------
static void scale_op(const float * x, float * y, float s, float b, int64_t n) {
    const unsigned blocks = unsigned((n + CUDA_SCALE_BLOCK_SIZE - 1) / CUDA_SCALE_BLOCK_SIZE);
    launch({blocks, 1, 1}, {CUDA_SCALE_BLOCK_SIZE, 1, 1}, [&] { scale_f32<float>(x, y, s, b, n); });
}

template <int N> static void fwht_op(const float * y, float * out, int64_t rows) {
    launch({unsigned((rows + 3) / 4), 1, 1}, {32, 4, 1}, [&] { fwht_cuda<N, float>(y, out, rows, 1 / sqrtf(N)); });
}

// ggml_cuda_op_scale_fwht_fused's rows: ne01 = the rows, ne02 = 1, s01 = N (contiguous)
template <int N> static void fused_op(const float * x, float * out, int64_t rows, float s, float b) {
    const rope_corr_dims corr_dims = {{0.0f, 0.0f}};
    launch({unsigned((rows + 3) / 4), 1, 1}, {32, 4, 1}, [&] {
        rope_fwht<N, false, false, false, true, float>(x, out, int(rows), 1, rows, N, N * rows, N * rows, nullptr, 1.0f,
                                                       0.0f, 1.0f, corr_dims, 1.0f, nullptr, 1 / sqrtf(N), nullptr, 0,
                                                       s, b);
    });
}

template <int N> static int check(int64_t rows, float s, float b) {
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(rows * N);
    for (auto & v : x) v = uniform(rng);
    for (size_t i = 0; i < x.size(); i += 37) x[i] = 0.0f;
    for (size_t i = 5; i < x.size(); i += 41) x[i] = -0.0f;

    std::vector<float> scaled(x.size()), unfused(x.size(), NAN), fused(x.size(), NAN), in_place = x;
    scale_op(x.data(), scaled.data(), s, b, int64_t(x.size()));
    fwht_op<N>(scaled.data(), unfused.data(), rows);
    fused_op<N>(x.data(), fused.data(), rows, s, b);
    fused_op<N>(in_place.data(), in_place.data(), rows, s, b);

    const bool same = memcmp(fused.data(), unfused.data(), x.size() * sizeof(float)) == 0;
    const bool same_in_place = memcmp(in_place.data(), unfused.data(), x.size() * sizeof(float)) == 0;

    int64_t off = 0;
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> want(N, 0.0);
        double largest = 0;
        for (int i = 0; i < N; ++i) {
            for (int j = 0; j < N; ++j) {
                want[i] += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * (double(s) * x[r * N + j] + b);
            }
            want[i] /= std::sqrt(double(N));
            largest = std::max(largest, std::fabs(want[i]));
        }
        for (int i = 0; i < N; ++i) {
            off += std::fabs(fused[r * N + i] - want[i]) > 1e-5 * std::max(largest, 1e-30);
        }
    }
    printf("N %d, %lld rows: bit for bit as scale_f32 then fwht_cuda: %s, in place: %s; %lld values off the reference\n",
           N, (long long) rows, same ? "yes" : "no", same_in_place ? "yes" : "no", (long long) off);
    return same && same_in_place && off == 0 ? 0 : 1;
}

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s N ROWS SCALE BIAS\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]);
    const long long rows = atoll(argv[2]);
    const float s = strtof(argv[3], nullptr), b = strtof(argv[4], nullptr);
    if ((n != 64 && n != 128 && n != 256) || rows < 1) {
        fprintf(stderr, "scale_fwht_emulated: N must be 64, 128 or 256 and ROWS positive.\n");
        return 2;
    }
    switch (n) {
        case 64: return check<64>(rows, s, b);
        case 128: return check<128>(rows, s, b);
        default: return check<256>(rows, s, b);
    }
}
