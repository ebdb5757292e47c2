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

/* The bytes of device scratch memory dc_cuda_reduce_block needs for the
 * block [outer, len, inner] (0: none): the states of its rows' pieces or
 * of its columns' cuts. */
size_t dc_cuda_reduce_scratch(int64_t outer, int64_t len, int64_t inner);

/* The block [outer, len, inner] reduced along len (y, nz, aux: [outer,
 * inner]). Rows (inner == 1) of more than 32 elements: a block of threads
 * per row, a fixed-order tree over its threads; rows of more than 16384
 * elements in pieces of 16384, a block each, the pieces' states then
 * combined by a fixed-order tree per row (the product's and log-sum-exp's
 * last bits may differ from the CPU's); few long columns
 * (dc_rk_column_cuts, src/ops/reduce_kinds.h) in cuts, a thread per cut,
 * the cuts' states then combined in order (the CPU's cuts and order); otherwise
 * a thread per output walking len in order (the CPU's order). scratch:
 * dc_cuda_reduce_scratch bytes of device memory. */
dc_status dc_cuda_reduce_block(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, void *y, void *nz, int64_t *aux, void *scratch);

/* The block's gradient (g overwritten), a thread per element. */
dc_status dc_cuda_reduce_block_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                                    int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy,
                                    void *g);

/* The bytes of device scratch memory dc_cuda_segment_reduce needs (0:
 * none): the states of the outputs in each piece of piece_rows rows. */
size_t dc_cuda_segment_scratch(int64_t n, int64_t n_segments, int64_t width, int64_t piece_rows);

/* The rows of values ([n, width]) reduced by segment, grouped by
 * dc_cuda_group_indices (start: n_segments + 1 entries; positions
 * ascending within each segment), in pieces of piece_rows rows
 * (dc_segment_piece_rows): a thread per piece, segment and column walking
 * the segment's rows of the piece in ascending order, then a thread per
 * segment and column combining the pieces' states in order (the CPU's
 * order, the same bits). scratch: dc_cuda_segment_scratch bytes of device
 * memory. */
dc_status dc_cuda_segment_reduce(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                                 const int64_t *start, const int64_t *positions, int64_t n_segments, int64_t piece_rows,
                                 void *y, void *nz, int64_t *aux, void *scratch);

/* The values' gradient (g, [n, width], overwritten), a thread per element. */
dc_status dc_cuda_segment_reduce_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const int64_t *index, const void *y, const void *nz,
                                      const int64_t *aux, const void *gy, void *g);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_REDUCE_H */
