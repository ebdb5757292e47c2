/* Library bugs fuzz_ops has found, and the calls it skips when built with
 * DC_FUZZ_SKIP_KNOWN=1 (cmake -DDC_FUZZ_SKIP_KNOWN=ON), so that fuzzing goes
 * on past them. Each pattern names its reproducer in tests/fuzz/known/ (see
 * README.md there). The patterns are wider than the bugs: they skip every
 * call of the shape class a bug lives in, so a fix is only shown by a build
 * without DC_FUZZ_SKIP_KNOWN running the reproducers. */
#ifndef DC_FUZZ_KNOWN_BUGS_H
#define DC_FUZZ_KNOWN_BUGS_H

#include <stdbool.h>
#include <stdint.h>

#include <dualcast.h>

#define FZ_SPAN_BOUND_KNOWN (INT64_MAX / 16) /* dc_tensor_new's bound (src/tensor.c) */

/* The product of the batch axes (all but the last two) of a and b broadcast
 * together, saturating at INT64_MAX; 1 when either has fewer than 2 axes. */
static inline int64_t fz_known_batch(const dc_tensor *a, const dc_tensor *b)
{
    const int na = dc_tensor_ndim(a) - 2, nb = dc_tensor_ndim(b) - 2;
    if (na < 0 || nb < 0)
        return 1;
    const int n = na > nb ? na : nb;
    int64_t count = 1;
    for (int d = 0; d < n; ++d) {
        const int64_t da = d < n - na ? 1 : dc_tensor_shape(a)[d - (n - na)];
        const int64_t db = d < n - nb ? 1 : dc_tensor_shape(b)[d - (n - nb)];
        const int64_t s = da == 1 ? db : da;
        if (s == 0)
            return 0;
        count = count > INT64_MAX / s ? INT64_MAX : count * s;
    }
    return count;
}

/* The product of n sizes, zeros counted as ones (what dc_tensor_new bounds),
 * saturating at INT64_MAX. */
static inline int64_t fz_known_span(int n, const int64_t *shape)
{
    int64_t s = 1;
    for (int d = 0; d < n; ++d) {
        const int64_t k = shape[d] > 0 ? shape[d] : 1;
        s = s > INT64_MAX / k ? INT64_MAX : s * k;
    }
    return s;
}

/* Whether the NumPy broadcast of the n tensors' shapes (NULLs left out) is
 * beyond the size bound; false where they do not broadcast. */
static inline bool fz_known_broadcast_beyond(int n, dc_tensor *const *xs)
{
    int ndim = 0;
    int64_t shape[DC_MAX_DIMS];
    for (int i = 0; i < n; ++i)
        if (xs[i] && dc_tensor_ndim(xs[i]) > ndim)
            ndim = dc_tensor_ndim(xs[i]);
    for (int d = 0; d < ndim; ++d)
        shape[d] = 1;
    for (int i = 0; i < n; ++i) {
        if (!xs[i])
            continue;
        const int nd = dc_tensor_ndim(xs[i]);
        for (int d = 0; d < nd; ++d) {
            const int64_t s = dc_tensor_shape(xs[i])[d];
            int64_t *out = &shape[ndim - nd + d];
            if (*out == 1)
                *out = s;
            else if (s != 1 && s != *out)
                return false;
        }
    }
    return fz_known_span(ndim, shape) > FZ_SPAN_BOUND_KNOWN;
}

/* known/bound-embedding: the result, ids' shape and [E], is not checked
 * against the size bound: its strides overflow (tensor.c,
 * dc_contiguous_strides) for ids [0, 2^58] and a table [0, 2^58]. */
static inline bool fz_known_embedding(const dc_tensor *table, const dc_tensor *ids)
{
    if (!table || !ids || dc_tensor_ndim(table) != 2 || dc_tensor_ndim(ids) >= DC_MAX_DIMS)
        return false;
    int64_t shape[DC_MAX_DIMS];
    const int n = dc_tensor_ndim(ids);
    for (int d = 0; d < n; ++d)
        shape[d] = dc_tensor_shape(ids)[d];
    shape[n] = dc_tensor_shape(table)[1];
    return fz_known_span(n + 1, shape) > FZ_SPAN_BOUND_KNOWN;
}

/* Whether the matrices of t (its last two axes) hold no element. */
static inline bool fz_known_empty_matrix(const dc_tensor *t)
{
    const int n = dc_tensor_ndim(t);
    return n >= 2 && (dc_tensor_shape(t)[n - 2] == 0 || dc_tensor_shape(t)[n - 1] == 0);
}

/* known/matmul-empty-batch-timeout: dc_op_matmul runs one (empty) matrix
 * product per batch element, 2^40 of them for [2^40, 0, 0] @ [2^40, 0, 0].
 * known/matmul-backward-empty-oob: the backward pass of a batched product
 * with an empty operand matrix reads its table of written slices (one byte,
 * as there are no slices) at every batch index (matmul.c, matmul_grad).
 * known/bound-matmul: the result is not checked against the size bound. */
static inline bool fz_known_matmul(const dc_tensor *a, const dc_tensor *b)
{
    if (!a || !b || dc_tensor_ndim(a) < 2 || dc_tensor_ndim(b) < 2)
        return false;
    const int64_t batch = fz_known_batch(a, b);
    if (batch > ((int64_t)1 << 24) || (batch > 1 && (fz_known_empty_matrix(a) || fz_known_empty_matrix(b))))
        return true;
    const int64_t mn[2] = {dc_tensor_shape(a)[dc_tensor_ndim(a) - 2], dc_tensor_shape(b)[dc_tensor_ndim(b) - 1]};
    const int64_t s = fz_known_span(2, mn);
    return batch > 0 && s > FZ_SPAN_BOUND_KNOWN / batch;
}

/* known/bound-concat: the sizes along the axis are summed without a check
 * (layout.c, dc_op_concat): 64 tensors [0, 2^58] overflow int64_t. */
static inline bool fz_known_concat(int n, dc_tensor *const *xs, int axis)
{
    if (n <= 0 || !xs[0])
        return false;
    const int ndim = dc_tensor_ndim(xs[0]);
    if (axis < 0)
        axis += ndim;
    if (axis < 0 || axis >= ndim)
        return false;
    int64_t shape[DC_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        shape[d] = dc_tensor_shape(xs[0])[d];
    for (int i = 1; i < n; ++i) {
        if (!xs[i] || dc_tensor_ndim(xs[i]) != ndim)
            return false;
        const int64_t s = dc_tensor_shape(xs[i])[axis];
        shape[axis] = shape[axis] > INT64_MAX - s ? INT64_MAX : shape[axis] + s;
    }
    return fz_known_span(ndim, shape) > FZ_SPAN_BOUND_KNOWN;
}

#define FZ_SKIP_MATMUL(a, b) fz_known_matmul((a), (b))
#define FZ_SKIP_BROADCAST(n, xs) fz_known_broadcast_beyond((n), (xs))
#define FZ_SKIP_EMBEDDING(table, ids) fz_known_embedding((table), (ids))
#define FZ_SKIP_CONCAT(n, xs, axis) fz_known_concat((n), (xs), (axis))

/* known/bound-*: ops return tensors whose shape is beyond the size bound of
 * dc_tensor_new (an empty result with huge sizes); the result is dropped
 * instead of failing the run. */
#define FZ_SKIP_BEYOND_BOUND true

#endif /* DC_FUZZ_KNOWN_BUGS_H */
