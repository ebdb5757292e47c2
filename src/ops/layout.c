/* Ops that change how elements are laid out: transpose (a view with two
 * strides swapped) and reshape (a view of a contiguous tensor, else a copy). */
#include <string.h>

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
    node->ints[0] = a0;
    node->ints[1] = a1;
    return y;
}

/* gx += transpose(gy): gy read in x's shape with its two axes swapped. */
dc_status dc_transpose_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *g = node->out[0]->grad;
    dc_tensor gt = *g;
    const int a0 = node->ints[0], a1 = node->ints[1];
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
    int64_t known = 1;
    for (int d = 0; d < ndim; ++d) {
        s[d] = shape[d];
        if (shape[d] == -1 && infer < 0) {
            infer = d;
        } else if (shape[d] < 0) {
            dc_error(ctx, DC_ERR_SHAPE, "dc_op_reshape: size %lld at axis %d (only one -1 is allowed)",
                     (long long)shape[d], d);
            return NULL;
        } else {
            known *= shape[d];
        }
    }
    if (infer >= 0)
        s[infer] = known ? x->numel / known : 0;
    if (dc_shape_numel(ndim, s) != x->numel || (infer >= 0 && known == 0)) {
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
    const dc_tensor *g = node->out[0]->grad;
    dc_tensor gx_shape = *g;
    gx_shape.ndim = x->ndim;
    memcpy(gx_shape.shape, x->shape, sizeof gx_shape.shape);
    dc_contiguous_strides(x->ndim, x->shape, gx_shape.strides);
    const dc_tensor *reads[1] = {&gx_shape};
    return dc_backward_kernel(tape, DC_K_COPY, NULL, x->ndim, x->shape, 1, reads, 1, &x);
}
