#include <stdlib.h>
#include <string.h>

#include "../cuda/cuda_backend.h"
#include "ops_internal.h"

dc_status dc_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                        const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out)
{
    if (ctx->cuda)
        return dc_cuda_run_kernel(ctx, id, arg, dtype, ndim, shape, n_in, in, n_out, out);
    dc_loop loop;
    memset(&loop, 0, sizeof loop);
    loop.dtype = dtype;
    loop.ndim = ndim;
    memcpy(loop.shape, shape, (size_t)ndim * sizeof *shape);
    loop.n_in = n_in;
    loop.in = in;
    loop.n_out = n_out;
    loop.out = out;
    loop.kernel = dc_cpu_kernel(id, dtype);
    loop.arg = arg;
    return dc_loop_run_cpu(ctx, &loop);
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

dc_status dc_seed_grad(dc_tape *tape, dc_tensor *output, const dc_tensor *adjoint, const char *fn)
{
    int ndims[2] = {output->ndim, adjoint->ndim};
    const int64_t *shapes[2] = {output->shape, adjoint->shape};
    int ndim, bi, bj, axis;
    int64_t shape[DC_MAX_DIMS];
    bool ok = dc_broadcast_shape(2, ndims, shapes, &ndim, shape, &bi, &bj, &axis) && ndim == output->ndim;
    for (int d = 0; ok && d < ndim; ++d)
        ok = shape[d] == output->shape[d];
    if (!ok) {
        char so[128], sa[128];
        return dc_error(tape->ctx, DC_ERR_SHAPE, "%s: an adjoint of shape %s does not broadcast to the output's %s",
                        fn, dc_shape_format(sa, sizeof sa, adjoint->ndim, adjoint->shape),
                        dc_shape_format(so, sizeof so, output->ndim, output->shape));
    }
    /* The seed is read, never written: nothing recorded after the output can
     * send it a gradient. So the output's gradient is a view of the adjoint,
     * broadcast in place, and seeding costs no pass over memory. An adjoint
     * that is itself a gradient buffer the sweep may write is copied. */
    if (adjoint->is_grad) {
        dc_write_mode mode;
        dc_status st = dc_grad_prepare(tape, output, &mode);
        if (st != DC_OK)
            return st;
        dc_loop_in li;
        dc_loop_in_tensor(&li, adjoint, ndim, shape);
        dc_loop_out lo;
        dc_loop_out_tensor(&lo, output->grad, ndim, shape, DC_WRITE_ASSIGN);
        st = dc_run_kernel(tape->ctx, DC_K_COPY, NULL, output->dtype, ndim, shape, 1, &li, 1, &lo);
        if (st == DC_OK)
            dc_grad_done(output);
        return st;
    }
    int64_t strides[DC_MAX_DIMS];
    dc_broadcast_strides(adjoint->ndim, adjoint->shape, adjoint->strides, ndim, shape, strides);
    dc_tensor *view = dc_tape_alloc_view(tape, adjoint, ndim, shape, strides, adjoint->data);
    if (!view)
        return DC_ERR_MEMORY;
    output->grad = view;
    dc_grad_done(output);
    return DC_OK;
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

/* A copy between contexts of which one runs on a GPU goes through host
 * memory (a CPU context's loops cannot read device memory, nor a kernel the
 * host's), except between two CUDA contexts (on one device or two), where
 * dense tensors are copied from device memory to device memory. */
static dc_status copy_between_contexts(dc_tensor *dst, const dc_tensor *src)
{
    const size_t bytes = (size_t)src->numel * dc_dtype_size(src->dtype);
    if (dst->ctx->cuda && src->ctx->cuda && dc_tensor_is_contiguous(dst) && dc_tensor_is_contiguous(src))
        return dc_cuda_copy_between(dst->ctx, dst->data, src->ctx, src->data, bytes);
    void *host = malloc(bytes ? bytes : 1);
    if (!host)
        return dc_error(dst->ctx, DC_ERR_MEMORY, "dc_tensor_copy: out of memory for %zu bytes", bytes);
    dc_status st = dc_tensor_to_host(src, host, bytes);
    if (st != DC_OK)
        dc_error(dst->ctx, st, "dc_tensor_copy: reading the source failed: %s", dc_last_error(src->ctx));
    else
        st = dc_tensor_from_host_copy(dst, host, bytes);
    free(host);
    return st;
}

dc_status dc_tensor_copy(dc_tensor *dst, const dc_tensor *src)
{
    if (!dst)
        return DC_ERR_ARG;
    dc_ctx *ctx = dst->ctx;
    if (!src)
        return dc_error(ctx, DC_ERR_ARG, "dc_tensor_copy: the source is NULL");
    if (dst->dtype != src->dtype)
        return dc_error(ctx, DC_ERR_DTYPE, "dc_tensor_copy: destination is %s, source is %s",
                        dc_dtype_name(dst->dtype), dc_dtype_name(src->dtype));
    bool same = dst->ndim == src->ndim;
    for (int d = 0; same && d < dst->ndim; ++d)
        same = dst->shape[d] == src->shape[d];
    if (!same) {
        char a[128], b[128];
        return dc_error(ctx, DC_ERR_SHAPE, "dc_tensor_copy: destination %s and source %s differ in shape",
                        dc_tensor_shape_str(dst, a, sizeof a), dc_tensor_shape_str(src, b, sizeof b));
    }
    if (src->ctx != ctx && (src->ctx->cuda || ctx->cuda))
        return copy_between_contexts(dst, src);
    dc_loop_in li;
    dc_loop_in_tensor(&li, src, dst->ndim, dst->shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, dst, dst->ndim, dst->shape, DC_WRITE_ASSIGN);
    return dc_run_kernel(ctx, DC_K_COPY, NULL, dst->dtype, dst->ndim, dst->shape, 1, &li, 1, &lo);
}
