/* Device entry points of the reductions (src/cuda/reduce.cu), the
 * counterparts of src/ops/reduce_cpu.h: the same arguments in device
 * memory. None makes the host wait; none uses atomics. `kind`: DC_RK_* of
 * src/ops/reduce_formulas.h. */
#ifndef DC_CUDA_REDUCE_H
#define DC_CUDA_REDUCE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../internal.h"
#include "cuda_backend.h"

/* The block [outer, len, inner] reduced along len (y, nz, aux: [outer,
 * inner]). Rows (inner == 1) of more than 32 elements: a block of threads
 * per row, a fixed-order tree over its threads (the product's and
 * log-sum-exp's last bits may differ from the CPU's); otherwise a thread
 * per output walking len in order (the CPU's order). */
dc_status dc_cuda_reduce_block(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, void *y, void *nz, int64_t *aux);

/* The block's gradient (g overwritten), a thread per element. */
dc_status dc_cuda_reduce_block_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                                    int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy,
                                    void *g);

/* The rows of values ([n, width]) reduced by segment, grouped by
 * dc_cuda_group_indices (start: n_segments + 1 entries; positions
 * ascending within each segment): a thread per segment and column walking
 * its rows in ascending order, in pieces of piece_rows rows
 * (dc_segment_piece_rows: the CPU's order, the same bits). */
dc_status dc_cuda_segment_reduce(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t width,
                                 const int64_t *start, const int64_t *positions, int64_t n_segments,
                                 int64_t piece_rows, void *y, void *nz, int64_t *aux);

/* The values' gradient (g, [n, width], overwritten), a thread per element. */
dc_status dc_cuda_segment_reduce_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const int64_t *index, const void *y, const void *nz,
                                      const int64_t *aux, const void *gy, void *g);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_REDUCE_H */
