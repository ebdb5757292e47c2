/* Running a listed kernel on the context's backend. */
#include <string.h>

#include "../cuda/cuda_backend.h"
#include "kernels.h"

dc_status dc_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                        const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out)
{
    if (ctx->cuda)
        return dc_cuda_run_kernel(ctx, id, arg, dtype, ndim, shape, n_in, in, n_out, out);
    dc_loop loop;
    memset(&loop, 0, sizeof loop);
    loop.dtype = dtype;
    loop.ndim = ndim;
    memcpy(loop.shape, shape, (size_t)ndim * sizeof *shape);
    loop.n_in = n_in;
    loop.in = in;
    loop.n_out = n_out;
    loop.out = out;
    loop.kernel = dc_cpu_kernel(id, dtype);
    loop.arg = arg;
    return dc_loop_run_cpu(ctx, &loop);
}
