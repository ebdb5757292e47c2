/* Whether the outputs of a loop share elements: see dc_outputs_overlap in
 * loop.h. */
#include <stdint.h>

#include "loop.h"

/* The bytes [lo, hi) an output's elements lie in. */
static void output_span(dc_dtype dtype, int ndim, const int64_t *shape, const dc_loop_out *o, intptr_t *lo,
                        intptr_t *hi)
{
    int64_t first = 0, last = 0; /* element offsets of the lowest and highest element */
    for (int d = 0; d < ndim; ++d) {
        const int64_t reach = o->strides[d] * (shape[d] - 1);
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    const intptr_t esize = (intptr_t)dc_dtype_size(dtype);
    *lo = (intptr_t)o->data + (intptr_t)first * esize;
    *hi = (intptr_t)o->data + (intptr_t)(last + 1) * esize;
}

/* Whether sum_d k[d] * stride[d] == r for some integers |k[d]| <= reach[d],
 * the axes sorted by decreasing stride, where span[d] bounds what the axes
 * after d can add (the sum of their stride * reach). Each axis tries the k
 * that leave a remainder the later axes can cover: at most two when its
 * stride exceeds that span, as in any slice or transpose of a dense tensor.
 * More, and the answer is a cautious yes. */
static bool offset_reachable(int n, const int64_t *stride, const int64_t *reach, const int64_t *span, int64_t r)
{
    if (n == 0)
        return r == 0;
    const int64_t s = stride[0];
    /* k from ceil((r - span) / s) to floor((r + span) / s) */
    int64_t lo = r - span[0] >= 0 ? (r - span[0] + s - 1) / s : -((span[0] - r) / s);
    int64_t hi = r + span[0] >= 0 ? (r + span[0]) / s : -((-(r + span[0]) + s - 1) / s);
    if (lo < -reach[0])
        lo = -reach[0];
    if (hi > reach[0])
        hi = reach[0];
    if (hi - lo > 1)
        return true;
    for (int64_t k = lo; k <= hi; ++k)
        if (offset_reachable(n - 1, stride + 1, reach + 1, span + 1, r - k * s))
            return true;
    return false;
}

/* Whether two outputs of the loop may share an element: never no when they
 * do. Views with the same strides (along the axes of more than one element)
 * share one exactly when the distance between their first elements is a
 * difference of two index vectors times the strides, which is decided
 * exactly when every stride exceeds what the smaller ones reach; views with
 * other strides are taken to share one when their spans of memory meet. */
static bool share_elements(dc_dtype dtype, int ndim, const int64_t *shape, const dc_loop_out *a, const dc_loop_out *b)
{
    intptr_t a0, a1, b0, b1;
    output_span(dtype, ndim, shape, a, &a0, &a1);
    output_span(dtype, ndim, shape, b, &b0, &b1);
    if (!(a0 < b1 && b0 < a1))
        return false;
    const intptr_t esize = (intptr_t)dc_dtype_size(dtype);
    const intptr_t bytes = (intptr_t)b->data - (intptr_t)a->data;
    bool same_lattice = bytes % esize == 0; /* element b's first is a whole number of elements from a's */
    for (int d = 0; d < ndim && same_lattice; ++d)
        same_lattice = shape[d] < 2 || a->strides[d] == b->strides[d];
    if (!same_lattice)
        return true;
    /* the axes that move through memory, by decreasing stride */
    int64_t stride[DC_MAX_DIMS], reach[DC_MAX_DIMS], span[DC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < ndim; ++d) {
        const int64_t s = a->strides[d] < 0 ? -a->strides[d] : a->strides[d];
        if (s == 0 || shape[d] < 2)
            continue;
        int at = n++;
        for (; at > 0 && stride[at - 1] < s; --at) {
            stride[at] = stride[at - 1];
            reach[at] = reach[at - 1];
        }
        stride[at] = s;
        reach[at] = shape[d] - 1;
    }
    int64_t inner = 0;
    for (int d = n - 1; d >= 0; --d) {
        span[d] = inner;
        inner += stride[d] * reach[d];
    }
    return offset_reachable(n, stride, reach, span, (int64_t)(bytes / esize));
}

bool dc_outputs_overlap(dc_dtype dtype, int ndim, const int64_t *shape, int n_out, const dc_loop_out *out)
{
    for (int d = 0; d < ndim; ++d)
        if (shape[d] == 0)
            return false; /* nothing is written */
    for (int i = 0; i < n_out; ++i) {
        const dc_loop_out *a = &out[i];
        if (a->mode == DC_WRITE_DISCARD)
            continue;
        for (int j = i + 1; j < n_out; ++j) {
            const dc_loop_out *b = &out[j];
            if (b->mode == DC_WRITE_DISCARD)
                continue;
            bool same_view = a->data == b->data;
            for (int d = 0; d < ndim && same_view; ++d)
                same_view = shape[d] < 2 || a->strides[d] == b->strides[d];
            if (!same_view && share_elements(dtype, ndim, shape, a, b))
                return true;
        }
    }
    return false;
}
