/* NumPy broadcasting rules: shapes are aligned at their last axis; two sizes
 * match when equal or when one is 1; a missing leading axis counts as 1. A
 * size of 0 broadcasts with 1 and with 0 only. */
#ifndef DC_BROADCAST_SHAPE_H
#define DC_BROADCAST_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "../src/internal.h"

/* The broadcast shape of n shapes. On failure returns false with *bad_i and
 * *bad_j the two operands that conflict and *bad_axis the axis, counted from
 * the end (-1 is the last). */
bool dc_broadcast_shape(int n, const int *ndims, const int64_t *const *shapes, int *out_ndim,
                        int64_t *out_shape, int *bad_i, int *bad_j, int *bad_axis);

/* Strides (in elements) that read a tensor of shape t_shape / t_strides as if
 * it had the broadcast shape: 0 along broadcast and size-1 axes. */
void dc_broadcast_strides(int t_ndim, const int64_t *t_shape, const int64_t *t_strides, int ndim,
                          const int64_t *shape, int64_t *strides);

/* Broadcasts n tensors for `op`: checks for NULL, a common dtype and
 * compatible shapes, naming the operands with `labels` in messages. */
dc_status dc_broadcast_check(dc_ctx *ctx, const char *op, int n, dc_tensor *const *tensors,
                             const char *const *labels, int *out_ndim, int64_t *out_shape);

#endif /* DC_BROADCAST_SHAPE_H */
