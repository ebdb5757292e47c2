#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_backend.h"
#include "cuda/nn_cuda.h"
#include "engine/kernels.h"
#include "ops/backward.h"
#include "tape_internal.h"

/* The first block of each arena; later blocks are as large as needed. */
#define META_BLOCK (256u << 10)
#define DATA_BLOCK (16u << 20)

static void *device_block_alloc(void *user, size_t bytes) { return dc_mem_alloc((dc_ctx *)user, bytes); }
static void device_block_free(void *user, void *block) { dc_mem_free((dc_ctx *)user, block); }

dc_tape *dc_tape_new(dc_ctx *ctx)
{
    if (!ctx)
        return NULL;
    dc_tape *tape = calloc(1, sizeof *tape);
    if (!tape) {
        dc_error(ctx, DC_ERR_MEMORY, "dc_tape_new: out of memory");
        return NULL;
    }
    tape->ctx = ctx;
    tape->recording = true;
    tape->generation = 1;
    for (int k = 0; k < 2; ++k)
        dc_arena_init(&tape->meta[k], META_BLOCK, dc_host_block_alloc, dc_host_block_free, NULL);
    tape->fn = "dc_tape_new";
    if (ctx->cuda)
        dc_arena_init(&tape->data, DATA_BLOCK, device_block_alloc, device_block_free, ctx);
    else
        dc_arena_init(&tape->data, DATA_BLOCK, dc_host_block_alloc, dc_host_block_free, NULL);
    return tape;
}

void dc_tape_free(dc_tape *tape)
{
    if (!tape)
        return;
    for (int k = 0; k < 2; ++k)
        dc_arena_release(&tape->meta[k]);
    dc_arena_release(&tape->data);
    free(tape->nodes);
    free(tape);
}

void dc_tape_reset(dc_tape *tape)
{
    if (!tape)
        return;
    /* The other header arena holds the step before last: reuse it, and
     * keep this step's headers for the staleness check. */
    tape->meta_now ^= 1;
    dc_arena_reset(&tape->meta[tape->meta_now]);
    dc_arena_reset(&tape->data);
    tape->n_nodes = 0;
    tape->generation++;
    tape->backward_done = false;
    tape->zero = NULL;
}

bool dc_tape_set_recording(dc_tape *tape, bool recording)
{
    if (!tape)
        return false;
    bool was = tape->recording;
    tape->recording = recording;
    return was;
}

bool dc_tape_is_recording(const dc_tape *tape) { return tape && tape->recording; }
size_t dc_tape_node_count(const dc_tape *tape) { return tape ? tape->n_nodes : 0; }
size_t dc_tape_bytes_in_use(const dc_tape *tape)
{
    return tape ? tape->meta[tape->meta_now].in_use + tape->data.in_use : 0;
}
size_t dc_tape_peak_bytes(const dc_tape *tape)
{
    if (!tape)
        return 0;
    const size_t meta = tape->meta[0].peak > tape->meta[1].peak ? tape->meta[0].peak : tape->meta[1].peak;
    return meta + tape->data.peak;
}
size_t dc_tape_reserved_bytes(const dc_tape *tape)
{
    return tape ? tape->meta[0].reserved + tape->meta[1].reserved + tape->data.reserved : 0;
}
dc_ctx *dc_tape_ctx(const dc_tape *tape) { return tape ? tape->ctx : NULL; }

/* "dc_op_matmul" or "dc_backward (the adjoint of matmul)", for messages. */
static const char *tape_fn(const dc_tape *tape, char *buf, size_t size)
{
    if (!tape->adjoint_of)
        return tape->fn;
    snprintf(buf, size, "%s (the adjoint of %s)", tape->fn, tape->adjoint_of);
    return buf;
}

void *dc_tape_alloc_meta(dc_tape *tape, size_t bytes)
{
    void *p = dc_arena_alloc(&tape->meta[tape->meta_now], bytes, 16);
    if (!p) {
        char buf[96];
        dc_error(tape->ctx, DC_ERR_MEMORY, "%s: out of host memory for the tape (%zu bytes)",
                 tape_fn(tape, buf, sizeof buf), bytes);
    }
    return p;
}

void *dc_tape_alloc_data(dc_tape *tape, size_t bytes)
{
    void *p = dc_arena_alloc(&tape->data, bytes, 64);
    if (!p) {
        char buf[96];
        dc_error(tape->ctx, DC_ERR_MEMORY, "%s: out of %s memory for the tape (%zu bytes)",
                 tape_fn(tape, buf, sizeof buf), tape->ctx->cuda ? "device" : "host", bytes);
    } else if (dc_mem_poison(tape->ctx, p, bytes) != DC_OK) {
        return NULL;
    }
    return p;
}

/* Every shape an op makes passes the bound of dc_tensor_new, here. */
static bool shape_ok(dc_tape *tape, int ndim, const int64_t *shape)
{
    char buf[96];
    return dc_check_shape(tape->ctx, tape_fn(tape, buf, sizeof buf), ndim, shape) == DC_OK;
}

dc_tensor *dc_tape_alloc_tensor(dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape)
{
    if (!shape_ok(tape, ndim, shape))
        return NULL;
    dc_tensor *t = dc_tape_alloc_meta(tape, sizeof *t);
    if (!t)
        return NULL;
    dc_tensor_init_header(t, tape->ctx, dtype, ndim, shape);
    t->tape = tape;
    t->generation = tape->generation;
    t->data = dc_tape_alloc_data(tape, (size_t)t->numel * dc_dtype_size(dtype));
    return t->data ? t : NULL;
}

dc_tensor *dc_tape_alloc_view(dc_tape *tape, const dc_tensor *base, int ndim, const int64_t *shape,
                              const int64_t *strides, void *data)
{
    if (!shape_ok(tape, ndim, shape))
        return NULL;
    dc_tensor *t = dc_tape_alloc_meta(tape, sizeof *t);
    if (!t)
        return NULL;
    dc_tensor_init_header(t, tape->ctx, base->dtype, ndim, shape);
    for (int d = 0; d < ndim; ++d)
        t->strides[d] = strides[d];
    t->tape = tape;
    t->generation = tape->generation;
    t->data = data;
    return t;
}

dc_tensor *dc_tape_tensor_new(dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    if (!tape)
        return NULL;
    tape->fn = "dc_tape_tensor_new";
    tape->adjoint_of = NULL;
    if (dtype != DC_F32 && dtype != DC_F64) {
        dc_error(tape->ctx, DC_ERR_DTYPE, "dc_tape_tensor_new: unknown dtype %d", (int)dtype);
        return NULL;
    }
    if (dc_check_shape(tape->ctx, "dc_tape_tensor_new", ndim, shape) != DC_OK)
        return NULL;
    dc_tensor *t = dc_tape_alloc_tensor(tape, dtype, ndim, shape);
    if (!t)
        return NULL;
    const size_t bytes = (size_t)t->numel * dc_dtype_size(dtype);
    dc_status st = data ? dc_mem_from_host(tape->ctx, t->data, data, bytes) : dc_mem_zero(tape->ctx, t->data, bytes);
    return st == DC_OK ? t : NULL;
}

dc_tensor *dc_tape_scalar(dc_tape *tape, dc_dtype dtype, double value)
{
    if (tape && dtype != DC_F32 && dtype != DC_F64) {
        dc_error(tape->ctx, DC_ERR_DTYPE, "dc_tape_scalar: unknown dtype %d", (int)dtype);
        return NULL;
    }
    if (tape && tape->ctx->cuda) {
        /* a kernel writes it: a copy from the host would make it wait */
        dc_tensor *t = dc_tape_tensor_new(tape, dtype, 0, NULL, NULL);
        return t && dc_cuda_fill(tape->ctx, dtype, t->data, 1, value) == DC_OK ? t : NULL;
    }
    float f = (float)value;
    return dc_tape_tensor_new(tape, dtype, 0, NULL, dtype == DC_F32 ? (const void *)&f : (const void *)&value);
}

bool dc_tape_wants_node(const dc_tape *tape, int n_in, dc_tensor *const *in)
{
    if (!tape->recording)
        return false;
    for (int i = 0; i < n_in; ++i)
        if (in[i] && in[i]->requires_grad)
            return true;
    return false;
}

dc_node *dc_tape_record(dc_tape *tape, dc_op op, int n_in, dc_tensor *const *in, int n_out, dc_tensor *const *out)
{
    if (tape->n_nodes == tape->cap_nodes) {
        size_t cap = tape->cap_nodes ? 2 * tape->cap_nodes : 256;
        dc_node **nodes = realloc(tape->nodes, cap * sizeof *nodes);
        if (!nodes) {
            dc_error(tape->ctx, DC_ERR_MEMORY, "out of memory recording a %s node", dc_op_table[op].name);
            return NULL;
        }
        tape->nodes = nodes;
        tape->cap_nodes = cap;
    }
    dc_node *node = dc_tape_alloc_meta(tape, sizeof *node);
    dc_tensor **arrays = dc_tape_alloc_meta(tape, (size_t)(n_in + n_out) * sizeof *arrays);
    if (!node || !arrays)
        return NULL;
    memset(node, 0, sizeof *node);
    node->op = op;
    node->region = tape->region;
    node->n_in = n_in;
    node->n_out = n_out;
    node->in = arrays;
    node->out = arrays + n_in;
    memcpy(node->in, in, (size_t)n_in * sizeof *arrays);
    memcpy(node->out, out, (size_t)n_out * sizeof *arrays);
    for (int i = 0; i < n_out; ++i) {
        out[i]->requires_grad = true;
        out[i]->is_leaf = false;
    }
    tape->nodes[tape->n_nodes++] = node;
    return node;
}

/* A recorded slice gets its gradient as a view into its base's gradient:
 * every contribution to the slice lands where the slice's adjoint would have
 * copied it, and that adjoint has nothing left to do. */
static dc_status grad_in_base(dc_tape *tape, dc_tensor *t)
{
    dc_tensor *base = t->slice_base;
    dc_status st = dc_grad_prepare_partial(tape, base);
    if (st != DC_OK)
        return st;
    const dc_tensor *bg = base->grad;
    void *data = (unsigned char *)bg->data + (size_t)(t->slice_start * bg->strides[t->slice_axis]) * dc_dtype_size(t->dtype);
    dc_tensor *g = dc_tape_alloc_view(tape, bg, t->ndim, t->shape, bg->strides, data);
    if (!g)
        return DC_ERR_MEMORY;
    g->is_grad = true;
    t->grad = g;
    t->grad_valid = true; /* it holds the base's values: zeros or earlier contributions */
    t->grad_in_base = true;
    return DC_OK;
}

dc_status dc_grad_prepare(dc_tape *tape, dc_tensor *t, dc_write_mode *mode)
{
    if (!t->grad && t->slice_base && t->slice_base->requires_grad) {
        dc_status st = grad_in_base(tape, t);
        if (st != DC_OK)
            return st;
    }
    if (!t->grad) {
        dc_tensor *g;
        if (t->tape) {
            g = dc_tape_alloc_tensor(tape, t->dtype, t->ndim, t->shape); /* poisoned there */
        } else {
            g = dc_tensor_new(t->ctx, t->dtype, t->ndim, t->shape);
            const dc_status st = g ? dc_mem_poison(tape->ctx, g->data, (size_t)g->numel * dc_dtype_size(g->dtype)) : DC_OK;
            if (st != DC_OK) {
                dc_tensor_free(g);
                return st;
            }
        }
        if (!g)
            return dc_error(tape->ctx, DC_ERR_MEMORY, "out of memory for a gradient");
        g->is_grad = true;
        t->grad = g;
        t->grad_valid = false;
    }
    *mode = t->grad_valid ? DC_WRITE_ACCUMULATE : DC_WRITE_ASSIGN;
    return DC_OK;
}

void dc_grad_done(dc_tensor *t) { t->grad_valid = true; }

dc_status dc_grad_prepare_partial(dc_tape *tape, dc_tensor *t)
{
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, t, &mode);
    if (st != DC_OK)
        return st;
    if (mode == DC_WRITE_ASSIGN) {
        st = dc_mem_zero(tape->ctx, t->grad->data, (size_t)t->grad->numel * dc_dtype_size(t->dtype));
        if (st != DC_OK)
            return st;
        dc_grad_done(t);
    }
    return DC_OK;
}

const dc_tensor *dc_node_adjoint(dc_tape *tape, const dc_tensor *t, dc_tensor *zero_view)
{
    if (t->grad && t->grad_valid)
        return t->grad;
    dc_tensor_init_header(zero_view, tape->ctx, t->dtype, 0, NULL);
    zero_view->data = tape->zero;
    return zero_view;
}

/* `what` of `fn` is NULL: when the NULL came from a failed op, the error
 * keeps the cause's status and message (the context's last error). */
static dc_status null_tensor_error(dc_ctx *ctx, const char *fn, const char *what)
{
    char cause[sizeof ctx->error];
    memcpy(cause, ctx->error, sizeof cause);
    const dc_status cause_status = ctx->status;
    if (cause[0] && cause_status != DC_OK)
        return dc_error(ctx, cause_status, "%s: %s is NULL (after: %s)", fn, what, cause);
    return dc_error(ctx, DC_ERR_ARG, "%s: %s is NULL", fn, what);
}

dc_status dc_op_check_args(dc_tape *tape, const char *op, int n, dc_tensor *const *in, const char *const *labels)
{
    if (!tape)
        return DC_ERR_ARG;
    tape->fn = op;
    tape->adjoint_of = NULL;
    for (int i = 0; i < n; ++i) {
        if (in[i])
            continue;
        char what[48];
        snprintf(what, sizeof what, "input %s", labels[i]);
        return null_tensor_error(tape->ctx, op, what);
    }
    for (int i = 0; i < n; ++i) {
        if (in[i]->tape && in[i]->tape != tape)
            return dc_error(tape->ctx, DC_ERR_ARG, "%s: input %s belongs to another tape", op, labels[i]);
        if (in[i]->ctx != tape->ctx)
            return dc_error(tape->ctx, DC_ERR_ARG, "%s: input %s belongs to another context", op, labels[i]);
        char what[48];
        snprintf(what, sizeof what, "input %s", labels[i]);
        dc_status st = dc_tensor_check_live(in[i], op, what);
        if (st != DC_OK)
            return st;
    }
    dc_capture_note_op(tape->ctx, op, n, in);
    return DC_OK;
}

/* Whether `t` is an output of a node recorded since the last reset; compares
 * pointers only, so a stale pointer is never dereferenced. */
static bool recorded_here(const dc_tape *tape, const dc_tensor *t)
{
    for (size_t i = tape->n_nodes; i-- > 0;) {
        const dc_node *node = tape->nodes[i];
        for (int k = 0; k < node->n_out; ++k)
            if (node->out[k] == t)
                return true;
    }
    return false;
}

static double now_seconds(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int dc_tape_set_region(dc_tape *tape, int region)
{
    if (!tape)
        return 0;
    const int was = tape->region;
    if (region >= 0 && region < DC_TAPE_REGIONS)
        tape->region = region;
    else
        dc_error(tape->ctx, DC_ERR_ARG, "dc_tape_set_region: region %d is outside 0..%d; the region stays %d", region,
                 DC_TAPE_REGIONS - 1, was);
    return was;
}

void dc_tape_set_timing(dc_tape *tape, bool on)
{
    if (tape)
        tape->timing = on;
}

double dc_tape_region_seconds(const dc_tape *tape, int region)
{
    return (tape && region >= 0 && region < DC_TAPE_REGIONS) ? tape->region_seconds[region] : 0.0;
}

void dc_tape_clear_timing(dc_tape *tape)
{
    if (tape)
        memset(tape->region_seconds, 0, sizeof tape->region_seconds);
}

static dc_status sweep(dc_tape *tape)
{
    for (size_t i = tape->n_nodes; i-- > 0;) {
        dc_node *node = tape->nodes[i];
        bool reached = false;
        for (int k = 0; k < node->n_out; ++k)
            reached = reached || (node->out[k]->grad && node->out[k]->grad_valid);
        if (!reached)
            continue;
        bool needed = false;
        for (int k = 0; k < node->n_in; ++k)
            needed = needed || node->in[k]->requires_grad;
        if (!needed)
            continue;
        const double t0 = tape->timing ? now_seconds() : 0.0;
        tape->adjoint_of = dc_op_table[node->op].name;
        dc_status st = dc_op_table[node->op].backward(tape, node);
        if (st != DC_OK)
            return st;
        if (tape->timing)
            tape->region_seconds[node->region] += now_seconds() - t0;
    }
    return DC_OK;
}

/* Everything that must hold before a backward pass may touch `output`. */
static dc_status check_output(dc_tape *tape, const dc_tensor *output, const char *fn)
{
    dc_ctx *ctx = tape->ctx;
    tape->fn = fn;
    tape->adjoint_of = NULL;
    if (!output)
        return null_tensor_error(ctx, fn, "the output");
    dc_status st = dc_tensor_check_live(output, fn, "the output");
    if (st != DC_OK)
        return st;
    dc_capture_note_op(ctx, fn, 1, (dc_tensor *const *)&output);
    if (tape->backward_done)
        return dc_error(ctx, DC_ERR_STATE,
                        "%s: backward already ran on this tape; call dc_tape_reset and record the step again", fn);
    if (tape->n_nodes == 0)
        return dc_error(ctx, DC_ERR_STATE,
                        "%s: the tape holds no nodes: it was reset since the output was computed, or nothing was "
                        "recorded (no input requires a gradient, or recording is off)",
                        fn);
    if (!recorded_here(tape, output))
        return dc_error(ctx, DC_ERR_ARG,
                        "%s: the output was not computed on this tape since its last reset, or does not depend on "
                        "any tensor that requires a gradient",
                        fn);
    return DC_OK;
}

/* Sets output's gradient to `adjoint` broadcast to output's shape (a view of
 * the adjoint's memory, not a copy). */
static dc_status seed_grad(dc_tape *tape, dc_tensor *output, const dc_tensor *adjoint, const char *fn)
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
        /* added where the output's gradient holds values already (a slice's,
         * in its base's gradient) */
        dc_loop_out_tensor(&lo, output->grad, ndim, shape, mode);
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

static dc_status run_backward(dc_tape *tape, dc_tensor *output, const dc_tensor *adjoint, const char *fn)
{
    tape->zero = dc_tape_alloc_data(tape, 8);
    if (!tape->zero)
        return DC_ERR_MEMORY;
    dc_status st = dc_mem_zero(tape->ctx, tape->zero, 8);
    if (st == DC_OK)
        st = seed_grad(tape, output, adjoint, fn);
    if (st != DC_OK)
        return st;
    tape->backward_done = true;
    return sweep(tape);
}

dc_status dc_backward_with(dc_tape *tape, dc_tensor *output, const dc_tensor *adjoint)
{
    if (!tape)
        return DC_ERR_ARG;
    dc_status st = check_output(tape, output, "dc_backward_with");
    if (st != DC_OK)
        return st;
    if (!adjoint)
        return dc_error(tape->ctx, DC_ERR_ARG, "dc_backward_with: the adjoint is NULL");
    st = dc_tensor_check_live(adjoint, "dc_backward_with", "the adjoint");
    if (st != DC_OK)
        return st;
    if (adjoint->ctx != tape->ctx || (adjoint->tape && adjoint->tape != tape))
        return dc_error(tape->ctx, DC_ERR_ARG, "dc_backward_with: the adjoint belongs to another %s",
                        adjoint->ctx != tape->ctx ? "context" : "tape");
    if (adjoint->dtype != output->dtype)
        return dc_error(tape->ctx, DC_ERR_DTYPE, "dc_backward_with: the adjoint is %s but the output is %s",
                        dc_dtype_name(adjoint->dtype), dc_dtype_name(output->dtype));
    return run_backward(tape, output, adjoint, "dc_backward_with");
}

dc_status dc_backward(dc_tape *tape, dc_tensor *loss)
{
    if (!tape)
        return DC_ERR_ARG;
    dc_status st = check_output(tape, loss, "dc_backward");
    if (st != DC_OK)
        return st;
    if (loss->numel != 1) {
        char s[128];
        return dc_error(tape->ctx, DC_ERR_SHAPE,
                        "dc_backward: the loss has shape %s (%lld elements); reduce it to one element or use "
                        "dc_backward_with",
                        dc_tensor_shape_str(loss, s, sizeof s), (long long)loss->numel);
    }
    const bool was = tape->recording;
    tape->recording = false;
    dc_tensor *one = dc_tape_scalar(tape, loss->dtype, 1.0);
    tape->recording = was;
    if (!one)
        return DC_ERR_MEMORY;
    return run_backward(tape, loss, one, "dc_backward");
}
