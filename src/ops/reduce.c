/* Sum and mean over axes. Both are one op, DC_OP_SUM, with a scale (1 for a
 * sum, 1/count for a mean): forward and adjoint are the same scaled copy,
 * the forward summing over the reduced axes, the adjoint broadcasting back. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backward.h"
#include "ops_internal.h"

static dc_tensor *reduce(dc_tape *tape, const char *op, dc_tensor *x, int n_axes, const int *axes, bool keepdims,
                         bool mean)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, op, 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (n_axes < 0 || n_axes > DC_MAX_DIMS || (n_axes > 0 && !axes)) {
        dc_error(ctx, DC_ERR_ARG, "%s: %d axes given%s", op, n_axes, n_axes > 0 && !axes ? " but axes is NULL" : "");
        return NULL;
    }
    bool reduced[DC_MAX_DIMS] = {false};
    for (int i = 0; i < n_axes; ++i) {
        int a = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (a < 0 || a >= x->ndim) {
            char s[128];
            dc_error(ctx, DC_ERR_ARG, "%s: axis %d is out of range for shape %s", op, axes[i],
                     dc_tensor_shape_str(x, s, sizeof s));
            return NULL;
        }
        if (reduced[a]) {
            dc_error(ctx, DC_ERR_ARG, "%s: axis %d is given twice", op, axes[i]);
            return NULL;
        }
        reduced[a] = true;
    }
    if (n_axes == 0)
        for (int d = 0; d < x->ndim; ++d)
            reduced[d] = true;

    int64_t kept_shape[DC_MAX_DIMS], out_shape[DC_MAX_DIMS];
    int out_ndim = 0;
    int64_t count = 1;
    for (int d = 0; d < x->ndim; ++d) {
        kept_shape[d] = reduced[d] ? 1 : x->shape[d];
        if (reduced[d])
            count *= x->shape[d];
        if (!reduced[d] || keepdims)
            out_shape[out_ndim++] = kept_shape[d];
    }
    dc_tensor *y = dc_tape_alloc_tensor(tape, x->dtype, out_ndim, out_shape);
    if (!y)
        return NULL;
    /* y read as the keepdims shape: same memory, size 1 on reduced axes. */
    dc_tensor ykeep = *y;
    ykeep.ndim = x->ndim;
    memcpy(ykeep.shape, kept_shape, sizeof kept_shape);
    dc_contiguous_strides(x->ndim, kept_shape, ykeep.strides);

    const double scale = mean ? (count > 0 ? 1.0 / (double)count : NAN) : 1.0;
    const dc_affine_arg arg = {scale, 0.0};
    dc_loop_in li;
    dc_loop_in_tensor(&li, x, x->ndim, x->shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, &ykeep, x->ndim, x->shape, DC_WRITE_ASSIGN);
    if (dc_run_kernel(ctx, DC_K_AFFINE, &arg, x->dtype, x->ndim, x->shape, 1, &li, 1, &lo) != DC_OK)
        return NULL;
    if (mean && count == 0 && dc_tensor_fill(y, NAN) != DC_OK) /* the mean of nothing */
        return NULL;

    if (dc_tape_wants_node(tape, 1, &x)) {
        dc_node *node = dc_tape_record(tape, DC_OP_SUM, 1, &x, 1, &y);
        if (!node)
            return NULL;
        node->as.sum.scale = scale;
        node->as.sum.axes = 0;
        for (int d = 0; d < x->ndim; ++d)
            node->as.sum.axes |= reduced[d] ? 1u << d : 0u;
    }
    return y;
}

dc_status dc_sum_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *g = dc_grad_contiguous(tape, node->out[0]);
    if (!g)
        return DC_ERR_MEMORY;
    dc_tensor gkeep = *g;
    gkeep.ndim = x->ndim;
    for (int d = 0; d < x->ndim; ++d)
        gkeep.shape[d] = (node->as.sum.axes >> d) & 1u ? 1 : x->shape[d];
    dc_contiguous_strides(x->ndim, gkeep.shape, gkeep.strides);
    const dc_affine_arg arg = {node->as.sum.scale, 0.0};
    const dc_tensor *reads[1] = {&gkeep};
    return dc_backward_kernel(tape, DC_K_AFFINE, &arg, x->ndim, x->shape, 1, reads, 1, &x);
}

dc_tensor *dc_op_sum(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_sum", x, n_axes, axes, keepdims, false);
}

dc_tensor *dc_op_mean(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_mean", x, n_axes, axes, keepdims, true);
}
