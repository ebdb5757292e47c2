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

/* Sum (or maximum) of v over the kBlock threads of a block, returned to
 * every thread. `scratch` is a __shared__ array of kBlock doubles. */
__device__ __forceinline__ double block_reduce(double v, double *scratch, bool take_max)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            scratch[threadIdx.x] = take_max ? fmax(scratch[threadIdx.x], scratch[threadIdx.x + w])
                                            : scratch[threadIdx.x] + scratch[threadIdx.x + w];
        __syncthreads();
    }
    const double r = scratch[0];
    __syncthreads();
    return r;
}

} // namespace dc_cuda

#endif /* DC_CUDA_BLOCK_REDUCE_CUH */
