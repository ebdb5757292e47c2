/* Simplifying a loop's index space before running it: size-1 axes are
 * dropped, and neighbouring axes along which every array is contiguous are
 * merged, so that a loop over dense arrays becomes one long axis. The CPU
 * engine and the CUDA kernels plan their loops with it. */
#ifndef DC_BROADCAST_COALESCE_H
#define DC_BROADCAST_COALESCE_H

#include <stdint.h>

#include <dualcast/tensor.h>

/* Coalesces `shape` (ndim axes) for n arrays whose strides are strides[a]
 * (in elements, one per axis). Writes at least one axis: *out_ndim, and
 * out_shape and out_strides[a] for the result. */
void dc_coalesce(int ndim, const int64_t *shape, int n_arrays, const int64_t *const *strides, int *out_ndim,
                 int64_t *out_shape, int64_t (*out_strides)[DC_MAX_DIMS]);

#endif /* DC_BROADCAST_COALESCE_H */
