/* Device entry points of the model ops and optimizers (src/cuda/nn.cu). All
 * pointers are device memory; row indices are int64 on the device. */
#ifndef DC_CUDA_NN_H
#define DC_CUDA_NN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../internal.h"
#include "cuda_backend.h"

/* What dc_cuda_grad_reduce computes over the gradients. */
typedef enum { DC_GRAD_SUM_SQUARES, DC_GRAD_MAX_ABS } dc_grad_reduction;

dc_status dc_cuda_gather_rows(dc_ctx *ctx, dc_dtype dtype, const void *table, int64_t rs, int64_t cs,
                              const int64_t *rows, int64_t n, int64_t width, void *out);
/* grad[id] += gy[position] for every position of the ids, from their
 * groups (dc_index_groups: values, starts, positions), each sum in position
 * order. */
dc_status dc_cuda_scatter_rows(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                               const int64_t *groups, int64_t n_groups, int64_t width, const void *gy);
dc_status dc_cuda_cross_entropy(dc_ctx *ctx, dc_dtype dtype, const void *logits, int64_t n, int64_t c,
                                const int64_t *targets, double *lse, double *loss_rows, void *out);
dc_status dc_cuda_cross_entropy_grad(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                                     const void *logits, int64_t n, int64_t c, const int64_t *targets,
                                     const double *lse, const void *gy, bool add);
dc_status dc_cuda_adam(dc_ctx *ctx, dc_dtype dtype, int64_t n, void *w, const void *g, void *m, void *v, double lr_t,
                       double b1, double b2, double eps_t, double decay);
dc_status dc_cuda_sgd(dc_ctx *ctx, dc_dtype dtype, int64_t n, void *w, const void *g, void *buf, double lr, double mu);
/* A reduction over every element of the gradients of params[0..n) (a tensor
 * without one adds nothing) into *total, with one copy to the host:
 * DC_GRAD_SUM_SQUARES sums (x * scale)^2, DC_GRAD_MAX_ABS takes max |x|
 * (scale unused). */
dc_status dc_cuda_grad_reduce(dc_ctx *ctx, int n, dc_tensor *const *params, dc_grad_reduction kind, double scale,
                              double *total);
dc_status dc_cuda_scale(dc_ctx *ctx, dc_dtype dtype, void *x, int64_t n, double s);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_NN_H */
