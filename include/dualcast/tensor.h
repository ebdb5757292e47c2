/* Tensors: n-dimensional arrays of float32 or float64 on the context's device.
 *
 * Two lifetimes:
 *   - persistent tensors (parameters, data) come from dc_tensor_new and friends;
 *     the caller owns them and frees them with dc_tensor_free;
 *   - tape tensors are the results of ops and of dc_tape_tensor_new; the tape
 *     owns them, and they live until dc_tape_reset or dc_tape_free.
 * Shapes follow NumPy: rank 0 (a scalar) to DC_MAX_DIMS, row-major. */
#ifndef DUALCAST_TENSOR_H
#define DUALCAST_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DC_MAX_DIMS 8

typedef enum dc_dtype {
    DC_F32 = 0,
    DC_F64 = 1,
} dc_dtype;

typedef struct dc_tensor dc_tensor;

/* "f32" or "f64"; "unknown" for any other value. */
const char *dc_dtype_name(dc_dtype dtype);

/* Bytes per element: 4 or 8; 0 for an unknown dtype. */
size_t dc_dtype_size(dc_dtype dtype);

/* A new persistent tensor filled with zeros. `shape` may be NULL when ndim is
 * 0. Returns NULL on a bad shape or when out of memory (see dc_last_error). */
dc_tensor *dc_tensor_new(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape);

/* A new persistent tensor holding a copy of `data`: numel elements of the
 * tensor's dtype, row-major, in host memory. */
dc_tensor *dc_tensor_from_host(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape,
                               const void *data);

/* Frees a persistent tensor and its gradient. NULL is allowed. Tape tensors
 * and gradients (dc_tensor_grad) are left alone: their tape or their tensor
 * frees them. */
void dc_tensor_free(dc_tensor *tensor);

/* Names the tensor for error messages (copied, truncated to 31 characters). */
void dc_tensor_set_name(dc_tensor *tensor, const char *name);

/* The tensor's name, or "" when it has none. */
const char *dc_tensor_name(const dc_tensor *tensor);

/* The element type, and the number of dimensions (0 for a scalar). */
dc_dtype dc_tensor_dtype(const dc_tensor *tensor);
int dc_tensor_ndim(const dc_tensor *tensor);
/* The shape: ndim entries owned by the tensor. */
const int64_t *dc_tensor_shape(const dc_tensor *tensor);
/* Size of one dimension; a negative axis counts from the end. 0 for an axis
 * the tensor does not have (and for NULL). */
int64_t dc_tensor_dim(const dc_tensor *tensor, int axis);
/* The number of elements (the product of the shape; 1 for a scalar). */
int64_t dc_tensor_numel(const dc_tensor *tensor);
/* The context the tensor was made in. */
dc_ctx *dc_tensor_ctx(const dc_tensor *tensor);

/* Writes the shape as "[2, 3]" into buf (always NUL-terminated); returns buf. */
char *dc_tensor_shape_str(const dc_tensor *tensor, char *buf, size_t size);

/* Marks a leaf tensor as a parameter whose gradient backward computes (or
 * unmarks it). The output of a recorded op (one with an input that requires
 * a gradient, recording on) is not a leaf: DC_ERR_ARG. */
dc_status dc_tensor_set_requires_grad(dc_tensor *tensor, bool requires_grad);
/* Whether backward computes a gradient for the tensor (set on a leaf, or
 * recorded from an input that requires one). */
bool dc_tensor_requires_grad(const dc_tensor *tensor);

/* The accumulated gradient of the tensor, or NULL when no gradient has
 * flowed to it since it was made or zeroed. It has the tensor's shape and
 * dtype. A persistent tensor's gradient is a contiguous tensor it owns: it
 * outlives tape resets and is freed with the tensor. A tape tensor's gradient lives until dc_tape_reset and may be a
 * view that is not contiguous: a slice's is a view into its base's
 * gradient, and the output seeded by dc_backward_with gets a view of the
 * adjoint (see there). Check dc_tensor_is_contiguous before reading
 * dc_tensor_data as a dense array. Gradients accumulate over backward passes
 * until dc_tensor_zero_grad: the first pass after it writes the gradient
 * (what the memory held before is never read), later passes add to it. An
 * added gradient is a floating-point sum of the stored value and the pass's
 * terms in an unspecified order (a matrix product may add its products into
 * the stored gradient one by one, with fused multiply-adds or not), so two
 * passes over the same values give twice one pass's gradient only within
 * the rounding of those sums: about (terms + 2) * epsilon times the sum of
 * the terms' magnitudes. */
dc_tensor *dc_tensor_grad(const dc_tensor *tensor);

/* Zeroes the gradient. Costs nothing: the next backward overwrites instead of
 * adding. */
void dc_tensor_zero_grad(dc_tensor *tensor);

/* Copies the elements, row-major, to host memory of `bytes` bytes (numel *
 * element size) / from host memory into the tensor. Waits for device work.
 * On a CUDA context the tensor must be contiguous: a strided view (a
 * transpose, a slice along an inner axis, a gradient view) fails with
 * DC_ERR_UNSUPPORTED. */
dc_status dc_tensor_to_host(const dc_tensor *tensor, void *dst, size_t bytes);
dc_status dc_tensor_from_host_copy(dc_tensor *tensor, const void *src, size_t bytes);

/* Element `index` (row-major) as a double, through *value. */
dc_status dc_tensor_get(const dc_tensor *tensor, int64_t index, double *value);

/* The single element of a tensor with numel 1. */
dc_status dc_tensor_item(const dc_tensor *tensor, double *value);

/* Sets every element / element `index` to `value`. dc_tensor_fill, like the
 * random fills below, fills a host buffer and copies it in as
 * dc_tensor_from_host_copy does: on a CUDA context a strided view fails with
 * DC_ERR_UNSUPPORTED (the random fills have drawn their numbers by then).
 * dc_tensor_set works on any tensor. */
dc_status dc_tensor_fill(dc_tensor *tensor, double value);
dc_status dc_tensor_set(dc_tensor *tensor, int64_t index, double value);

/* Fills with uniform random numbers in [lo, hi) / normal ones with the given
 * mean and standard deviation, from the context's seeded generator. Uniform
 * values stay in [lo, hi) after rounding to the tensor's dtype; where the
 * dtype has no value in [lo, hi) (lo == hi among others) every element is
 * lo, rounded to the dtype. lo or hi not finite, lo > hi and a negative
 * stddev are refused with DC_ERR_ARG. */
dc_status dc_tensor_fill_uniform(dc_tensor *tensor, double lo, double hi);
dc_status dc_tensor_fill_normal(dc_tensor *tensor, double mean, double stddev);

/* Copies src's values into dst (same shape and dtype; any devices). Between
 * a CPU and a CUDA context the copy goes through host memory; between two
 * CUDA contexts dense tensors are copied on the device, after the source
 * context's queued work. A strided view on the CUDA side of a copy between
 * contexts fails with DC_ERR_UNSUPPORTED. Done on return in every case. */
dc_status dc_tensor_copy(dc_tensor *dst, const dc_tensor *src);

/* A pointer to the first element and the strides in elements: host memory on
 * the CPU backend, device memory on CUDA. Strides are 0 along broadcast
 * dimensions of a view. Valid while the tensor lives. */
void *dc_tensor_data(dc_tensor *tensor);
const int64_t *dc_tensor_strides(const dc_tensor *tensor);
/* Whether the elements lie row-major with no gaps (strides of a new tensor);
 * a tensor without elements is. */
bool dc_tensor_is_contiguous(const dc_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_TENSOR_H */
