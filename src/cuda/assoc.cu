/* The CUDA side of user-written associative operators: their launchers
 * (built with the operator, broadcast/assoc_cuda_instance.cuh) run on the
 * context's stream with its grid cap. */
#include "cuda_state.h"

namespace
{
const int kAssocBlock = 256;

template <typename Launch> void place(dc_ctx *ctx, Launch *L)
{
    L->block = kAssocBlock;
    L->max_blocks = ctx->cuda->max_blocks;
    L->stream = ctx->cuda->stream;
}

dc_status launched(dc_ctx *ctx, int err, const char *what)
{
    ctx->cuda->launches++;
    return dc_cuda_check(ctx, (cudaError_t)err, what);
}
} // namespace

extern "C" dc_status dc_cuda_run_assoc_scan(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_scan_launch *L)
{
    DC_CUDA_ENTER(ctx);
    place(ctx, L);
    return launched(ctx, kernels->scan(L), "associative operator's scan kernel");
}

extern "C" dc_status dc_cuda_run_assoc_vjp(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_vjp_launch *L)
{
    DC_CUDA_ENTER(ctx);
    place(ctx, L);
    return launched(ctx, kernels->vjp(L), "associative operator's vector-Jacobian kernel");
}

extern "C" dc_status dc_cuda_run_assoc_scan_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                                    dc_assoc_scan_adjoint_launch *L)
{
    DC_CUDA_ENTER(ctx);
    place(ctx, L);
    return launched(ctx, kernels->scan_adjoint(L), "associative operator's scan adjoint kernel");
}

extern "C" dc_status dc_cuda_run_assoc_reduce_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                                      dc_assoc_reduce_adjoint_launch *L)
{
    DC_CUDA_ENTER(ctx);
    place(ctx, L);
    return launched(ctx, kernels->reduce_adjoint(L), "associative operator's reduction adjoint kernel");
}
