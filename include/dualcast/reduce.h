/* Reductions, prefix scans and reductions by index, with their adjoints:
 * the built-in associative operators (sum, product, maximum, minimum) and
 * log-sum-exp. User-written associative operators: assoc.h.
 *
 * Every op here records one tape node, runs on the CPU (OpenMP) and on
 * CUDA, and is deterministic: the same inputs give the same bits on every
 * run, whatever the number of threads (the work is split in pieces of a
 * fixed size, never by thread), and on CUDA without floating-point atomics.
 * The CPU and CUDA results may differ in their last bits (another order of
 * the sums and products). dc_op_prod and dc_op_segment_reduce accumulate in
 * double, float32 too, and round each output once (10^6 float32 factors near
 * 1: within float32's rounding of the exact product, where float32
 * accumulation drifts by about 10^-4).
 *
 * Gradients, and what they do at the edges:
 * - sum: the adjoint copied to every element.
 * - prod: zero-safe, never dividing by zero. With no zero among the
 *   elements of an output, an element's partial is the product of the
 *   others, computed as the product of the elements divided by the element
 *   (within a rounding or two of it; NaN at an infinite element, inf/inf,
 *   and infinite where the whole product overflows); with exactly one zero,
 *   the zero element's partial is the product of the others and every other
 *   partial is 0; with two or more, every partial is 0. The result itself
 *   is the plain product (0 times inf is NaN).
 * - max and min: the whole adjoint goes to one element, the winner: the
 *   first in row-major order among those equal to the result; every other
 *   partial is exactly 0. Where an element is NaN the result is NaN and the
 *   winner is the first NaN. -0.0 and +0.0 are equal: the first of them
 *   wins and the result keeps its sign. Infinities are ordinary values (a
 *   row of -inf has maximum -inf, won by its first element); an empty run
 *   has no winner.
 * - logsumexp: log(sum(exp(x))), computed with the maximum taken out; the
 *   partials are exp(x - result). Where the result is -inf (every element
 *   -inf, or none), every partial is 0; where it is +inf, the partials are
 *   NaN at the +inf elements and 0 elsewhere; where it is NaN (an element
 *   is NaN), every partial is NaN.
 * Along an empty axis each gives its neutral element: 0, 1, -inf (max and
 * logsumexp), +inf (min). */
#ifndef DUALCAST_REDUCE_H
#define DUALCAST_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The built-in associative operators of scans and reductions by index
 * (and of dc_op_reduce). */
typedef enum dc_reduction {
    DC_REDUCE_SUM,
    DC_REDUCE_PROD,
    DC_REDUCE_MAX,
    DC_REDUCE_MIN,
} dc_reduction;

/* The name of a reduction ("sum", "prod", "max", "min"), or "unknown". */
const char *dc_reduction_name(dc_reduction op);

/* Reductions over axes, as dc_op_sum: n_axes axes (negative ones count
 * from the end; n_axes == 0 reduces every axis); keepdims keeps them with
 * size 1. An axis out of range or given twice is refused (DC_ERR_ARG). */
dc_tensor *dc_op_prod(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);
dc_tensor *dc_op_max(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);
dc_tensor *dc_op_min(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);
dc_tensor *dc_op_logsumexp(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);

/* One of the four above (DC_REDUCE_SUM: dc_op_sum) chosen by `op`; an
 * unknown op is refused (DC_ERR_ARG). Messages name dc_op_reduce (dc_op_sum
 * for a sum). */
dc_tensor *dc_op_reduce(dc_tape *tape, dc_tensor *x, dc_reduction op, int n_axes, const int *axes, bool keepdims);

/* The prefix scan of x along `axis` (negative counts from the end), of x's
 * shape and dtype: element i is x[0] op x[1] op ... op x[i] (inclusive), or
 * the same up to x[i - 1] (exclusive; the first element is op's neutral
 * element: 0, 1, -inf, +inf). x may be any view (a transpose, a slice).
 * Computed in double, float32 rounded once per element. Along an empty axis
 * the result is empty; along an axis of one element it is x (inclusive) or
 * the neutral element (exclusive).
 * The gradients follow the rules above, prefix by prefix: element j's
 * partial of output i is that of prefix i's result. A product's partials
 * are zero-safe (exact with zeros, no division: after a zero, the other
 * partials are 0 even where an infinity or NaN makes the output NaN); they
 * take the product before each element from the output, in x's dtype, so
 * that where a float32 prefix overflows (or underflows) the partials after
 * it are infinite (or 0) even where the double computation stays in range
 * (float64 alike, near 1e308). A maximum's or minimum's
 * adjoint goes whole to each prefix's winner (from the first NaN on, that
 * NaN). The exclusive scan's neutral first element gets no gradient. A zero
 * adjoint contributes zero, even through an infinite or NaN partial.
 * NULL on error: NULL tape or x, an axis out of range (a scalar has none)
 * or an unknown op (DC_ERR_ARG, the message naming dc_op_scan, the argument
 * and x's shape). */
dc_tensor *dc_op_scan(dc_tape *tape, dc_tensor *x, dc_reduction op, int axis, bool exclusive);

/* A reduction by index (a histogram, a segment reduction): values of shape
 * [n, ...] and index of shape [n] (integers 0..n_segments-1 stored in a
 * tensor of values' dtype, like dc_op_embedding's ids: a control input,
 * without a gradient). Result [n_segments, ...]: row s is the op over the
 * rows i of values with index[i] == s, taken in ascending i; a segment no
 * row reaches holds op's neutral element. A value of index that is not an
 * integer in 0..n_segments-1 is refused with DC_ERR_ARG naming it: on the
 * CPU at the call; on CUDA, where the host does not wait for the device (a
 * step stays capturable), by the next call that waits for it, the row
 * counted in segment 0 until then.
 * n_segments may be 0 only when n is. Refused: index not of shape [n]
 * (DC_ERR_SHAPE, naming both shapes), index of another dtype
 * (DC_ERR_DTYPE), n_segments < 0 or an unknown op (DC_ERR_ARG). The
 * gradient of a row is its segment's adjoint times the rules above: a
 * sum's copied, a product's zero-safe, a maximum's or minimum's to the
 * first winning row of each segment and column (values that are not
 * contiguous are reduced from a copy). Many rows into few outputs are
 * reduced in pieces of consecutive rows, the pieces then combined in order;
 * the pieces depend on the sizes only (never on the threads), and the CPU
 * and CUDA take each segment's rows in the same pieces and order: the same
 * bits. */
dc_tensor *dc_op_segment_reduce(dc_tape *tape, dc_tensor *values, dc_tensor *index, int64_t n_segments,
                                dc_reduction op);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_REDUCE_H */
