/* The reductions' kernels on the CPU (src/ops/reduce_cpu.c), the
 * counterparts of src/cuda/reduce_cuda.h: the same arguments, host memory,
 * the same element order per output where CUDA walks one output per thread
 * (columns, rows of at most 32, segments: the same bits); longer rows in
 * interleaved lanes (reduce_cpu_kernels.h), as CUDA in its own order. OpenMP
 * over pieces of a fixed size: the same bits whatever the thread count. `kind`: DC_RK_* of
 * src/ops/reduce_formulas.h. */
#ifndef DC_OPS_REDUCE_CPU_H
#define DC_OPS_REDUCE_CPU_H

#include "ops_internal.h"

/* The bytes of host scratch memory dc_cpu_reduce_block needs for this
 * block (0: none): rows long enough to be cut into pieces, and few columns
 * long enough to be cut (reduce_kinds.h), keep the pieces' states there. */
size_t dc_cpu_reduce_scratch(int64_t outer, int64_t len, int64_t inner);

/* Reduces the contiguous [outer, len, inner] block x along len into y
 * ([outer, inner]), with what the adjoint needs per output in nz (dtype)
 * and aux (see reduce_formulas.h; either may be NULL where no adjoint reads
 * it, as for a sum); scratch: dc_cpu_reduce_scratch bytes. */
void dc_cpu_reduce_block(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                         int64_t inner, void *y, void *nz, int64_t *aux, void *scratch);

/* The gradient of the block x (g, the block's layout, overwritten) from
 * the forward's y, nz and aux and the adjoint gy ([outer, inner]). */
void dc_cpu_reduce_block_grad(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                              int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy,
                              void *g);

/* The rows of a piece of a segment reduction: every output's rows are
 * reduced in pieces of this many consecutive rows (by row number), each
 * piece's rows stepped in ascending order from the neutral state, the
 * pieces' states then combined in ascending order (reduce_formulas.h): the
 * CPU and CUDA (src/cuda/reduce_cuda.h) both follow it, whatever their
 * threads. n (a single piece) unless the outputs are few and the rows many;
 * depends on nothing but the sizes. */
int64_t dc_segment_piece_rows(int64_t n, int64_t n_segments, int64_t width);

/* The bytes of host scratch memory dc_cpu_segment_reduce needs: the
 * states of the outputs in each piece. */
size_t dc_cpu_segment_scratch(int64_t n, int64_t n_segments, int64_t width);

/* Reduces the rows of values ([n, width], contiguous) by segment: row s of
 * y ([n_segments, width]) the rows i with index[i] == s, in ascending i, in
 * pieces of dc_segment_piece_rows rows; nz and aux as above (aux of max and
 * min: the winner's row); scratch: dc_cpu_segment_scratch bytes. */
void dc_cpu_segment_reduce(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                           const int64_t *index, int64_t n_segments, void *y, void *nz, int64_t *aux, void *scratch);

/* As dc_cpu_segment_reduce where the rows go in pieces (dc_segment_piece_rows
 * less than n), the segments read from the index as stored (contiguous, of
 * dtype) and checked on the way, without a converted copy: returns the first
 * row whose index is not an integer in 0..n_segments-1 (y, nz, aux then
 * unwritten), n when every one is. */
int64_t dc_cpu_segment_reduce_checked(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const void *index, int64_t n_segments, void *y, void *nz,
                                      int64_t *aux, void *scratch);

/* The gradient of values (g, [n, width], overwritten): row i's from its
 * segment's y, nz, aux and adjoint gy ([n_segments, width]); the segments
 * from index, or where it is NULL from stored_index (as
 * dc_cpu_segment_reduce_checked read it). */
void dc_cpu_segment_reduce_grad(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                int64_t width, const int64_t *index, const void *stored_index, const void *y,
                                const void *nz, const int64_t *aux, const void *gy, void *g);

/* The gradient of max and min added straight into g, the contiguous
 * gradient of the reduced tensor laid out as its elements: output k = o *
 * inner + c (k < outer * inner) adds its adjoint gy[k] to element o *
 * o_stride + aux[k] * inner + c, its winner (none where aux[k] < 0); every
 * other element of g is left as it is (the gradient there is zero).
 * Blocks: o_stride len * inner; segments: outer the segments, inner the
 * width, o_stride 0 (aux the winner's row). */
void dc_cpu_add_winners_grad(dc_dtype dtype, int64_t outer, int64_t inner, int64_t o_stride, const int64_t *aux,
                             const void *gy, void *g);

/* Writes value (rounded to dtype) into the n elements of g: the gradient
 * of a sum of every element, the zeros around the winners of max and min.
 * Large gradients are written with non-temporal stores (reduce_cpu.c). */
void dc_cpu_fill(const dc_ctx *ctx, dc_dtype dtype, void *g, int64_t n, double value);

/* The gradient of max and min (x's winners, as dc_cpu_add_winners_grad
 * places them) written into x's gradient when it is contiguous: assigned
 * (zeros and the winners' adjoints in one pass) where x has no gradient yet,
 * else added at the winners only. *done false (DC_OK): its gradient is not
 * contiguous, nothing written; the caller takes the general path. */
dc_status dc_cpu_winners_grad(dc_tape *tape, dc_tensor *x, int64_t outer, int64_t inner, int64_t o_stride,
                              const int64_t *aux, const void *gy, bool *done);

#endif /* DC_OPS_REDUCE_CPU_H */
