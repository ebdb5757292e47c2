/* The CUDA backend's compute, what the loop engine (src/engine/) and the
 * ops ask of it: loops over broadcasts and matrix products. Its device
 * runtime is in cuda_device.h; the model ops' kernels in nn_cuda.h. Built
 * from src/cuda/ when DC_CUDA is on; src/cuda/no_cuda.c answers "not built
 * with CUDA" otherwise. */
#ifndef DC_CUDA_BACKEND_H
#define DC_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include <dualcast/assoc_abi.h>
#include <dualcast/bfn_abi.h>

#include "../engine/kernels.h"
#include "cuda_device.h"

/* Runs kernel `id` over `shape` (see src/engine/kernels.h and src/engine/loop.h):
 * one thread per element reads every input through its strides; outputs
 * summed over broadcast axes go through a deterministic reduction. */
dc_status dc_cuda_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                             const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out);

/* One 2-D region for dc_cuda_copy_parts: rows x cols elements read from src
 * and written into dst (added to it with `add`), each array read through
 * its row and column strides, in elements. */
typedef struct dc_copy_part {
    const void *src;
    void *dst;
    int64_t rows, cols;
    int64_t src_rs, src_cs, dst_rs, dst_cs;
    int add;
} dc_copy_part;

/* Copies n regions of one dtype, whose destinations must not overlap one
 * another, in one launch per 32 of them (a concatenation and its gradient). */
dc_status dc_cuda_copy_parts(dc_ctx *ctx, dc_dtype dtype, int n, const dc_copy_part *parts);

/* A broadcast function's launcher (primal, dual or adjoint) over a loop,
 * with reductions into the outputs as dc_cuda_run_kernel does. */
dc_status dc_cuda_run_bfn(dc_ctx *ctx, dc_bfn_cuda_launcher launcher, dc_dtype dtype, int ndim, const int64_t *shape,
                          int n_in, const dc_loop_in *in, int n_adj, const dc_loop_in *adj, int n_out,
                          const dc_loop_out *out);

/* An associative operator's launch of each kind (assoc_abi.h), on the
 * context's stream: the launch's CUDA fields are filled here. */
dc_status dc_cuda_run_assoc_scan(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_scan_launch *L);
dc_status dc_cuda_run_assoc_vjp(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_vjp_launch *L);
dc_status dc_cuda_run_assoc_scan_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                         dc_assoc_scan_adjoint_launch *L);
dc_status dc_cuda_run_assoc_reduce_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                           dc_assoc_reduce_adjoint_launch *L);

/* c = a @ b + beta * c for row-major matrices with leading dimensions (in
 * elements) and a transpose flag each, batched with element strides. */
dc_status dc_cuda_gemm(dc_ctx *ctx, dc_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *a, int64_t lda,
                       int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, double beta, void *c,
                       int64_t ldc, int64_t stride_c, int batch);

#endif /* DC_CUDA_BACKEND_H */
