/* NumPy broadcasting rules: shapes are aligned at their last axis; two sizes
 * match when equal or when one is 1; a missing leading axis counts as 1. A
 * size of 0 broadcasts with 1 and with 0 only. */
#ifndef DC_ENGINE_SHAPE_H
#define DC_ENGINE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include <dualcast/tensor.h>

/* The broadcast shape of n shapes. On failure returns false with *bad_i and
 * *bad_j the two operands that conflict and *bad_axis the axis, counted from
 * the end (-1 is the last). */
bool dc_broadcast_shape(int n, const int *ndims, const int64_t *const *shapes, int *out_ndim,
                        int64_t *out_shape, int *bad_i, int *bad_j, int *bad_axis);

/* Strides (in elements) that read a tensor of shape t_shape / t_strides as if
 * it had the broadcast shape: 0 along broadcast and size-1 axes. */
void dc_broadcast_strides(int t_ndim, const int64_t *t_shape, const int64_t *t_strides, int ndim,
                          const int64_t *shape, int64_t *strides);

/* Row-major strides of `shape`, and its number of elements. */
void dc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
int64_t dc_shape_numel(int ndim, const int64_t *shape);

/* Whether strides walk `shape` in row-major order without gaps (axes of size
 * 1 may have any stride). */
bool dc_strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides);

#endif /* DC_ENGINE_SHAPE_H */
