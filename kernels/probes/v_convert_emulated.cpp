// Candidate H's conversions of a q8_0 V value to float (docs/kernel-log/2026-12-04-run34-v-convert.patch.txt)
// run on the CPU, before a GPU does, against the conversion they replace.
//
// tests/kernels/test_v_convert_candidate.py cuts kvstudio_q8_0_value and dequantize_V_q8_0 from the
// patched fattn-common.cuh into v_convert_kernels.inc, each PTX prmt there rewritten as a call of
// ptx_prmt below (the byte permute as the PTX ISA defines its default mode: each selector nibble
// picks one of the 8 bytes of its two sources, and with its top bit set repeats that byte's sign
// bit instead). Then for every value a q8_0 byte can hold, at every place in a block, and runs of 2, 4
// and 8 values, variants 1 (sign-extending permute, then a 32-bit int converted) and 2 (the byte's
// sign flipped and permuted into the float 2^23, then 2^23 + 128 subtracted) must give exactly the
// floats variant 0 (the int8 converted, as upstream) gives. Prints the counts; exits 0 if all are
// the same, 1 if not.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#define __device__
#define __forceinline__ inline
#define __restrict__
#define GGML_CUDA_RESTRICT

typedef _Float16 half;
constexpr int QK8_0 = 32;
struct block_q8_0 { half d; int8_t qs[QK8_0]; };

static float __int_as_float(int bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

template <int nbytes, int alignment>
static void ggml_cuda_memcpy_1(void * dst, const void * src) {
    static_assert(nbytes % alignment == 0, "bad size");
    memcpy(dst, src, nbytes);
}

// prmt.b32 d, a, b, c (default mode)
static int ptx_prmt(uint32_t a, uint32_t b, uint32_t c) {
    const uint64_t bytes = (uint64_t) b << 32 | a;  // bytes 0-3 from a, 4-7 from b
    uint32_t d = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t nibble = (c >> (4 * i)) & 0xF;
        uint32_t byte = (bytes >> (8 * (nibble & 7))) & 0xFF;
        if (nibble & 8) {
            byte = (byte & 0x80) ? 0xFF : 0x00;
        }
        d |= byte << (8 * i);
    }
    return (int) d;
}

#include "v_convert_kernels.inc"

template <int ne>
static size_t differing(const block_q8_0 * blocks, int n_blocks, size_t & compared) {
    size_t bad = 0;
    for (int b = 0; b < n_blocks; ++b) {
        for (int i0 = 0; i0 < QK8_0; i0 += ne) {
            float want[ne], c1[ne], c2[ne];
            const int64_t at = (int64_t) b * QK8_0 + i0;
            dequantize_V_q8_0<float, ne, 0>(blocks, want, at);
            dequantize_V_q8_0<float, ne, 1>(blocks, c1, at);
            dequantize_V_q8_0<float, ne, 2>(blocks, c2, at);
            bad += memcmp(want, c1, sizeof want) != 0;
            bad += memcmp(want, c2, sizeof want) != 0;
            compared += 2 * ne;
        }
    }
    return bad;
}

int main() {
    // 256 x 8 blocks: every byte value at every place of a block, with scales of both signs and a
    // few sizes (0 too: a block of zeros is quantized with d = 0)
    const float scales[] = {1.0f, -0.0123f, 3.5e-3f, 0.0f, 0.75f, -2.0f, 1.0e-4f, 65.0f};
    const int n_blocks = 256 * 8;
    block_q8_0 * blocks = new block_q8_0[n_blocks];
    for (int b = 0; b < n_blocks; ++b) {
        blocks[b].d = half(scales[b % 8]);
        for (int j = 0; j < QK8_0; ++j) {
            blocks[b].qs[j] = int8_t((b / 8 + 37 * j) & 0xFF);
        }
    }
    size_t compared = 0;
    const size_t bad = differing<2>(blocks, n_blocks, compared) + differing<4>(blocks, n_blocks, compared) +
                       differing<8>(blocks, n_blocks, compared);
    printf("%zu values converted by variants 1 and 2: %zu runs differ from variant 0\n", compared, bad);
    delete[] blocks;
    return bad == 0 ? 0 : 1;
}
