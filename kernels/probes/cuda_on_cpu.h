// CUDA kernels run on the CPU, for the emulators of our kernel candidates (kernels/probes/*_emulated.cpp):
// the few parts of CUDA and ggml-cuda the kernels use, as stand-ins. Every thread of a block is a
// thread; a warp's shuffle is an exchange among its 32 threads at a barrier; __syncthreads a barrier
// of the block; __shared__ memory one array a kernel instance (blocks run one at a time, so that is
// one a block). So a kernel's lanes, registers, butterflies and stores run as written.
#pragma once

#include <barrier>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__

struct dim3_ { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3_ threadIdx, blockIdx, blockDim;
static dim3_ gridDim;

static constexpr int ggml_cuda_get_physical_warp_size() { return 32; }
static void ggml_cuda_pdl_lc() {}
static void ggml_cuda_pdl_sync() {}
template <typename D> static D ggml_cuda_cast(float v) { return D(v); }

// A block: its threads meet at `block` for __syncthreads, and each warp's 32 at its own barrier
// for a shuffle (a warp is threads 32w .. 32w+31 of the block, x fastest, as CUDA numbers them).
struct warp_state {
    std::barrier<> sync{32};
    float slot[32];
};
struct block_state {
    explicit block_state(int threads) : block(threads), warps(threads / 32) {}
    std::barrier<> block;
    std::vector<warp_state> warps;
};
static thread_local block_state * current_block;
static thread_local int thread_in_block;

static void __syncthreads() { current_block->block.arrive_and_wait(); }

static float __shfl_xor_sync(unsigned, float v, int lane_mask, int width) {
    warp_state & warp = current_block->warps[thread_in_block / 32];
    const int lane = thread_in_block % 32;
    warp.slot[lane] = v;
    warp.sync.arrive_and_wait();
    const int src = lane ^ lane_mask;  // as CUDA: outside its width-wide segment a lane reads its own
    const float got = (src / width == lane / width) ? warp.slot[src] : v;
    warp.sync.arrive_and_wait();
    return got;
}

// Runs `kernel` (a callable: the kernel with its arguments) on a grid of blocks, block after block,
// each block's threads at once. A warp that returns early must return whole (as the kernels here
// do: a row a warp), or its lanes still in the kernel would wait at the next shuffle for ever.
template <typename Kernel>
static void launch(dim3_ grid, dim3_ block, Kernel kernel) {
    gridDim = grid;
    const int threads = int(block.x * block.y * block.z);
    for (unsigned bz = 0; bz < grid.z; ++bz) {
        for (unsigned by = 0; by < grid.y; ++by) {
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                block_state state(threads);
                std::vector<std::thread> pool;
                for (int t = 0; t < threads; ++t) {
                    pool.emplace_back([&, t] {
                        current_block = &state;
                        thread_in_block = t;
                        blockDim = block;
                        blockIdx = {bx, by, bz};
                        threadIdx = {unsigned(t) % block.x, unsigned(t) / block.x % block.y,
                                     unsigned(t) / (block.x * block.y)};
                        kernel();
                    });
                }
                for (auto & th : pool) th.join();
            }
        }
    }
}
