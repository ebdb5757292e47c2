/* Many small copies in one launch (dc_cuda_copy_parts): a concatenation's
 * parts, or its gradient's, one kernel for up to kPartsPerLaunch of them
 * instead of one kernel each. */
#include <string.h>

#include "block_reduce.cuh"
#include "cuda_backend.h"
#include "cuda_state.h"

using dc_cuda::kBlock;

namespace {

constexpr int kPartsPerLaunch = 32; /* 2 KiB of parts: well inside a launch's 4 KiB of arguments */

struct parts_params {
    int n;
    unsigned first_block[kPartsPerLaunch + 1]; /* part k's blocks: first_block[k] .. first_block[k + 1] - 1 */
    dc_copy_part part[kPartsPerLaunch];
};

/* Each block copies (or adds) a share of one part's elements. */
template <typename T> __global__ void copy_parts_kernel(parts_params p)
{
    int k = 0;
    while (k + 1 < p.n && blockIdx.x >= p.first_block[k + 1])
        ++k;
    const dc_copy_part q = p.part[k];
    const int64_t n = q.rows * q.cols;
    const int64_t step = (int64_t)(p.first_block[k + 1] - p.first_block[k]) * blockDim.x;
    for (int64_t e = (int64_t)(blockIdx.x - p.first_block[k]) * blockDim.x + threadIdx.x; e < n; e += step) {
        const int64_t r = e / q.cols, c = e - r * q.cols;
        const T v = ((const T *)q.src)[r * q.src_rs + c * q.src_cs];
        T *d = (T *)q.dst + (r * q.dst_rs + c * q.dst_cs);
        *d = q.add ? *d + v : v;
    }
}

} // namespace

extern "C" dc_status dc_cuda_copy_parts(dc_ctx *ctx, dc_dtype dtype, int n, const dc_copy_part *parts)
{
    DC_CUDA_ENTER(ctx);
    const int64_t cap = ctx->cuda->max_blocks;
    for (int begin = 0; begin < n;) {
        parts_params p;
        memset(&p, 0, sizeof p);
        unsigned blocks = 0;
        /* the next parts with elements, each given blocks for its size, all
         * of them together at most the grid cap */
        for (; begin < n && p.n < kPartsPerLaunch; ++begin) {
            const int64_t numel = parts[begin].rows * parts[begin].cols;
            if (numel <= 0)
                continue;
            int64_t want = (numel + kBlock - 1) / kBlock;
            const int64_t share = cap / kPartsPerLaunch > 0 ? cap / kPartsPerLaunch : 1;
            if (want > share)
                want = share;
            p.first_block[p.n] = blocks;
            p.part[p.n++] = parts[begin];
            blocks += (unsigned)want;
        }
        if (p.n == 0)
            break;
        p.first_block[p.n] = blocks;
        cudaStream_t stream = ctx->cuda->stream;
        if (dtype == DC_F32)
            copy_parts_kernel<float><<<blocks, kBlock, 0, stream>>>(p);
        else
            copy_parts_kernel<double><<<blocks, kBlock, 0, stream>>>(p);
        const dc_status st = dc_cuda_launched(ctx, 1, "copy of parts");
        if (st != DC_OK)
            return st;
    }
    return DC_OK;
}
