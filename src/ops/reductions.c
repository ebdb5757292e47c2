/* Product, maximum, minimum and log-sum-exp over axes (reduce.h). The input
 * is read as an [outer, len, inner] block (axes.h) and reduced by the CPU or
 * CUDA kernels (reduce_cpu.h, reduce_cuda.h), which leave per output what
 * the adjoint needs (reduce_formulas.h) in tape memory: the adjoint is one
 * pass over the block, written straight into x's first gradient where the
 * block is x itself, else into a block then added into x's. */
#include "../cuda/reduce_cuda.h"
#include "axes.h"
#include "backward.h"
#include "reduce_cpu.h"
#include "reduce_kinds.h"

static int kind_of(dc_op op)
{
    switch (op) {
    case DC_OP_PROD:
        return DC_RK_PROD;
    case DC_OP_MAX:
        return DC_RK_MAX;
    case DC_OP_MIN:
        return DC_RK_MIN;
    default:
        return DC_RK_LSE;
    }
}

static dc_tensor *reduce(dc_tape *tape, const char *fn, dc_op op, dc_tensor *x, int n_axes, const int *axes,
                         bool keepdims)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, fn, 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    dc_axes *ax = dc_tape_alloc_meta(tape, sizeof *ax);
    if (!ax || dc_axes_parse(ctx, fn, x, n_axes, axes, keepdims, ax) != DC_OK)
        return NULL;
    const dc_tensor *block = dc_axes_block(tape, x, ax);
    dc_tensor *y = block ? dc_tape_alloc_tensor(tape, x->dtype, ax->out_ndim, ax->out_shape) : NULL;
    /* what the adjoint reads, per output */
    const int64_t count = ax->outer * ax->inner;
    const size_t outputs = (size_t)(count > 0 ? count : 1);
    void *nz = y ? dc_tape_alloc_data(tape, outputs * dc_dtype_size(x->dtype)) : NULL;
    int64_t *aux = nz ? dc_tape_alloc_data(tape, outputs * sizeof *aux) : NULL;
    if (!aux)
        return NULL;
    const int kind = kind_of(op);
    if (ctx->cuda) {
        /* long rows and few long columns go in pieces, whose states the device keeps here */
        const size_t bytes = dc_cuda_reduce_scratch(ax->outer, ax->len, ax->inner);
        void *scratch = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if ((bytes && !scratch) || dc_cuda_reduce_block(ctx, kind, x->dtype, block->data, ax->outer, ax->len, ax->inner,
                                                        y->data, nz, aux, scratch) != DC_OK)
            return NULL;
    } else {
        const size_t bytes = dc_cpu_reduce_scratch(ax->outer, ax->len, ax->inner);
        void *scratch = bytes ? dc_tape_alloc_meta(tape, bytes) : NULL;
        if (bytes && !scratch)
            return NULL;
        dc_cpu_reduce_block(ctx, kind, x->dtype, block->data, ax->outer, ax->len, ax->inner, y->data, nz, aux, scratch);
    }
    if (dc_tape_wants_node(tape, 1, &x)) {
        dc_node *node = dc_tape_record(tape, op, 1, &x, 1, &y);
        if (!node)
            return NULL;
        node->as.reduce.axes = ax;
        node->as.reduce.block = block;
        node->as.reduce.nz = nz;
        node->as.reduce.aux = aux;
    }
    return y;
}

dc_status dc_reduce_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_node_reduce *r = &node->as.reduce;
    const dc_axes *ax = r->axes;
    const dc_tensor *gy = dc_grad_contiguous(tape, node->out[0]);
    const int kind = kind_of(node->op);
    if (gy && !tape->ctx->cuda && (kind == DC_RK_MAX || kind == DC_RK_MIN) && dc_axes_one_run(ax)) {
        /* only the winners' gradient is not zero */
        bool done;
        const dc_status st =
            dc_cpu_winners_grad(tape, x, ax->outer, ax->inner, ax->len * ax->inner, r->aux, gy->data, &done);
        if (st != DC_OK || done)
            return st;
    }
    if (!gy)
        return DC_ERR_MEMORY;
    /* x's first gradient, where it lies as the block does, is written by the
     * kernels themselves; else a block of tape memory, added afterwards */
    void *g;
    bool direct;
    dc_status st = dc_axes_grad_target(tape, x, dc_axes_one_run(ax), &g, &direct, NULL);
    if (st != DC_OK)
        return st;
    const void *y = node->out[0]->data;
    if (tape->ctx->cuda) {
        st = dc_cuda_reduce_block_grad(tape->ctx, kind, x->dtype, r->block->data, ax->outer, ax->len, ax->inner, y,
                                       r->nz, r->aux, gy->data, g);
        if (st != DC_OK)
            return st;
    } else {
        dc_cpu_reduce_block_grad(tape->ctx, kind, x->dtype, r->block->data, ax->outer, ax->len, ax->inner, y, r->nz,
                                 r->aux, gy->data, g);
    }
    if (!direct)
        return dc_axes_add_block_grad(tape, x, ax, g);
    dc_grad_done(x);
    return DC_OK;
}

dc_tensor *dc_op_prod(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_prod", DC_OP_PROD, x, n_axes, axes, keepdims);
}

dc_tensor *dc_op_max(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_max", DC_OP_MAX, x, n_axes, axes, keepdims);
}

dc_tensor *dc_op_min(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_min", DC_OP_MIN, x, n_axes, axes, keepdims);
}

dc_tensor *dc_op_logsumexp(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_logsumexp", DC_OP_LOGSUMEXP, x, n_axes, axes, keepdims);
}

dc_tensor *dc_op_reduce(dc_tape *tape, dc_tensor *x, dc_reduction op, int n_axes, const int *axes, bool keepdims)
{
    switch (op) {
    case DC_REDUCE_SUM:
        return dc_op_sum(tape, x, n_axes, axes, keepdims);
    case DC_REDUCE_PROD:
        return reduce(tape, "dc_op_reduce", DC_OP_PROD, x, n_axes, axes, keepdims);
    case DC_REDUCE_MAX:
        return reduce(tape, "dc_op_reduce", DC_OP_MAX, x, n_axes, axes, keepdims);
    case DC_REDUCE_MIN:
        return reduce(tape, "dc_op_reduce", DC_OP_MIN, x, n_axes, axes, keepdims);
    }
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_reduce", 1, &x, labels) == DC_OK)
        dc_error(tape->ctx, DC_ERR_ARG, "dc_op_reduce: op %d is not a dc_reduction", (int)op);
    return NULL;
}
