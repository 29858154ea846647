// What F's rope_fwht kernel (candidates F and I) uses from ggml-cuda beside CUDA itself, for the
// emulators that run it on the CPU (rope_fwht_emulated.cpp, scale_fwht_emulated.cpp): f16 as the
// compiler's _Float16, ggml's q8_0 block, and warp_reduce_max over cuda_on_cpu.h's warp shuffles.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda_on_cpu.h"

typedef _Float16 half;

constexpr int QK8_0 = 32;
struct block_q8_0 { half d; int8_t qs[QK8_0]; };

template <int width = 32> static float warp_reduce_max(float x) {
    for (int offset = width / 2; offset > 0; offset >>= 1) {
        x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, offset, width));
    }
    return x;
}
