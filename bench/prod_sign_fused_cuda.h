/* The hand-fused kernel of the arity sweep: y = prod_j s(x_j) with
 * s(x) = x > 0.5 ? x : -x, and the gradient of every x_j, in one pass. */
#ifndef DC_BENCH_PROD_SIGN_FUSED_CUDA_H
#define DC_BENCH_PROD_SIGN_FUSED_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PROD_SIGN_MAX_ARITY = 10 };

/* Queues the kernel on `stream` (a cudaStream_t as void *). x[0..arity-1]
 * and grad[0..arity-1] are n-element device arrays, as are adj (the output
 * adjoint) and out. arity is 1 to PROD_SIGN_MAX_ARITY. Returns 0 or a CUDA
 * error code (gpu_error_string in gpu_timing.h gives its text). */
int prod_sign_fused_cuda(int arity, int64_t n, const float *const *x, const float *adj, float *out, float *const *grad,
                         void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DC_BENCH_PROD_SIGN_FUSED_CUDA_H */
