// Candidate F's kernel (rope_fwht, docs/kernel-log/2026-12-04-run34-rope-fwht.patch.txt) run on the
// CPU, before a GPU does, against an independent reference.
//
// The kernel's own source, cut from the patched rope.cu by tests/kernels/test_rope_fwht_candidate.py
// into rope_fwht_kernel.inc (with rope_yarn, which it calls), is compiled here as C++ over a few
// stand-ins for CUDA: every lane of a warp is a thread, and __shfl_xor_sync is an exchange between
// them at a barrier, so the kernel's lanes, registers, butterflies and stores run as written. The
// reference shares no code with it: RoPE pair by pair in double, the product with the explicit
// normalized Sylvester-Hadamard matrix, and q8_0 blocks quantized as ggml's CPU does.
//
//   rope_fwht_emulated N ROPE NEOX FF STORE ROWS TOKENS
//     ROPE 1: RoPE first (Q, K; N is the head size), 0: the rotation alone (V, in groups of N)
//     STORE: rows (Q's f32 rows), rows-in-place (written over the input), or a cache of f32, f16, q8_0
//     ROWS: rows of N values a token (heads, or V's groups)
//
// Prints the largest error and exits 0 if every value is within its tolerance (float rounding; a
// q8_0 value at most one step off where the reference lies within 0.005 of a rounding boundary), 1
// if not, 2 for bad arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

// ---- stand-ins for what the kernel uses from CUDA and ggml-cuda --------------------------------
#include "rope_fwht_on_cpu.h"

using std::max;
using std::min;

#include "rope_fwht_kernel.inc"

// ---- running it: 4 rows (warps) a block, as the launcher does ------------------------------------
template <int N, bool has_rope, bool neox, bool has_ff, typename D>
static void run(const float * x, D * dst, int ne01, int ne02, int64_t n_rows, const int32_t * pos,
                float theta_scale, const float * ff, float scale, const int64_t * rows, int64_t stride) {
    const rope_corr_dims corr_dims = {{0.0f, 0.0f}};
    launch({unsigned((n_rows + 3) / 4), 1, 1}, {32, 4, 1}, [&] {
        rope_fwht<N, has_rope, neox, has_ff, D>(x, dst, ne01, ne02, n_rows, N, (int64_t) N * ne01,
                                                (int64_t) N * ne01 * ne02, pos, 1.0f, 0.0f, 1.0f, corr_dims,
                                                theta_scale, ff, scale, rows, stride);
    });
}

template <int N, typename D>
static void dispatch(bool rope, bool neox, bool ff, const float * x, D * dst, int ne01, int ne02, int64_t n_rows,
                     const int32_t * pos, float theta_scale, const float * f, float scale,
                     const int64_t * rows, int64_t stride) {
    if (!rope) {
        run<N, false, false, false>(x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride);
    } else if (neox) {
        if (ff) run<N, true, true, true>(x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride);
        else    run<N, true, true, false>(x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride);
    } else {
        if (ff) run<N, true, false, true>(x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride);
        else    run<N, true, false, false>(x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride);
    }
}

template <typename D>
static void dispatch_n(int n, bool rope, bool neox, bool ff, const float * x, D * dst, int ne01, int ne02,
                       int64_t n_rows, const int32_t * pos, float theta_scale, const float * f, float scale,
                       const int64_t * rows, int64_t stride) {
    switch (n) {
        case 64: dispatch<64>(rope, neox, ff, x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride); break;
        case 128: dispatch<128>(rope, neox, ff, x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride); break;
        case 256: dispatch<256>(rope, neox, ff, x, dst, ne01, ne02, n_rows, pos, theta_scale, f, scale, rows, stride); break;
    }
}

// ---- the reference ------------------------------------------------------------------------------
static std::vector<double> reference_row(const float * x, int n, bool rope, bool neox, int32_t pos, const float * ff) {
    const double base = 10000.0;
    std::vector<double> roped(x, x + n);
    for (int k = 0; rope && k < n / 2; ++k) {
        const int a = neox ? k : 2 * k;             // the pair's two values
        const int b = neox ? k + n / 2 : 2 * k + 1;
        const double theta = pos * std::pow(base, -2.0 * k / n) / (ff ? ff[k] : 1.0);
        roped[a] = x[a] * std::cos(theta) - x[b] * std::sin(theta);
        roped[b] = x[a] * std::sin(theta) + x[b] * std::cos(theta);
    }
    std::vector<double> out(n, 0.0);
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
            out[i] += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * roped[j];
        }
        out[i] /= std::sqrt((double) n);
    }
    return out;
}

int main(int argc, char ** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s N ROPE NEOX FF rows|rows-in-place|f32|f16|q8_0 ROWS TOKENS\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), heads = atoi(argv[6]), tokens = atoi(argv[7]);
    const bool rope = atoi(argv[2]) != 0, neox = atoi(argv[3]) != 0, has_ff = atoi(argv[4]) != 0;
    const std::string store = argv[5];
    if ((n != 64 && n != 128 && n != 256) || heads < 1 || tokens < 1 ||
        (store != "rows" && store != "rows-in-place" && store != "f32" && store != "f16" && store != "q8_0")) {
        fprintf(stderr, "rope_fwht_emulated: N must be 64, 128 or 256, ROWS and TOKENS positive, "
                        "STORE rows, rows-in-place, f32, f16 or q8_0.\n");
        return 2;
    }

    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    const int64_t n_rows = (int64_t) heads * tokens;
    std::vector<float> x(n_rows * n);
    for (auto & v : x) v = uniform(rng);
    std::vector<int32_t> pos(tokens);
    for (auto & p : pos) p = int32_t(rng() % 256);  // float RoPE at large positions is off by more than a q8_0 window
    std::vector<float> ff(n / 2);
    for (auto & f : ff) f = 0.9f + 0.2f * (uniform(rng) + 1.0f) / 2.0f;
    const int n_cells = tokens + 5;  // the cache: rows written at shuffled cells, the rest untouched
    std::vector<int64_t> cells(n_cells);
    for (int i = 0; i < n_cells; ++i) cells[i] = i;
    std::shuffle(cells.begin(), cells.end(), rng);

    const float theta_scale = powf(10000.0f, -2.0f / n);
    const float scale = 1 / sqrtf(n);
    const float * f = has_ff ? ff.data() : nullptr;
    const int64_t row_values = (int64_t) heads * n;

    // what the kernel wrote, as floats, and what it should have: per (cell or row, value)
    std::vector<float> got;
    std::vector<double> want;
    std::vector<double> step;  // the q8_0 step of the block a value lies in (0: not quantized)
    if (store == "rows") {
        std::vector<float> out(n_rows * n, NAN);
        dispatch_n<float>(n, rope, neox, has_ff, x.data(), out.data(), heads, tokens, n_rows, pos.data(), theta_scale, f,
                          scale, nullptr, 0);
        got = out;
    } else if (store == "rows-in-place") {
        // Q's rows written over RoPE's input, as llama.cpp's allocator lays out a decode step
        std::vector<float> rows = x;
        dispatch_n<float>(n, rope, neox, has_ff, rows.data(), rows.data(), heads, tokens, n_rows, pos.data(), theta_scale,
                          f, scale, nullptr, 0);
        got = rows;
    } else if (store == "f32") {
        std::vector<float> cache(n_cells * row_values, 7.0f);
        dispatch_n<float>(n, rope, neox, has_ff, x.data(), cache.data(), heads, tokens, n_rows, pos.data(), theta_scale, f,
                          scale, cells.data(), row_values);
        got = cache;
    } else if (store == "f16") {
        std::vector<half> cache(n_cells * row_values, half(7.0f));
        dispatch_n<half>(n, rope, neox, has_ff, x.data(), cache.data(), heads, tokens, n_rows, pos.data(), theta_scale, f,
                         scale, cells.data(), row_values);
        for (half h : cache) got.push_back(float(h));
    } else {
        std::vector<block_q8_0> cache(n_cells * row_values / QK8_0);
        for (auto & b : cache) { b.d = half(7.0f); memset(b.qs, 1, sizeof b.qs); }
        dispatch_n<block_q8_0>(n, rope, neox, has_ff, x.data(), cache.data(), heads, tokens, n_rows, pos.data(),
                               theta_scale, f, scale, cells.data(), row_values / QK8_0);
        for (const auto & b : cache) for (int j = 0; j < QK8_0; ++j) got.push_back(float(b.d) * b.qs[j]);
    }

    // the reference, in the same layout: Q's rows in order, or each token's heads at its cell
    const bool cached = store != "rows" && store != "rows-in-place";
    want.assign(got.size(), cached ? 7.0 : NAN);
    step.assign(got.size(), 0.0);
    for (int t = 0; t < tokens; ++t) {
        for (int h = 0; h < heads; ++h) {
            const int64_t r = (int64_t) t * heads + h;
            const auto row = reference_row(x.data() + r * n, n, rope, neox, pos[t], f);
            const int64_t at = cached ? cells[t] * row_values + (int64_t) h * n : r * n;
            for (int i = 0; i < n; ++i) want[at + i] = row[i];
        }
    }
    if (store == "q8_0") {
        for (size_t b = 0; b < want.size() / QK8_0; ++b) {
            double amax = 0;
            for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(want[b * QK8_0 + j]));
            const double d = amax / 127;
            const double stored_d = double(half(d));  // the block keeps its scale as f16
            for (int j = 0; j < QK8_0; ++j) {
                double & w = want[b * QK8_0 + j];
                if (w == 7.0 && std::fabs(got[b * QK8_0 + j] - 7.0) < 1e-6) continue;  // an untouched cell
                const double q = d ? w / d : 0.0;
                // the kernel rounds its float q: a reference within 0.005 of .5 may land either way
                const double nearest = std::round(q);
                step[b * QK8_0 + j] = std::fabs(std::fabs(q - std::trunc(q)) - 0.5) < 5e-3 ? stored_d : 0.0;
                w = nearest * stored_d;
            }
        }
    }

    double worst = 0;
    size_t worst_at = 0, bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double tolerance = store == "f16" ? 2e-3 * std::max(1.0, std::fabs(want[i])) + 1e-3
                               : store == "q8_0" ? step[i] + 1e-3 * std::max(1.0, std::fabs(want[i]))
                                                 : 2e-4 * std::max(1.0, std::fabs(want[i]));
        const double err = std::fabs(got[i] - want[i]);
        if (!(err <= tolerance)) {
            if (bad++ < 5) fprintf(stderr, "value %zu: kernel %.6f, reference %.6f\n", i, got[i], want[i]);
        }
        if (!(err <= worst)) { worst = err; worst_at = i; }
    }
    printf("N=%d rope=%d neox=%d ff=%d store=%s rows=%d tokens=%d: %zu values, largest error %.3g (value %zu), %zu "
           "outside tolerance\n", n, rope, neox, has_ff, store.c_str(), heads, tokens, got.size(), worst, worst_at, bad);
    return bad == 0 ? 0 : 1;
}
