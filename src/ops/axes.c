#include "axes.h"

#include <string.h>

#include "../engine/shape.h"
#include "backward.h"

dc_status dc_axes_parse(dc_ctx *ctx, const char *op, const dc_tensor *x, int n_axes, const int *axes,
                        bool keepdims, dc_axes *ax)
{
    memset(ax, 0, sizeof *ax);
    if (n_axes < 0 || n_axes > DC_MAX_DIMS || (n_axes > 0 && !axes))
        return dc_error(ctx, DC_ERR_ARG, "%s: %d axes given%s", op, n_axes,
                        n_axes > 0 && !axes ? " but axes is NULL" : "");
    for (int i = 0; i < n_axes; ++i) {
        int a = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (a < 0 || a >= x->ndim) {
            char s[128];
            return dc_error(ctx, DC_ERR_ARG, "%s: axis %d is out of range for shape %s", op, axes[i],
                            dc_tensor_shape_str(x, s, sizeof s));
        }
        if (ax->reduced[a])
            return dc_error(ctx, DC_ERR_ARG, "%s: axis %d is given twice", op, axes[i]);
        ax->reduced[a] = true;
    }
    if (n_axes == 0)
        for (int d = 0; d < x->ndim; ++d)
            ax->reduced[d] = true;
    ax->ndim = x->ndim;
    ax->outer = ax->len = ax->inner = 1;
    int first = -1, last = -1;
    for (int d = 0; d < x->ndim; ++d) {
        ax->kept_shape[d] = ax->reduced[d] ? 1 : x->shape[d];
        if (ax->reduced[d]) {
            ax->mask |= 1u << d;
            ax->len *= x->shape[d];
            first = first < 0 ? d : first;
            last = d;
        } else {
            ax->outer *= x->shape[d];
        }
        if (!ax->reduced[d] || keepdims)
            ax->out_shape[ax->out_ndim++] = ax->kept_shape[d];
    }
    bool one_run = true;
    for (int d = first; d >= 0 && d <= last; ++d)
        one_run = one_run && ax->reduced[d];
    if (one_run && first >= 0) {
        ax->outer = ax->inner = 1;
        for (int d = 0; d < first; ++d)
            ax->outer *= x->shape[d];
        for (int d = last + 1; d < x->ndim; ++d)
            ax->inner *= x->shape[d];
    }
    return DC_OK;
}

/* Whether the reduced axes form one run (dc_axes_parse then laid the block
 * out as the tensor lies). */
static bool one_run(const dc_axes *ax)
{
    int first = -1, last = -1;
    for (int d = 0; d < ax->ndim; ++d)
        if (ax->reduced[d]) {
            first = first < 0 ? d : first;
            last = d;
        }
    for (int d = first; d >= 0 && d <= last; ++d)
        if (!ax->reduced[d])
            return false;
    return true;
}

bool dc_axes_one_run(const dc_axes *ax) { return one_run(ax); }

bool dc_axes_in_place(const dc_tensor *x, const dc_axes *ax)
{
    return dc_tensor_is_contiguous(x) && one_run(ax);
}

/* A header over contiguous block memory, with x's shape and the strides that
 * read the block (kept axes first, then the reduced ones, each group in
 * order) in x's axis order. */
static void block_view(const dc_tensor *x, const dc_axes *ax, void *data, dc_tensor *view)
{
    *view = *x;
    view->data = data;
    view->grad = NULL;
    int order[DC_MAX_DIMS], n = 0;
    for (int d = 0; d < x->ndim; ++d)
        if (!ax->reduced[d])
            order[n++] = d;
    for (int d = 0; d < x->ndim; ++d)
        if (ax->reduced[d])
            order[n++] = d;
    int64_t stride = 1;
    for (int i = x->ndim - 1; i >= 0; --i) {
        view->strides[order[i]] = stride;
        stride *= x->shape[order[i]];
    }
}

const dc_tensor *dc_axes_block(dc_tape *tape, const dc_tensor *x, const dc_axes *ax)
{
    if (dc_axes_in_place(x, ax))
        return x;
    if (one_run(ax)) { /* only the layout differs: a contiguous copy */
        dc_tensor *copy = dc_tape_alloc_tensor(tape, x->dtype, x->ndim, x->shape);
        if (!copy)
            return NULL;
        dc_loop_in li;
        dc_loop_in_tensor(&li, x, x->ndim, x->shape);
        dc_loop_out lo;
        dc_loop_out_tensor(&lo, copy, x->ndim, x->shape, DC_WRITE_ASSIGN);
        return dc_run_kernel(tape->ctx, DC_K_COPY, NULL, x->dtype, x->ndim, x->shape, 1, &li, 1, &lo) == DC_OK
                   ? copy
                   : NULL;
    }
    const int64_t flat[2] = {ax->outer, ax->len};
    dc_tensor *block = dc_tape_alloc_tensor(tape, x->dtype, 2, flat);
    if (!block)
        return NULL;
    dc_tensor view;
    block_view(x, ax, block->data, &view);
    dc_loop_in li;
    dc_loop_in_tensor(&li, x, x->ndim, x->shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, &view, x->ndim, x->shape, DC_WRITE_ASSIGN);
    return dc_run_kernel(tape->ctx, DC_K_COPY, NULL, x->dtype, x->ndim, x->shape, 1, &li, 1, &lo) == DC_OK ? block
                                                                                                          : NULL;
}

dc_status dc_axes_add_block_grad(dc_tape *tape, dc_tensor *x, const dc_axes *ax, const void *block_grad)
{
    dc_tensor view;
    if (one_run(ax)) {
        view = *x;
        view.data = (void *)block_grad;
        view.grad = NULL;
        dc_contiguous_strides(x->ndim, x->shape, view.strides);
    } else {
        block_view(x, ax, (void *)block_grad, &view);
    }
    const dc_tensor *reads[1] = {&view};
    return dc_backward_kernel(tape, DC_K_COPY, NULL, x->ndim, x->shape, 1, reads, 1, &x);
}

dc_status dc_axes_grad_target(dc_tape *tape, dc_tensor *x, bool block_is_x, void **g, bool *direct, bool *add)
{
    dc_write_mode mode;
    const dc_status st = dc_grad_prepare(tape, x, &mode);
    if (st != DC_OK)
        return st;
    *direct = block_is_x && (mode == DC_WRITE_ASSIGN || add) && dc_tensor_is_contiguous(x->grad);
    if (add)
        *add = *direct && mode == DC_WRITE_ACCUMULATE;
    const size_t bytes = (size_t)(x->numel ? x->numel : 1) * dc_dtype_size(x->dtype);
    *g = *direct ? x->grad->data : dc_tape_alloc_data(tape, bytes);
    return *g ? DC_OK : DC_ERR_MEMORY;
}
