/* Helpers of the CUDA kernels: the grid of a grid-stride loop, and a block
 * sum whose order is fixed by the block size (the same inputs give the same
 * bits on every run). */
#ifndef DC_CUDA_BLOCK_REDUCE_CUH
#define DC_CUDA_BLOCK_REDUCE_CUH

#include "cuda_state.h"

namespace dc_cuda {

constexpr int kBlock = 256;
/* the trees of the reductions halve it down to one thread */
static_assert((kBlock & (kBlock - 1)) == 0, "kBlock must be a power of two");

/* Blocks for n elements at kBlock threads each, capped for grid-stride loops. */
inline unsigned grid_for(const dc_ctx *ctx, int64_t n)
{
    int64_t b = (n + kBlock - 1) / kBlock;
    if (b > ctx->cuda->max_blocks)
        b = ctx->cuda->max_blocks;
    return (unsigned)(b > 0 ? b : 1);
}

/* Sum (or maximum) of v over each group of `width` consecutive threads of
 * a block (a power of two dividing the block), by a tree whose order the
 * width fixes, returned to every thread of the group. Every thread of the
 * block calls it. `scratch` is a __shared__ array of a double per thread. */
__device__ __forceinline__ double group_reduce(double v, double *scratch, int width, bool take_max)
{
    const int t = (int)threadIdx.x, lane = t % width;
    scratch[t] = v;
    __syncthreads();
    for (int w = width / 2; w > 0; w /= 2) {
        if (lane < w)
            scratch[t] = take_max ? fmax(scratch[t], scratch[t + w]) : scratch[t] + scratch[t + w];
        __syncthreads();
    }
    const double r = scratch[t - lane];
    __syncthreads();
    return r;
}

/* Sum (or maximum) of v over the kBlock threads of a block, returned to
 * every thread. `scratch` is a __shared__ array of kBlock doubles. */
__device__ __forceinline__ double block_reduce(double v, double *scratch, bool take_max)
{
    return group_reduce(v, scratch, (int)blockDim.x, take_max);
}

} // namespace dc_cuda

#endif /* DC_CUDA_BLOCK_REDUCE_CUH */
