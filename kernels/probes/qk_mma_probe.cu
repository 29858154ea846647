// Does an int8 Q·K pay in the prompt kernel? (issue 26, item 2: "then, if it pays, int8 MMA").
//
// The Flash Attention prompt kernel (fattn-mma-f16.cuh) computes Q·K with f16 tensor-core
// instructions (mma.sync m16n8k16), so a q8_0 K is converted to f16 first: by a copy of the whole
// cache (the default) or tile by tile in the kernel (patch 0005, slower: kernel-log D and K). An
// int8 product (mma.sync m16n8k32 s8) needs no conversion and does twice the multiply-adds per
// instruction, but q8_0 carries one scale per 32 values, so each k32 product must be scaled by
// Q's and K's scales before it is summed: 4 int-to-float conversions and 8 float operations per
// thread per instruction, on other pipes than the tensor cores.
//
// This probe measures that part alone, without the rest of the kernel: every warp keeps 16 Q rows
// of a 128-wide head in registers (as the prompt kernel does) and multiplies them with a 64-cell K
// tile in shared memory, over and over, in three ways:
//   f16      Q and K in f16, 8 m16n8k16 per 8 cells (the kernel's way today)
//   i8       Q and K in int8 with one scale per 32 (q8_0 K, Q quantized like q8_1), 4 m16n8k32
//            per 8 cells, each scaled by Q's and K's scales
//   i8-row   Q with one scale per row (taken out of the sum), K's scale per 32 applied
// Printed: each kernel's time and the int8 ones against f16 (medians of 7 timed launches, in
// turns), and each result against a CPU reference of the same inputs, so a wrong fragment layout
// shows as an error, not as a fast time.
//
// nvcc -O3 -std=c++17 -arch=sm_90 -o qk_mma_probe kernels/probes/qk_mma_probe.cu && ./qk_mma_probe

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

constexpr int D      = 128;  // head size
constexpr int ROWS   = 16;   // Q rows per warp (one mma tile)
constexpr int CELLS  = 64;   // K cells per tile
constexpr int BLOCKS = D / 32;
constexpr int WARPS  = 4;
constexpr int PAD_H  = 8;    // halves of padding per K row in shared memory (no bank conflicts)
constexpr int PAD_B  = 16;   // bytes of padding per int8 K row

enum class Mode { f16, i8, i8_row };

struct Inputs {
    const half   * q_h;   // [ROWS][D]
    const half   * k_h;   // [CELLS][D]
    const int8_t * q_i;   // [ROWS][D]
    const float  * q_d;   // [ROWS][BLOCKS] (i8) or [ROWS] (i8_row)
    const int8_t * k_i;   // [CELLS][D]
    const float  * k_d;   // [BLOCKS][CELLS]
};

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// Each warp: its 16 Q rows against the 64-cell tile, `iters` times (the tile's 8-cell column
// blocks in a rotating order, so no fragment can stay in registers across iterations). The scores
// of the first pass of block 0 go to `scores` [WARPS][ROWS][CELLS]; every thread adds what it
// computed into `sink`, so nothing is optimized away.
template <Mode mode>
__global__ void __launch_bounds__(WARPS * 32) qk_probe(Inputs in, int iters, float * scores, float * sink) {
    __shared__ __align__(16) half   k_h[mode == Mode::f16 ? CELLS * (D + PAD_H) : 1];
    __shared__ __align__(16) int8_t k_i[mode == Mode::f16 ? 1 : CELLS * (D + PAD_B)];
    __shared__ __align__(16) float  k_d[mode == Mode::f16 ? 1 : BLOCKS * CELLS];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int group = lane / 4, tig = lane % 4;  // the mma fragments' row group and thread in group

    for (int i = threadIdx.x; i < CELLS * D; i += blockDim.x) {
        if constexpr (mode == Mode::f16) {
            k_h[(i / D) * (D + PAD_H) + i % D] = in.k_h[i];
        } else {
            k_i[(i / D) * (D + PAD_B) + i % D] = in.k_i[i];
        }
    }
    if constexpr (mode != Mode::f16) {
        for (int i = threadIdx.x; i < BLOCKS * CELLS; i += blockDim.x) {
            k_d[i] = in.k_d[i];
        }
    }
    __syncthreads();

    // Q's A fragments, in registers for the whole run. f16 m16n8k16: a thread holds rows group
    // and group+8, columns tig*2 (+1) and +8 of each 16-wide step; s8 m16n8k32: rows group and
    // group+8, columns tig*4..+3 and +16 of each 32-wide step.
    constexpr int STEPS = mode == Mode::f16 ? D / 16 : D / 32;
    uint32_t a[STEPS][4];
    float    dq[2][BLOCKS];  // Q's scales for the thread's two rows (i8: per block; i8_row: [r][0])
    for (int s = 0; s < STEPS; ++s) {
        for (int r = 0; r < 2; ++r) {
            const int row = group + 8 * r;
            if constexpr (mode == Mode::f16) {
                const int col = s * 16 + tig * 2;
                a[s][r]     = *(const uint32_t *) &in.q_h[row * D + col];
                a[s][r + 2] = *(const uint32_t *) &in.q_h[row * D + col + 8];
            } else {
                const int col = s * 32 + tig * 4;
                a[s][r]     = *(const uint32_t *) &in.q_i[row * D + col];
                a[s][r + 2] = *(const uint32_t *) &in.q_i[row * D + col + 16];
            }
        }
    }
    if constexpr (mode != Mode::f16) {
        for (int r = 0; r < 2; ++r) {
            for (int b = 0; b < BLOCKS; ++b) {
                dq[r][b] = mode == Mode::i8 ? in.q_d[(group + 8 * r) * BLOCKS + b] : (b == 0 ? in.q_d[group + 8 * r] : 0.0f);
            }
        }
    }

    float total = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j0 = 0; j0 < CELLS / 8; ++j0) {
            const int j    = (j0 + it) % (CELLS / 8);
            const int cell = j * 8 + group;  // the B fragment's column: this thread's K cell
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if constexpr (mode == Mode::f16) {
#pragma unroll
                for (int s = 0; s < STEPS; ++s) {
                    const half * row = &k_h[cell * (D + PAD_H) + s * 16 + tig * 2];
                    mma_f16(acc, a[s], *(const uint32_t *) row, *(const uint32_t *) (row + 8));
                }
            } else {
#pragma unroll
                for (int b = 0; b < STEPS; ++b) {
                    const int8_t * row = &k_i[cell * (D + PAD_B) + b * 32 + tig * 4];
                    int c[4];
                    mma_s8(c, a[b], *(const uint32_t *) row, *(const uint32_t *) (row + 16));
                    // The product's columns are cells j*8 + tig*2 (+1): their K scales.
                    const float2 dk = *(const float2 *) &k_d[b * CELLS + j * 8 + tig * 2];
                    if constexpr (mode == Mode::i8) {
                        acc[0] += (float) c[0] * (dq[0][b] * dk.x);
                        acc[1] += (float) c[1] * (dq[0][b] * dk.y);
                        acc[2] += (float) c[2] * (dq[1][b] * dk.x);
                        acc[3] += (float) c[3] * (dq[1][b] * dk.y);
                    } else {
                        acc[0] += (float) c[0] * dk.x;
                        acc[1] += (float) c[1] * dk.y;
                        acc[2] += (float) c[2] * dk.x;
                        acc[3] += (float) c[3] * dk.y;
                    }
                }
                if constexpr (mode == Mode::i8_row) {
                    acc[0] *= dq[0][0];
                    acc[1] *= dq[0][0];
                    acc[2] *= dq[1][0];
                    acc[3] *= dq[1][0];
                }
            }
            if (it == 0 && blockIdx.x == 0) {
                float * out = scores + warp * ROWS * CELLS;
                const int col = j * 8 + tig * 2;
                out[group * CELLS + col]           = acc[0];
                out[group * CELLS + col + 1]       = acc[1];
                out[(group + 8) * CELLS + col]     = acc[2];
                out[(group + 8) * CELLS + col + 1] = acc[3];
            }
            total += acc[0] + acc[1] + acc[2] + acc[3];
        }
    }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = total;
}

static float to_half_and_back(float x) { return __half2float(__float2half(x)); }

int main(int argc, char ** argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 4096;
    int device_sms = 0;
    CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = device_sms * 8;

    // Random Q and K, then what each kernel reads: f16 copies; q8_0 K (a scale per 32 values,
    // kept in f16 as in the cache); Q quantized per 32 (i8) and per row (i8_row).
    srand(1234);
    auto uniform = [] { return (float) rand() / RAND_MAX * 2.0f - 1.0f; };
    std::vector<float> q(ROWS * D), k(CELLS * D);
    for (float & x : q) x = uniform();
    for (float & x : k) x = uniform();
    std::vector<half> q_h(q.size()), k_h(k.size());
    for (size_t i = 0; i < q.size(); ++i) q_h[i] = __float2half(q[i]);
    for (size_t i = 0; i < k.size(); ++i) k_h[i] = __float2half(k[i]);
    auto quantize = [](const float * x, int n, int8_t * out) {
        float amax = 0.0f;
        for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = to_half_and_back(amax / 127.0f);
        for (int i = 0; i < n; ++i) out[i] = (int8_t) std::lround(d > 0 ? x[i] / d : 0.0f);
        return d;
    };
    std::vector<int8_t> k_i(k.size()), q_i(q.size()), q_i_row(q.size());
    std::vector<float>  k_d(BLOCKS * CELLS), q_d(ROWS * BLOCKS), q_d_row(ROWS);
    for (int c = 0; c < CELLS; ++c)
        for (int b = 0; b < BLOCKS; ++b) k_d[b * CELLS + c] = quantize(&k[c * D + b * 32], 32, &k_i[c * D + b * 32]);
    for (int r = 0; r < ROWS; ++r) {
        for (int b = 0; b < BLOCKS; ++b) q_d[r * BLOCKS + b] = quantize(&q[r * D + b * 32], 32, &q_i[r * D + b * 32]);
        q_d_row[r] = quantize(&q[r * D], D, &q_i_row[r * D]);
    }

    auto upload = [](const void * data, size_t bytes) {
        void * p = nullptr;
        CHECK(cudaMalloc(&p, bytes));
        CHECK(cudaMemcpy(p, data, bytes, cudaMemcpyHostToDevice));
        return p;
    };
    Inputs per_block = {(const half *) upload(q_h.data(), q_h.size() * 2), (const half *) upload(k_h.data(), k_h.size() * 2),
                        (const int8_t *) upload(q_i.data(), q_i.size()), (const float *) upload(q_d.data(), q_d.size() * 4),
                        (const int8_t *) upload(k_i.data(), k_i.size()), (const float *) upload(k_d.data(), k_d.size() * 4)};
    Inputs per_row = per_block;
    per_row.q_i = (const int8_t *) upload(q_i_row.data(), q_i_row.size());
    per_row.q_d = (const float *) upload(q_d_row.data(), q_d_row.size() * 4);
    float * scores = nullptr;
    float * sink   = nullptr;
    CHECK(cudaMalloc(&scores, WARPS * ROWS * CELLS * sizeof(float)));
    CHECK(cudaMalloc(&sink, (size_t) grid * WARPS * 32 * sizeof(float)));

    // The CPU's scores of the same inputs each kernel reads (exact integer sums for the int8 ones),
    // and the f32 scores the quantization approximates.
    auto reference = [&](Mode mode, int r, int c) -> double {
        double s = 0.0;
        if (mode == Mode::f16) {
            for (int i = 0; i < D; ++i) s += (double) __half2float(q_h[r * D + i]) * __half2float(k_h[c * D + i]);
        } else {
            for (int b = 0; b < BLOCKS; ++b) {
                long dot = 0;
                const int8_t * qq = mode == Mode::i8 ? &q_i[r * D] : &q_i_row[r * D];
                for (int i = b * 32; i < b * 32 + 32; ++i) dot += (long) qq[i] * k_i[c * D + i];
                const double dq = mode == Mode::i8 ? q_d[r * BLOCKS + b] : q_d_row[r];
                s += (double) dot * dq * k_d[b * CELLS + c];
            }
        }
        return s;
    };

    const char * names[] = {"f16", "i8", "i8-row"};
    const Mode   modes[] = {Mode::f16, Mode::i8, Mode::i8_row};
    auto launch = [&](Mode mode, int n) {
        switch (mode) {
            case Mode::f16:    qk_probe<Mode::f16><<<grid, WARPS * 32>>>(per_block, n, scores, sink); break;
            case Mode::i8:     qk_probe<Mode::i8><<<grid, WARPS * 32>>>(per_block, n, scores, sink); break;
            case Mode::i8_row: qk_probe<Mode::i8_row><<<grid, WARPS * 32>>>(per_row, n, scores, sink); break;
        }
        CHECK(cudaGetLastError());
    };

    bool ok = true;
    std::vector<float> got(WARPS * ROWS * CELLS);
    for (int m = 0; m < 3; ++m) {
        launch(modes[m], 1);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(got.data(), scores, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double worst = 0.0, worst_vs_f32 = 0.0, scale = 0.0;
        for (int r = 0; r < ROWS; ++r) {
            for (int c = 0; c < CELLS; ++c) {
                double exact = 0.0;
                for (int i = 0; i < D; ++i) exact += (double) q[r * D + i] * k[c * D + i];
                scale = std::max(scale, std::fabs(exact));
                for (int w = 0; w < WARPS; ++w) {
                    const double g = got[(w * ROWS + r) * CELLS + c];
                    worst        = std::max(worst, std::fabs(g - reference(modes[m], r, c)));
                    worst_vs_f32 = std::max(worst_vs_f32, std::fabs(g - exact));
                }
            }
        }
        const bool right = worst <= 1e-4 * scale;
        ok = ok && right;
        printf("check %-6s largest error against the CPU on the same inputs %.3g (of scores up to %.3g): %s; "
               "against the f32 scores %.3g\n", names[m], worst, scale, right ? "right" : "WRONG", worst_vs_f32);
    }

    // Timed in turns: f16 i8 i8-row, 7 times, after one warm-up launch each.
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    std::vector<float> ms[3];
    for (int m = 0; m < 3; ++m) launch(modes[m], iters);
    for (int turn = 0; turn < 7; ++turn) {
        for (int m = 0; m < 3; ++m) {
            CHECK(cudaEventRecord(start));
            launch(modes[m], iters);
            CHECK(cudaEventRecord(stop));
            CHECK(cudaEventSynchronize(stop));
            float t = 0.0f;
            CHECK(cudaEventElapsedTime(&t, start, stop));
            ms[m].push_back(t);
        }
    }
    const double macs = (double) grid * WARPS * iters * ROWS * CELLS * D;
    float f16_median = 0.0f;
    for (int m = 0; m < 3; ++m) {
        std::vector<float> sorted = ms[m];
        std::sort(sorted.begin(), sorted.end());
        const float median = sorted[sorted.size() / 2];
        if (m == 0) f16_median = median;
        printf("time %-6s median %.3f ms (turns:", names[m], median);
        for (float t : ms[m]) printf(" %.3f", t);
        printf("), %.1f T multiply-adds/s, %.3fx f16's time\n", macs / median / 1e9, median / f16_median);
    }
    printf("grid %d blocks of %d warps, %d iterations of a %dx%d by %dx%d product per warp\n", grid, WARPS, iters, ROWS, D, D, CELLS);
    return ok ? 0 : 1;
}
