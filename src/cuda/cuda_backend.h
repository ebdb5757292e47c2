/* What the core library asks of the CUDA backend. Built from src/cuda/ when
 * DC_CUDA is on; src/cuda/no_cuda.c answers "not built with CUDA" otherwise. */
#ifndef DC_CUDA_BACKEND_H
#define DC_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../internal.h"
#include "../ops/kernels.h"

/* Sets ctx->cuda and ctx->device_name when device ctx->cuda_device works.
 * Returns DC_OK, or DC_ERR_DEVICE / DC_ERR_UNSUPPORTED with the reason in
 * ctx's error. */
dc_status dc_cuda_init(dc_ctx *ctx);
void dc_cuda_shutdown(dc_ctx *ctx);

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes);
void dc_cuda_free(dc_ctx *ctx, void *ptr);
/* Sets every byte to `value`. */
dc_status dc_cuda_memset(dc_ctx *ctx, void *ptr, int value, size_t bytes);
dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_cuda_synchronize(dc_ctx *ctx);
/* Copies device memory of src_ctx into device memory of dst_ctx (both CUDA,
 * on one device or two): after src_ctx's queued work, and done on return. */
dc_status dc_cuda_copy_between(dc_ctx *dst_ctx, void *dst, dc_ctx *src_ctx, const void *src, size_t bytes);
dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx);

/* Runs kernel `id` over `shape` (see src/ops/kernels.h and broadcast/loop.h):
 * one thread per element reads every input through its strides; outputs
 * summed over broadcast axes go through a deterministic reduction. */
dc_status dc_cuda_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                             const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out);

/* A broadcast function's launcher (primal, dual or adjoint) over a loop,
 * with reductions into the outputs as dc_cuda_run_kernel does. */
dc_status dc_cuda_run_bfn(dc_ctx *ctx, dc_bfn_cuda_launcher launcher, dc_dtype dtype, int ndim, const int64_t *shape,
                          int n_in, const dc_loop_in *in, int n_adj, const dc_loop_in *adj, int n_out,
                          const dc_loop_out *out);

/* c = a @ b + beta * c for row-major matrices with leading dimensions (in
 * elements) and a transpose flag each, batched with element strides. */
dc_status dc_cuda_gemm(dc_ctx *ctx, dc_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *a, int64_t lda,
                       int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, double beta, void *c,
                       int64_t ldc, int64_t stride_c, int batch);

#endif /* DC_CUDA_BACKEND_H */
