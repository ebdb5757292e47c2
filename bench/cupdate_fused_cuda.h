/* The hand-fused c-update on the GPU: forward and gradient in one kernel, as
 * an expert would write it without AD. It bounds how fast any AD approach
 * can be on the device; cupdate_fused.h is the same on the CPU. */
#ifndef DC_BENCH_CUPDATE_FUSED_CUDA_H
#define DC_BENCH_CUPDATE_FUSED_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queues the kernel on `stream` (a cudaStream_t as void *). All pointers are
 * device memory: rows x cols matrices c, f, i, g and the adjoint of the
 * output; control z, zb hold one value per row (per_row) or per column.
 * Writes the output and the four gradients. Returns 0 or a CUDA error code
 * (gpu_error_string in gpu_timing.h gives its text). */
int cupdate_fused_cuda(int64_t rows, int64_t cols, bool per_row, const float *z, const float *zb, const float *c,
                       const float *f, const float *i, const float *g, const float *adj, float *out, float *gc,
                       float *gf, float *gi, float *gg, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DC_BENCH_CUPDATE_FUSED_CUDA_H */
