/* The axes a reduction or a scan runs along, and the input seen as a
 * [outer, len, inner] block: `len` elements along the run of axes, `inner`
 * elements after it, `outer` before. Reductions (sum, prod, max, min,
 * logsumexp, user operators) and scans share it. */
#ifndef DC_OPS_AXES_H
#define DC_OPS_AXES_H

#include "ops_internal.h"

typedef struct dc_axes {
    bool reduced[DC_MAX_DIMS]; /* axis d is reduced (scanned) */
    int ndim;                  /* the input's */
    int64_t kept_shape[DC_MAX_DIMS]; /* the input's shape, 1 on reduced axes */
    int out_ndim;                    /* the result's shape (keepdims or not) */
    int64_t out_shape[DC_MAX_DIMS];
    unsigned mask; /* bit d set: axis d reduced */
    int64_t outer, len, inner;
} dc_axes;

/* Reads n_axes axes (negative ones count from the end; n_axes == 0: every
 * axis) of x for `op`, refusing an axis out of range or given twice with
 * DC_ERR_ARG and a message naming op and x's shape. Fills every member of
 * *ax; outer, len, inner as if the reduced axes were moved last, in order
 * (outer: the product of the kept axes, inner 1), or, where the reduced
 * axes are already one run, as they lie. */
dc_status dc_axes_parse(dc_ctx *ctx, const char *op, const dc_tensor *x, int n_axes, const int *axes,
                        bool keepdims, dc_axes *ax);

/* Whether x's elements lie as the [outer, len, inner] block of *ax says,
 * without a copy: x contiguous and its reduced axes one run. */
bool dc_axes_in_place(const dc_tensor *x, const dc_axes *ax);

/* Whether the block of *ax lists x's elements in x's own (row-major)
 * order: its reduced axes one run (x itself or a contiguous copy). */
bool dc_axes_one_run(const dc_axes *ax);

/* x as a contiguous [outer, len, inner] block: x itself where
 * dc_axes_in_place, else a tape copy with the kept axes first and the
 * reduced ones last (inner 1, as *ax says). NULL when out of memory. */
const dc_tensor *dc_axes_block(dc_tape *tape, const dc_tensor *x, const dc_axes *ax);

/* A gradient `block_grad` computed for the block of dc_axes_block (a
 * contiguous tensor of x's element count, laid out as the block) added
 * into x's gradient. */
dc_status dc_axes_add_block_grad(dc_tape *tape, dc_tensor *x, const dc_axes *ax, const void *block_grad);

/* Where a kernel writes x's gradient computed as a contiguous block of x's
 * elements: x's gradient itself (*direct true; call dc_grad_done(x) once
 * written) where the block lists x's elements in their own order
 * (block_is_x), the gradient is contiguous, and it holds no value yet, or,
 * with add not NULL, holds one (*add true: the kernel adds); else x's
 * element count of tape memory (*direct false), added afterwards
 * (dc_axes_add_block_grad). */
dc_status dc_axes_grad_target(dc_tape *tape, dc_tensor *x, bool block_is_x, void **g, bool *direct, bool *add);

#endif /* DC_OPS_AXES_H */
