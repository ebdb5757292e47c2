/* The ops that run one engine kernel forward into a new tensor, or one
 * backward kernel into input gradients, and the broadcast check they share. */
#include <string.h>

#include "ops_internal.h"

dc_status dc_broadcast_check(dc_ctx *ctx, const char *op, int n, dc_tensor *const *tensors,
                             const char *const *labels, int *out_ndim, int64_t *out_shape)
{
    int ndims[DC_BFN_MAX_INPUTS];
    const int64_t *shapes[DC_BFN_MAX_INPUTS];
    for (int i = 0; i < n; ++i) {
        if (!tensors[i])
            return DC_ERR_ARG; /* reported by the caller */
        ndims[i] = tensors[i]->ndim;
        shapes[i] = tensors[i]->shape;
        if (tensors[i]->dtype != tensors[0]->dtype)
            return dc_error(ctx, DC_ERR_DTYPE, "%s: %s is %s but %s is %s; convert one of them", op,
                            labels[0], dc_dtype_name(tensors[0]->dtype), labels[i],
                            dc_dtype_name(tensors[i]->dtype));
    }
    int bi, bj, axis;
    if (!dc_broadcast_shape(n, ndims, shapes, out_ndim, out_shape, &bi, &bj, &axis)) {
        char sa[128], sb[128];
        dc_shape_format(sa, sizeof sa, ndims[bi], shapes[bi]);
        dc_shape_format(sb, sizeof sb, ndims[bj], shapes[bj]);
        return dc_error(ctx, DC_ERR_SHAPE,
                        "%s: shapes do not broadcast: %s %s and %s %s differ at axis %d (%lld vs %lld)", op,
                        labels[bi], sa, labels[bj], sb, axis, (long long)shapes[bi][ndims[bi] + axis],
                        (long long)shapes[bj][ndims[bj] + axis]);
    }
    /* The result's shape is one a tensor can have: its strides are computed
     * before it is allocated (a size-0 axis beside huge ones broadcasts to a
     * shape of no elements whose strides overflow). */
    return dc_check_shape(ctx, op, *out_ndim, out_shape);
}

dc_tensor *dc_forward_kernel(dc_tape *tape, const char *op, dc_kernel_id id, const void *arg, int n_in,
                             dc_tensor *const *in, const char *const *labels)
{
    if (dc_op_check_args(tape, op, n_in, in, labels) != DC_OK)
        return NULL;
    int ndim;
    int64_t shape[DC_MAX_DIMS];
    if (dc_broadcast_check(tape->ctx, op, n_in, in, labels, &ndim, shape) != DC_OK)
        return NULL;
    dc_tensor *out = dc_tape_alloc_tensor(tape, in[0]->dtype, ndim, shape);
    if (!out)
        return NULL;
    dc_loop_in li[4];
    for (int i = 0; i < n_in; ++i)
        dc_loop_in_tensor(&li[i], in[i], ndim, shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, out, ndim, shape, DC_WRITE_ASSIGN);
    if (dc_run_kernel(tape->ctx, id, arg, out->dtype, ndim, shape, n_in, li, 1, &lo) != DC_OK)
        return NULL;
    return out;
}

dc_status dc_grad_outputs(dc_tape *tape, int ndim, const int64_t *shape, int n_targets, dc_tensor *const *targets,
                          dc_loop_out *out)
{
    for (int k = 0; k < n_targets; ++k) {
        dc_tensor *t = targets[k];
        if (!t || !t->requires_grad) {
            memset(&out[k], 0, sizeof out[k]);
            out[k].mode = DC_WRITE_DISCARD;
            dc_contiguous_strides(ndim, shape, out[k].strides);
            continue;
        }
        dc_write_mode mode;
        dc_status st = dc_grad_prepare(tape, t, &mode);
        if (st != DC_OK)
            return st;
        /* The same tensor twice (x * x): the engine writes outputs in order,
         * so every later occurrence adds to the first. */
        for (int j = 0; j < k; ++j)
            if (targets[j] == t)
                mode = DC_WRITE_ACCUMULATE;
        dc_loop_out_tensor(&out[k], t->grad, ndim, shape, mode);
    }
    return DC_OK;
}

void dc_grad_outputs_done(int n_targets, dc_tensor *const *targets)
{
    for (int k = 0; k < n_targets; ++k)
        if (targets[k] && targets[k]->requires_grad)
            dc_grad_done(targets[k]);
}

dc_status dc_backward_kernel(dc_tape *tape, dc_kernel_id id, const void *arg, int ndim, const int64_t *shape,
                             int n_reads, const dc_tensor *const *reads, int n_targets, dc_tensor *const *targets)
{
    dc_loop_in li[DC_LOOP_MAX_ARRAYS];
    dc_loop_out lo[DC_BFN_MAX_INPUTS];
    for (int i = 0; i < n_reads; ++i)
        dc_loop_in_tensor(&li[i], reads[i], ndim, shape);
    dc_status st = dc_grad_outputs(tape, ndim, shape, n_targets, targets, lo);
    if (st == DC_OK)
        st = dc_run_kernel(tape->ctx, id, arg, reads[0]->dtype, ndim, shape, n_reads, li, n_targets, lo);
    if (st == DC_OK)
        dc_grad_outputs_done(n_targets, targets);
    return st;
}

const dc_tensor *dc_grad_contiguous(dc_tape *tape, const dc_tensor *t)
{
    const dc_tensor *g = t->grad;
    if (dc_tensor_is_contiguous(g))
        return g;
    dc_tensor *c = dc_tape_alloc_tensor(tape, g->dtype, g->ndim, g->shape);
    if (!c || dc_tensor_copy(c, g) != DC_OK)
        return NULL;
    return c;
}
