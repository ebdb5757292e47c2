/* The fused broadcast node: a user's broadcast function run over broadcast
 * inputs as ONE tape node. Forward: one pass of the dual instantiation writes
 * the outputs and the partials (struct of arrays: partial (k, j) of output k
 * with respect to differentiable input j is one array in the output's
 * shape). Backward: one pass multiplies partials with output adjoints, sums
 * over outputs and unbroadcasts into each input's gradient. With the
 * recompute policy the forward writes only the outputs and the backward pass
 * runs the dual instantiation again. */
#include <stdio.h>
#include <string.h>

#include "../cuda/cuda_backend.h"
#include "backward.h"
#include "ops_internal.h"

static const char *input_list(const dc_bfn *fn, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < fn->n_inputs && at < size; ++i)
        at += (size_t)snprintf(buf + at, size - at, "%s%s%s", i ? ", " : "", fn->input_names[i],
                               fn->is_wrt[i] ? "" : " (control)");
    return buf;
}

static dc_status check_call(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs, int n_outputs,
                            dc_tensor **outputs, dc_partials_policy policy, char *op, size_t op_size)
{
    dc_ctx *ctx = tape->ctx;
    if (!fn)
        return dc_error(ctx, DC_ERR_ARG, "dc_broadcast: the function is NULL");
    if (fn->abi_version != DC_BFN_ABI_VERSION)
        return dc_error(ctx, DC_ERR_ARG,
                        "dc_broadcast: function %s was compiled for interface version %d, this library has %d; "
                        "rebuild it",
                        fn->name ? fn->name : "?", fn->abi_version, DC_BFN_ABI_VERSION);
    snprintf(op, op_size, "dc_broadcast(%s)", fn->name);
    char list[512];
    if (n_inputs != fn->n_inputs)
        return dc_error(ctx, DC_ERR_ARG, "%s: expects %d inputs (%s), got %d", op, fn->n_inputs,
                        input_list(fn, list, sizeof list), n_inputs);
    if (n_outputs != fn->n_outputs)
        return dc_error(ctx, DC_ERR_ARG, "%s: has %d outputs, got room for %d", op, fn->n_outputs, n_outputs);
    if (n_inputs > 0 && !inputs)
        return dc_error(ctx, DC_ERR_ARG, "%s: the inputs array is NULL", op);
    if (!outputs)
        return dc_error(ctx, DC_ERR_ARG, "%s: the outputs array is NULL", op);
    if (policy != DC_PARTIALS_STORE && policy != DC_PARTIALS_RECOMPUTE)
        return dc_error(ctx, DC_ERR_ARG, "%s: unknown partials policy %d", op, (int)policy);
    if (ctx->cuda && !fn->cuda)
        return dc_error(ctx, DC_ERR_UNSUPPORTED, "%s: the function was built without CUDA kernels", op);
    return DC_OK;
}

/* Loop inputs for the function's inputs, control ones flagged. */
static void function_inputs(const dc_bfn *fn, dc_tensor *const *inputs, int ndim, const int64_t *shape,
                            dc_loop_in *li)
{
    for (int i = 0; i < fn->n_inputs; ++i) {
        dc_loop_in_tensor(&li[i], inputs[i], ndim, shape);
        li[i].control = !fn->is_wrt[i];
    }
}

/* Which instantiation a pass runs. */
typedef enum { RUN_PRIMAL, RUN_DUAL, RUN_ADJOINT } run_kind;

/* Runs the function's kernels over the loop: n_in inputs, then (adjoint
 * runs) n_adj output adjoints. */
static dc_status run(dc_ctx *ctx, const dc_bfn *fn, run_kind kind, int ndim, const int64_t *shape, dc_dtype dtype,
                     int n_in, const dc_loop_in *in, int n_adj, int n_out, const dc_loop_out *out)
{
    const int t = dtype == DC_F64 ? DC_BFN_F64 : DC_BFN_F32;
    if (ctx->cuda) {
        const dc_bfn_cuda_kernels *k = &fn->cuda[t];
        const dc_bfn_cuda_launcher launcher = kind == RUN_PRIMAL ? k->primal : kind == RUN_DUAL ? k->dual : k->adjoint;
        return dc_cuda_run_bfn(ctx, launcher, dtype, ndim, shape, n_in, in, n_adj, in + n_in, n_out, out);
    }
    const dc_bfn_cpu_kernels *c = &fn->cpu[t];
    const dc_bfn_cpu_kernel *kernels = kind == RUN_PRIMAL ? c->primal : kind == RUN_DUAL ? c->dual : c->adjoint;
    dc_loop loop;
    memset(&loop, 0, sizeof loop);
    loop.dtype = dtype;
    loop.ndim = ndim;
    memcpy(loop.shape, shape, (size_t)ndim * sizeof *shape);
    loop.n_in = n_in + n_adj;
    loop.in = in;
    loop.n_out = n_out;
    loop.out = out;
    loop.kernel = kernels[DC_BFN_VARYING];
    loop.kernel_uniform = kernels[DC_BFN_UNIFORM];
    loop.heavy = true;
    return dc_loop_run_cpu(ctx, &loop);
}

dc_status dc_broadcast_policy(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs,
                              int n_outputs, dc_tensor **outputs, dc_partials_policy policy)
{
    if (!tape)
        return DC_ERR_ARG;
    dc_ctx *ctx = tape->ctx;
    char op[96];
    dc_status st = check_call(tape, fn, n_inputs, inputs, n_outputs, outputs, policy, op, sizeof op);
    if (st != DC_OK)
        return st;
    for (int k = 0; k < n_outputs; ++k)
        outputs[k] = NULL;
    st = dc_op_check_args(tape, op, n_inputs, inputs, fn->input_names);
    if (st != DC_OK)
        return st;
    int ndim;
    int64_t shape[DC_MAX_DIMS];
    st = dc_broadcast_check(ctx, op, n_inputs, inputs, fn->input_names, &ndim, shape);
    if (st != DC_OK)
        return st;
    const dc_dtype dtype = inputs[0]->dtype;
    const int m = fn->n_outputs, nw = fn->n_wrt;

    dc_tensor *wrt[DC_BFN_MAX_INPUTS];
    for (int i = 0, j = 0; i < n_inputs; ++i)
        if (fn->is_wrt[i])
            wrt[j++] = inputs[i];
    const bool record = nw > 0 && dc_tape_wants_node(tape, nw, wrt);
    const bool store = record && policy == DC_PARTIALS_STORE;

    /* Outputs first, then (store policy) the m * nw partial arrays. */
    const int n_arrays = store ? m * (1 + nw) : m;
    void **partials = NULL;
    if (store) {
        partials = dc_tape_alloc_meta(tape, (size_t)(m * nw) * sizeof *partials);
        if (!partials)
            return DC_ERR_MEMORY;
    }
    dc_loop_out lo[DC_BFN_MAX_ARRAYS];
    int64_t contiguous[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, shape, contiguous);
    for (int a = 0; a < n_arrays; ++a) {
        void *data;
        if (a < m) {
            outputs[a] = dc_tape_alloc_tensor(tape, dtype, ndim, shape);
            if (!outputs[a])
                return dc_last_status(tape->ctx); /* a shape past the bound, or memory */
            data = outputs[a]->data;
        } else {
            data = partials[a - m] = dc_tape_alloc_data(tape, (size_t)dc_shape_numel(ndim, shape) * dc_dtype_size(dtype));
            if (!data)
                return DC_ERR_MEMORY;
        }
        lo[a].data = data;
        lo[a].mode = DC_WRITE_ASSIGN;
        memcpy(lo[a].strides, contiguous, sizeof contiguous);
    }
    dc_loop_in li[DC_BFN_MAX_INPUTS];
    function_inputs(fn, inputs, ndim, shape, li);
    st = run(ctx, fn, store ? RUN_DUAL : RUN_PRIMAL, ndim, shape, dtype, n_inputs, li, 0, n_arrays, lo);
    if (st != DC_OK)
        return st;
    if (!record)
        return DC_OK;
    dc_node *node = dc_tape_record(tape, DC_OP_BROADCAST_FN, n_inputs, inputs, m, outputs);
    if (!node)
        return DC_ERR_MEMORY;
    node->as.broadcast_fn.fn = fn;
    node->as.broadcast_fn.policy = policy;
    node->as.broadcast_fn.partials = partials;
    return DC_OK;
}

dc_status dc_broadcast(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs, int n_outputs,
                       dc_tensor **outputs)
{
    return dc_broadcast_policy(tape, fn, n_inputs, inputs, n_outputs, outputs, DC_PARTIALS_STORE);
}

dc_tensor *dc_broadcast1(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs)
{
    dc_tensor *out = NULL;
    if (fn && fn->n_outputs != 1) {
        if (tape)
            dc_error(tape->ctx, DC_ERR_ARG, "dc_broadcast1(%s): the function has %d outputs; use dc_broadcast",
                     fn->name, fn->n_outputs);
        return NULL;
    }
    return dc_broadcast(tape, fn, n_inputs, inputs, 1, &out) == DC_OK ? out : NULL;
}

dc_status dc_broadcast_fn_backward(dc_tape *tape, dc_node *node)
{
    const dc_bfn *fn = node->as.broadcast_fn.fn;
    const int m = fn->n_outputs, nw = fn->n_wrt;
    const dc_tensor *y = node->out[0];
    const int ndim = y->ndim;
    const int64_t *shape = y->shape;
    const dc_dtype dtype = y->dtype;

    dc_tensor zero_views[DC_BFN_MAX_OUTPUTS];
    const dc_tensor *adjoints[DC_BFN_MAX_OUTPUTS];
    for (int k = 0; k < m; ++k)
        adjoints[k] = dc_node_adjoint(tape, node->out[k], &zero_views[k]);

    dc_tensor *targets[DC_BFN_MAX_INPUTS];
    for (int i = 0, j = 0; i < fn->n_inputs; ++i)
        if (fn->is_wrt[i])
            targets[j++] = node->in[i];
    dc_loop_out lo[DC_BFN_MAX_INPUTS];
    dc_status st = dc_grad_outputs(tape, ndim, shape, nw, targets, lo);
    if (st != DC_OK)
        return st;

    dc_loop_in li[DC_LOOP_MAX_ARRAYS];
    int n_in = 0;
    if (node->as.broadcast_fn.policy == DC_PARTIALS_STORE) {
        /* adjoints, then the stored partials */
        int64_t contiguous[DC_MAX_DIMS];
        dc_contiguous_strides(ndim, shape, contiguous);
        for (int k = 0; k < m; ++k)
            dc_loop_in_tensor(&li[n_in++], adjoints[k], ndim, shape);
        for (int p = 0; p < m * nw; ++p) {
            li[n_in].data = node->as.broadcast_fn.partials[p];
            li[n_in].control = false;
            memcpy(li[n_in].strides, contiguous, sizeof contiguous);
            ++n_in;
        }
        const dc_partials_arg arg = {m, nw};
        st = dc_run_kernel(tape->ctx, DC_K_PARTIALS_BWD, &arg, dtype, ndim, shape, n_in, li, nw, lo);
    } else {
        /* the inputs, then the adjoints; the dual pass runs again */
        function_inputs(fn, node->in, ndim, shape, li);
        for (int k = 0; k < m; ++k)
            dc_loop_in_tensor(&li[fn->n_inputs + k], adjoints[k], ndim, shape);
        st = run(tape->ctx, fn, RUN_ADJOINT, ndim, shape, dtype, fn->n_inputs, li, m, nw, lo);
    }
    if (st == DC_OK)
        dc_grad_outputs_done(nw, targets);
    return st;
}
