/* Ops that change how elements are laid out: transpose (a view with two
 * strides swapped), reshape (a view of a contiguous tensor, else a copy),
 * slice (a view) and concat (a copy). */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "../cuda/cuda_backend.h"
#include "../engine/coalesce.h"
#include "backward.h"
#include "ops_internal.h"

dc_tensor *dc_op_transpose(dc_tape *tape, dc_tensor *x, int axis0, int axis1)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_transpose", 1, &x, labels) != DC_OK)
        return NULL;
    const int a0 = axis0 < 0 ? axis0 + x->ndim : axis0, a1 = axis1 < 0 ? axis1 + x->ndim : axis1;
    if (a0 < 0 || a0 >= x->ndim || a1 < 0 || a1 >= x->ndim) {
        char s[128];
        dc_error(tape->ctx, DC_ERR_ARG, "dc_op_transpose: axes %d and %d do not both exist in shape %s", axis0,
                 axis1, dc_tensor_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t shape[DC_MAX_DIMS], strides[DC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, x->strides, sizeof strides);
    shape[a0] = x->shape[a1];
    shape[a1] = x->shape[a0];
    strides[a0] = x->strides[a1];
    strides[a1] = x->strides[a0];
    dc_tensor *y = dc_tape_alloc_view(tape, x, x->ndim, shape, strides, x->data);
    if (!y || !dc_tape_wants_node(tape, 1, &x))
        return y;
    dc_node *node = dc_tape_record(tape, DC_OP_TRANSPOSE, 1, &x, 1, &y);
    if (!node)
        return NULL;
    node->as.transpose.a0 = a0;
    node->as.transpose.a1 = a1;
    return y;
}

/* gx += transpose(gy): gy read in x's shape with its two axes swapped. */
dc_status dc_transpose_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *g = node->out[0]->grad;
    dc_tensor gt = *g;
    const int a0 = node->as.transpose.a0, a1 = node->as.transpose.a1;
    gt.shape[a0] = g->shape[a1];
    gt.shape[a1] = g->shape[a0];
    gt.strides[a0] = g->strides[a1];
    gt.strides[a1] = g->strides[a0];
    const dc_tensor *reads[1] = {&gt};
    return dc_backward_kernel(tape, DC_K_COPY, NULL, x->ndim, x->shape, 1, reads, 1, &x);
}

dc_tensor *dc_op_reshape(dc_tape *tape, dc_tensor *x, int ndim, const int64_t *shape)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_reshape", 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (ndim < 0 || ndim > DC_MAX_DIMS || (ndim > 0 && !shape)) {
        dc_error(ctx, DC_ERR_ARG, "dc_op_reshape: rank %d with shape %s", ndim, shape ? "given" : "NULL");
        return NULL;
    }
    int64_t s[DC_MAX_DIMS];
    int infer = -1;
    for (int d = 0; d < ndim; ++d) {
        s[d] = shape[d];
        if (shape[d] == -1 && infer < 0) {
            infer = d;
            s[d] = 1; /* until inferred */
        } else if (shape[d] < 0) {
            dc_error(ctx, DC_ERR_SHAPE, "dc_op_reshape: size %lld at axis %d (only one -1 is allowed)",
                     (long long)shape[d], d);
            return NULL;
        }
    }
    /* Within dc_check_shape's bounds the product of the given sizes cannot
     * overflow, nor can the strides; beyond them the message below says why. */
    const bool too_large = dc_check_shape(ctx, "dc_op_reshape", ndim, s) != DC_OK;
    const int64_t known = too_large ? 0 : dc_shape_numel(ndim, s);
    if (infer >= 0)
        s[infer] = known ? x->numel / known : 0;
    if (too_large || dc_shape_numel(ndim, s) != x->numel || (infer >= 0 && known == 0)) {
        char sx[128], sn[128];
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_reshape: cannot reshape %s (%lld elements) to %s",
                 dc_tensor_shape_str(x, sx, sizeof sx), (long long)x->numel, dc_shape_format(sn, sizeof sn, ndim, shape));
        return NULL;
    }
    int64_t strides[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, s, strides);
    dc_tensor *y;
    if (dc_tensor_is_contiguous(x)) {
        y = dc_tape_alloc_view(tape, x, ndim, s, strides, x->data);
    } else {
        y = dc_tape_alloc_tensor(tape, x->dtype, ndim, s);
        /* copy x into y in x's shape, then see it in the new shape */
        if (y) {
            dc_tensor yx = *y;
            yx.ndim = x->ndim;
            memcpy(yx.shape, x->shape, sizeof yx.shape);
            dc_contiguous_strides(x->ndim, x->shape, yx.strides);
            if (dc_tensor_copy(&yx, x) != DC_OK)
                return NULL;
        }
    }
    if (!y || !dc_tape_wants_node(tape, 1, &x))
        return y;
    return dc_tape_record(tape, DC_OP_RESHAPE, 1, &x, 1, &y) ? y : NULL;
}

/* gx += gy, both read as flat arrays in row-major order (gx in x's shape). */
dc_status dc_reshape_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *g = dc_grad_contiguous(tape, node->out[0]);
    if (!g)
        return DC_ERR_MEMORY;
    dc_tensor gx_shape = *g;
    gx_shape.ndim = x->ndim;
    memcpy(gx_shape.shape, x->shape, sizeof gx_shape.shape);
    dc_contiguous_strides(x->ndim, x->shape, gx_shape.strides);
    const dc_tensor *reads[1] = {&gx_shape};
    return dc_backward_kernel(tape, DC_K_COPY, NULL, x->ndim, x->shape, 1, reads, 1, &x);
}

dc_tensor *dc_op_slice(dc_tape *tape, dc_tensor *x, int axis, int64_t start, int64_t length)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_slice", 1, &x, labels) != DC_OK)
        return NULL;
    const int a = axis < 0 ? axis + x->ndim : axis;
    char s[128];
    if (a < 0 || a >= x->ndim) {
        dc_error(tape->ctx, DC_ERR_ARG, "dc_op_slice: axis %d does not exist in shape %s", axis,
                 dc_tensor_shape_str(x, s, sizeof s));
        return NULL;
    }
    if (start < 0 || length < 0 || start > x->shape[a] || length > x->shape[a] - start) {
        if (length > 0 && start <= INT64_MAX - (length - 1))
            dc_error(tape->ctx, DC_ERR_ARG, "dc_op_slice: elements %lld..%lld of axis %d are outside shape %s",
                     (long long)start, (long long)(start + (length - 1)), axis, dc_tensor_shape_str(x, s, sizeof s));
        else
            dc_error(tape->ctx, DC_ERR_ARG,
                     "dc_op_slice: length %lld from element %lld of axis %d does not fit shape %s", (long long)length,
                     (long long)start, axis, dc_tensor_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t shape[DC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = length;
    void *data = (unsigned char *)x->data + (size_t)(start * x->strides[a]) * dc_dtype_size(x->dtype);
    dc_tensor *y = dc_tape_alloc_view(tape, x, x->ndim, shape, x->strides, data);
    if (!y || !dc_tape_wants_node(tape, 1, &x))
        return y;
    dc_node *node = dc_tape_record(tape, DC_OP_SLICE, 1, &x, 1, &y);
    if (!node)
        return NULL;
    node->as.slice.axis = a;
    node->as.slice.start = start;
    y->slice_base = x;
    y->slice_axis = a;
    y->slice_start = start;
    return y;
}

/* gx[slice] += gy: the slice of x's gradient as a strided target. */
dc_status dc_slice_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *y = node->out[0];
    if (y->grad_in_base)
        return DC_OK; /* the contributions were written into x's gradient */
    dc_status st = dc_grad_prepare_partial(tape, x);
    if (st != DC_OK)
        return st;
    const int a = node->as.slice.axis;
    const int64_t start = node->as.slice.start;
    const dc_tensor *gx = x->grad;
    dc_loop_in li;
    dc_loop_in_tensor(&li, y->grad, y->ndim, y->shape);
    dc_loop_out lo;
    lo.mode = DC_WRITE_ACCUMULATE;
    lo.data = (unsigned char *)gx->data + (size_t)(start * gx->strides[a]) * dc_dtype_size(gx->dtype);
    memcpy(lo.strides, gx->strides, sizeof lo.strides);
    for (int d = 0; d < y->ndim; ++d)
        if (y->shape[d] == 1)
            lo.strides[d] = 0;
    return dc_run_kernel(tape->ctx, DC_K_COPY, NULL, x->dtype, y->ndim, y->shape, 1, &li, 1, &lo);
}

/* A copy of `shape` from src to dst (strides in elements) as one 2-D part
 * for dc_cuda_copy_parts; false where its layout needs more axes. */
static bool as_part(int ndim, const int64_t *shape, const void *src, const int64_t *src_st, void *dst,
                    const int64_t *dst_st, bool add, dc_copy_part *part)
{
    const int64_t *arrays[2] = {src_st, dst_st};
    int nd;
    int64_t cshape[DC_MAX_DIMS], cst[2][DC_MAX_DIMS];
    dc_coalesce(ndim, shape, 2, arrays, &nd, cshape, cst);
    if (nd > 2)
        return false;
    const bool two = nd == 2;
    *part = (dc_copy_part){src,
                           dst,
                           two ? cshape[0] : 1,
                           nd == 0 ? 1 : cshape[nd - 1],
                           two ? cst[0][0] : 0,
                           nd == 0 ? 0 : cst[0][nd - 1],
                           two ? cst[1][0] : 0,
                           nd == 0 ? 0 : cst[1][nd - 1],
                           add};
    return true;
}

/* Part i of y along axis a, from element `at` on: its shape and data. */
static void *part_of(const dc_tensor *y, int a, int64_t at, int64_t width, int64_t *shape)
{
    memcpy(shape, y->shape, sizeof y->shape);
    shape[a] = width;
    return (unsigned char *)y->data + (size_t)(at * y->strides[a]) * dc_dtype_size(y->dtype);
}

enum { MAX_PARTS_AT_ONCE = 256 };

/* On CUDA, every part of a concatenation copied in one launch (per 32
 * parts) rather than one each. DC_ERR_UNSUPPORTED (and no message) where
 * that does not apply (the CPU, a part whose layout needs more than two
 * axes): the caller then copies part by part. */
static dc_status concat_in_one_launch(dc_ctx *ctx, const dc_tensor *y, int a, int n, dc_tensor *const *xs)
{
    if (!ctx->cuda || n > MAX_PARTS_AT_ONCE)
        return DC_ERR_UNSUPPORTED;
    dc_copy_part parts[MAX_PARTS_AT_ONCE];
    int64_t at = 0, shape[DC_MAX_DIMS];
    for (int i = 0; i < n; ++i) {
        void *dst = part_of(y, a, at, xs[i]->shape[a], shape);
        if (!as_part(y->ndim, shape, xs[i]->data, xs[i]->strides, dst, y->strides, false, &parts[i]))
            return DC_ERR_UNSUPPORTED;
        at += xs[i]->shape[a];
    }
    return dc_cuda_copy_parts(ctx, y->dtype, n, parts);
}

dc_tensor *dc_op_concat(dc_tape *tape, int n, dc_tensor *const *xs, int axis)
{
    if (!tape)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (n <= 0) {
        dc_error(ctx, DC_ERR_ARG, "dc_op_concat: %d tensors given; join at least one", n);
        return NULL;
    }
    if (!xs) {
        dc_error(ctx, DC_ERR_ARG, "dc_op_concat: xs is NULL for %d tensors", n);
        return NULL;
    }
    for (int i = 0; i < n; ++i) {
        char label[24];
        snprintf(label, sizeof label, "xs[%d]", i);
        const char *labels[1] = {label};
        if (dc_op_check_args(tape, "dc_op_concat", 1, &xs[i], labels) != DC_OK)
            return NULL;
    }
    const dc_tensor *x0 = xs[0];
    const int a = axis < 0 ? axis + x0->ndim : axis;
    if (a < 0 || a >= x0->ndim) {
        dc_error(ctx, DC_ERR_ARG, "dc_op_concat: axis %d does not exist for rank %d", axis, x0->ndim);
        return NULL;
    }
    int64_t shape[DC_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[a] = 0;
    for (int i = 0; i < n; ++i) {
        bool ok = xs[i]->ndim == x0->ndim && xs[i]->dtype == x0->dtype;
        for (int d = 0; ok && d < x0->ndim; ++d)
            ok = d == a || xs[i]->shape[d] == x0->shape[d];
        if (!ok) {
            char s0[128], si[128];
            dc_error(ctx, xs[i]->dtype != x0->dtype ? DC_ERR_DTYPE : DC_ERR_SHAPE,
                     "dc_op_concat: xs[0] %s %s and xs[%d] %s %s differ off axis %d", dc_dtype_name(x0->dtype),
                     dc_tensor_shape_str(x0, s0, sizeof s0), i, dc_dtype_name(xs[i]->dtype),
                     dc_tensor_shape_str(xs[i], si, sizeof si), axis);
            return NULL;
        }
        if (xs[i]->shape[a] > INT64_MAX - shape[a]) {
            dc_error(ctx, DC_ERR_SHAPE, "dc_op_concat: the sizes along axis %d add up past %lld at xs[%d]", axis,
                     (long long)INT64_MAX, i);
            return NULL;
        }
        shape[a] += xs[i]->shape[a];
    }
    dc_tensor *y = dc_tape_alloc_tensor(tape, x0->dtype, x0->ndim, shape);
    if (!y)
        return NULL;
    const dc_status at_once = concat_in_one_launch(ctx, y, a, n, xs);
    if (at_once != DC_OK && at_once != DC_ERR_UNSUPPORTED)
        return NULL;
    int64_t at = 0;
    for (int i = 0; i < n && at_once != DC_OK; ++i) {
        dc_tensor part = *y;
        part.shape[a] = xs[i]->shape[a];
        part.data = (unsigned char *)y->data + (size_t)(at * y->strides[a]) * dc_dtype_size(y->dtype);
        part.numel = dc_shape_numel(part.ndim, part.shape);
        if (dc_tensor_copy(&part, xs[i]) != DC_OK)
            return NULL;
        at += xs[i]->shape[a];
    }
    if (!dc_tape_wants_node(tape, n, xs))
        return y;
    dc_node *node = dc_tape_record(tape, DC_OP_CONCAT, n, xs, 1, &y);
    if (!node)
        return NULL;
    node->as.concat.axis = a;
    return y;
}

/* The tensor whose memory (and gradient) a view of slices shares. */
static const dc_tensor *slice_root(const dc_tensor *x)
{
    while (x->slice_base)
        x = x->slice_base;
    return x;
}

/* dc_concat_backward on CUDA: every input's part of gy in one launch (per
 * 32 parts), but a part whose layout needs more axes, copied on its own.
 * DC_ERR_UNSUPPORTED where that does not apply: the CPU, two inputs whose
 * gradients may share elements (one input given twice, slices of one
 * tensor, a slice and its tensor: their parts could then add into the same
 * gradient elements at once). */
static dc_status concat_backward_in_one_launch(dc_tape *tape, dc_node *node)
{
    const dc_tensor *y = node->out[0];
    const int a = node->as.concat.axis, n = node->n_in;
    if (!tape->ctx->cuda || n > MAX_PARTS_AT_ONCE)
        return DC_ERR_UNSUPPORTED;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j)
            if (node->in[i]->requires_grad && node->in[j]->requires_grad &&
                slice_root(node->in[i]) == slice_root(node->in[j]))
                return DC_ERR_UNSUPPORTED;
    dc_copy_part parts[MAX_PARTS_AT_ONCE];
    int64_t at = 0, shape[DC_MAX_DIMS];
    int n_parts = 0;
    /* The gradients themselves: a slice's is a view into its tensor's, whose
     * strides are known only now. One whose layout then needs more axes is
     * copied on its own. */
    dc_status st = DC_OK;
    for (int i = 0; i < n && st == DC_OK; ++i) {
        dc_tensor *x = node->in[i];
        const void *src = part_of(y->grad, a, at, x->shape[a], shape);
        at += x->shape[a];
        if (!x->requires_grad)
            continue;
        dc_write_mode mode;
        st = dc_grad_prepare(tape, x, &mode);
        if (st != DC_OK)
            break;
        if (as_part(x->ndim, shape, src, y->grad->strides, x->grad->data, x->grad->strides,
                    mode == DC_WRITE_ACCUMULATE, &parts[n_parts])) {
            n_parts++;
            continue;
        }
        dc_loop_in li = {0};
        li.data = src;
        memcpy(li.strides, y->grad->strides, sizeof li.strides);
        dc_loop_out lo;
        lo.data = x->grad->data;
        lo.mode = mode;
        memcpy(lo.strides, x->grad->strides, sizeof lo.strides);
        st = dc_run_kernel(tape->ctx, DC_K_COPY, NULL, x->dtype, x->ndim, x->shape, 1, &li, 1, &lo);
    }
    if (st == DC_OK && n_parts > 0)
        st = dc_cuda_copy_parts(tape->ctx, y->dtype, n_parts, parts);
    for (int i = 0; st == DC_OK && i < n; ++i)
        if (node->in[i]->requires_grad)
            dc_grad_done(node->in[i]);
    return st;
}

/* Each input gets its part of gy. */
dc_status dc_concat_backward(dc_tape *tape, dc_node *node)
{
    const dc_status at_once = concat_backward_in_one_launch(tape, node);
    if (at_once != DC_ERR_UNSUPPORTED)
        return at_once;
    const dc_tensor *y = node->out[0];
    const int a = node->as.concat.axis;
    int64_t at = 0;
    for (int i = 0; i < node->n_in; ++i) {
        dc_tensor *x = node->in[i];
        dc_tensor part = *y->grad;
        part.shape[a] = x->shape[a];
        part.numel = dc_shape_numel(part.ndim, part.shape);
        part.data = (unsigned char *)y->grad->data + (size_t)(at * y->grad->strides[a]) * dc_dtype_size(y->dtype);
        at += x->shape[a];
        if (!x->requires_grad)
            continue;
        const dc_tensor *reads[1] = {&part};
        dc_status st = dc_backward_kernel(tape, DC_K_COPY, NULL, x->ndim, x->shape, 1, reads, 1, &x);
        if (st != DC_OK)
            return st;
    }
    return DC_OK;
}
