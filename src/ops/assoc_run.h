/* Running an associative operator's kernels (include/dualcast/assoc_abi.h)
 * where the context computes: on the CPU, the work items split among the
 * pool's threads in pieces of a fixed size; on CUDA, through the launchers.
 * Used by the ops of assoc.c. */
#ifndef DC_OPS_ASSOC_RUN_H
#define DC_OPS_ASSOC_RUN_H

#include "ops_internal.h"

/* Runs one launch of each kind; `launch`'s CUDA fields are filled here. */
dc_status dc_assoc_run_scan(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, dc_assoc_scan_launch *launch);
dc_status dc_assoc_run_vjp(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, dc_assoc_vjp_launch *launch);
dc_status dc_assoc_run_scan_adjoint(dc_tape *tape, const dc_assoc *op, dc_dtype dtype,
                                    dc_assoc_scan_adjoint_launch *launch);
dc_status dc_assoc_run_reduce_adjoint(dc_tape *tape, const dc_assoc *op, dc_dtype dtype,
                                      dc_assoc_reduce_adjoint_launch *launch);

/* The scan (y not NULL: arrays of x's size) or the reduction (total not
 * NULL: [outer, inner] arrays) of x, k [outer, len, inner] blocks, along
 * len with `flags` (DC_ASSOC_EXCLUSIVE, DC_ASSOC_REVERSE): every row in
 * pieces of DC_ASSOC_CHUNK, then, where a row has several, the pieces'
 * totals combined in order and each piece scanned again from its carry.
 * piece_totals, when not NULL and a row has several pieces, receives the
 * pieces' totals ([outer, n_chunks, inner] tape arrays, from the neutral
 * element, in the walk's direction); it is left alone otherwise. */
dc_status dc_assoc_scan_blocks(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, int64_t outer, int64_t len,
                               int64_t inner, const void *const *x, void *const *y, void *const *total, int flags,
                               const void **piece_totals);

/* k arrays of n elements of dtype in tape memory; false when out of memory. */
bool dc_assoc_alloc_fields(dc_tape *tape, int k, int64_t n, dc_dtype dtype, void **arrays);

#endif /* DC_OPS_ASSOC_RUN_H */
