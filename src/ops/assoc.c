/* Reductions, scans and reductions by index with a user-written associative
 * operator (include/dualcast/assoc.h). Each op reads its k fields as
 * [outer, len, inner] blocks (axes.h), runs the operator's kernels
 * (assoc_run.h) and records one node; the adjoints are built from the
 * operator's dual passes only:
 * - reduce: fused, piece by piece (the reduce-adjoint kernel): the states
 *   before and after each piece from the forward's piece totals, then in
 *   each piece r walking back into a small buffer and l walking forward,
 *   abar = ybar^T d((l (+) a) (+) r)/d a, written into the gradient;
 * - segment reduce: l = exclusive scan from the left, r = from the right,
 *   s = a (+) r, w = ybar^T d(l (+) s)/d s, abar = w^T d(a (+) r)/d a, with
 *   ybar read through the segment of each row;
 * - scan: the reverse recurrence of the scan-adjoint kernel, a long row in
 *   pieces (each piece's affine map, the carries between them, each piece). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../engine/stream_store.h"
#include "assoc_run.h"
#include "axes.h"
#include "backward.h"
#include "indices.h"

typedef enum { KIND_REDUCE, KIND_SCAN, KIND_SEGMENT } assoc_kind;

/* What the adjoint of an operator's node needs. */
typedef struct dc_assoc_record {
    dc_axes ax;                             /* the block's outer, len, inner (segments: 1, n, width) */
    const void *x[DC_ASSOC_MAX_STATE];      /* the inputs as blocks */
    const void *totals[DC_ASSOC_MAX_STATE]; /* reduce: the forward's piece totals (NULL: one piece a row) */
    bool exclusive;                         /* scan */
    int64_t n_segments;                     /* segment reduce: */
    const int64_t *rows;                    /* the segment of each row, where the kernels read */
    const int64_t *seg_start;               /* n_segments + 1: where each segment's rows begin in seg_rows */
    const int64_t *seg_rows;                /* the rows by segment, ascending within each */
} dc_assoc_record;

static dc_status check_fields(dc_tape *tape, const char *name, const dc_assoc *op, dc_tensor *const *x);

/* The checks of every call (see assoc.h): the operator and the arrays (out
 * apart from x) before out[] is touched, then out[] cleared, then the fields
 * (check_fields); name receives "fn(operator)" for the messages. */
static dc_status check_call(dc_tape *tape, const char *fn, const dc_assoc *op, dc_tensor *const *x, const char *x_label,
                            dc_tensor **out, char *name, size_t name_size)
{
    if (!tape)
        return DC_ERR_ARG;
    dc_ctx *ctx = tape->ctx;
    if (!op)
        return dc_error(ctx, DC_ERR_ARG, "%s: the operator is NULL", fn);
    if (op->abi_version != DC_ASSOC_ABI_VERSION)
        return dc_error(ctx, DC_ERR_ARG,
                        "%s: operator %s was compiled for interface version %d, this library has %d; rebuild it", fn,
                        op->name ? op->name : "?", op->abi_version, DC_ASSOC_ABI_VERSION);
    if (op->n_state < 1 || op->n_state > DC_ASSOC_MAX_STATE)
        return dc_error(ctx, DC_ERR_ARG, "%s: operator %s has %d fields (1 to %d allowed)", fn, op->name, op->n_state,
                        DC_ASSOC_MAX_STATE);
    snprintf(name, name_size, "%s(%s)", fn, op->name);
    if (!x)
        return dc_error(ctx, DC_ERR_ARG, "%s: the %s array is NULL", name, x_label);
    if (!out)
        return dc_error(ctx, DC_ERR_ARG, "%s: the out array is NULL", name);
    /* (compared as numbers: the arrays may be separate objects) */
    const uintptr_t xb = (uintptr_t)x, xe = (uintptr_t)(x + op->n_state);
    const uintptr_t ob = (uintptr_t)out, oe = (uintptr_t)(out + op->n_state);
    if (ob < xe && xb < oe)
        return dc_error(ctx, DC_ERR_ARG,
                        "%s: the out array overlaps the %s array: the outputs would replace the inputs the op reads",
                        name, x_label);
    if (ctx->cuda && !op->cuda)
        return dc_error(ctx, DC_ERR_UNSUPPORTED, "%s: the operator was built without CUDA kernels", name);
    for (int f = 0; f < op->n_state; ++f)
        out[f] = NULL;
    return check_fields(tape, name, op, x);
}

/* The k fields: not NULL, of this tape, of one shape and one dtype. */
static dc_status check_fields(dc_tape *tape, const char *name, const dc_assoc *op, dc_tensor *const *x)
{
    dc_status st = dc_op_check_args(tape, name, op->n_state, x, op->field_names);
    if (st != DC_OK)
        return st;
    for (int f = 1; f < op->n_state; ++f) {
        char s0[128], s1[128];
        if (x[f]->ndim != x[0]->ndim || memcmp(x[f]->shape, x[0]->shape, (size_t)x[0]->ndim * sizeof(int64_t)))
            return dc_error(tape->ctx, DC_ERR_SHAPE, "%s: field %s has shape %s but field %s has %s", name,
                            op->field_names[f], dc_tensor_shape_str(x[f], s1, sizeof s1), op->field_names[0],
                            dc_tensor_shape_str(x[0], s0, sizeof s0));
        if (x[f]->dtype != x[0]->dtype)
            return dc_error(tape->ctx, DC_ERR_DTYPE, "%s: field %s is %s but field %s is %s", name, op->field_names[f],
                            dc_dtype_name(x[f]->dtype), op->field_names[0], dc_dtype_name(x[0]->dtype));
    }
    return DC_OK;
}

/* The fields as contiguous [outer, len, inner] blocks. */
static bool block_fields(dc_tape *tape, int k, dc_tensor *const *x, const dc_axes *ax, const void **blocks)
{
    for (int f = 0; f < k; ++f) {
        const dc_tensor *b = dc_axes_block(tape, x[f], ax);
        if (!b)
            return false;
        blocks[f] = b->data;
    }
    return true;
}

static dc_status new_outputs(dc_tape *tape, int k, dc_dtype dtype, int ndim, const int64_t *shape, dc_tensor **out,
                             void **data)
{
    for (int f = 0; f < k; ++f) {
        if (!(out[f] = dc_tape_alloc_tensor(tape, dtype, ndim, shape)))
            return dc_last_status(tape->ctx);
        data[f] = out[f]->data;
    }
    return DC_OK;
}

static dc_status record(dc_tape *tape, dc_op kind, const dc_assoc *op, dc_tensor *const *x, dc_tensor **out,
                        const dc_assoc_record *rec)
{
    const int k = op->n_state;
    if (!dc_tape_wants_node(tape, k, x))
        return DC_OK;
    dc_assoc_record *kept = dc_tape_alloc_meta(tape, sizeof *kept);
    dc_node *node = kept ? dc_tape_record(tape, kind, k, x, k, out) : NULL;
    if (!node)
        return DC_ERR_MEMORY;
    *kept = *rec;
    node->as.assoc.op = op;
    node->as.assoc.rec = kept;
    return DC_OK;
}

dc_status dc_op_reduce_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *x, int n_axes, const int *axes,
                          bool keepdims, dc_tensor **out)
{
    char name[96];
    dc_status st = check_call(tape, "dc_op_reduce_fn", op, x, "x", out, name, sizeof name);
    if (st != DC_OK)
        return st;
    const int k = op->n_state;
    dc_assoc_record rec;
    memset(&rec, 0, sizeof rec);
    if ((st = dc_axes_parse(tape->ctx, name, x[0], n_axes, axes, keepdims, &rec.ax)) != DC_OK)
        return st;
    void *y[DC_ASSOC_MAX_STATE];
    if (!block_fields(tape, k, x, &rec.ax, rec.x))
        return DC_ERR_MEMORY;
    if ((st = new_outputs(tape, k, x[0]->dtype, rec.ax.out_ndim, rec.ax.out_shape, out, y)) != DC_OK)
        return st;
    st = dc_assoc_scan_blocks(tape, op, x[0]->dtype, rec.ax.outer, rec.ax.len, rec.ax.inner, rec.x, NULL, y, 0,
                              rec.totals);
    return st != DC_OK ? st : record(tape, DC_OP_REDUCE_FN, op, x, out, &rec);
}

dc_status dc_op_scan_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *x, int axis, bool exclusive,
                        dc_tensor **out)
{
    char name[96];
    dc_status st = check_call(tape, "dc_op_scan_fn", op, x, "x", out, name, sizeof name);
    if (st != DC_OK)
        return st;
    const int k = op->n_state;
    dc_assoc_record rec;
    memset(&rec, 0, sizeof rec);
    if ((st = dc_axes_parse(tape->ctx, name, x[0], 1, &axis, true, &rec.ax)) != DC_OK)
        return st;
    rec.exclusive = exclusive;
    void *y[DC_ASSOC_MAX_STATE];
    if (!block_fields(tape, k, x, &rec.ax, rec.x))
        return DC_ERR_MEMORY;
    if ((st = new_outputs(tape, k, x[0]->dtype, x[0]->ndim, x[0]->shape, out, y)) != DC_OK)
        return st;
    st = dc_assoc_scan_blocks(tape, op, x[0]->dtype, rec.ax.outer, rec.ax.len, rec.ax.inner, rec.x, y, NULL,
                              exclusive ? DC_ASSOC_EXCLUSIVE : 0, NULL);
    return st != DC_OK ? st : record(tape, DC_OP_SCAN_FN, op, x, out, &rec);
}

/* The rows grouped by segment on the host (the CPU's kernels read them
 * there): a counting sort, ascending rows within each segment. */
static bool group_on_host(dc_tape *tape, const int64_t *rows, int64_t n, int64_t n_segments, dc_assoc_record *rec)
{
    int64_t *start = dc_tape_alloc_meta(tape, (size_t)(n_segments + 1) * sizeof *start);
    int64_t *order = dc_tape_alloc_meta(tape, (size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!start || !order)
        return false;
    memset(start, 0, (size_t)(n_segments + 1) * sizeof *start);
    for (int64_t i = 0; i < n; ++i)
        ++start[rows[i] + 1];
    for (int64_t s = 0; s < n_segments; ++s)
        start[s + 1] += start[s];
    int64_t *cursor = dc_tape_alloc_meta(tape, (size_t)(n_segments > 0 ? n_segments : 1) * sizeof *cursor);
    if (!cursor)
        return false;
    memcpy(cursor, start, (size_t)n_segments * sizeof *cursor);
    for (int64_t i = 0; i < n; ++i)
        order[cursor[rows[i]]++] = i;
    rec->seg_start = start;
    rec->seg_rows = order;
    return true;
}

dc_status dc_op_segment_reduce_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *values, dc_tensor *index,
                                  int64_t n_segments, dc_tensor **out)
{
    char name[96];
    dc_status st = check_call(tape, "dc_op_segment_reduce_fn", op, values, "values", out, name, sizeof name);
    if (st != DC_OK)
        return st;
    dc_ctx *ctx = tape->ctx;
    const int k = op->n_state;
    const char *const index_label[] = {"index"};
    if ((st = dc_op_check_args(tape, name, 1, &index, index_label)) != DC_OK)
        return st;
    char s0[128], s1[128];
    const dc_tensor *v = values[0];
    if (v->ndim < 1)
        return dc_error(ctx, DC_ERR_SHAPE, "%s: values must have at least one axis, got %s", name,
                        dc_tensor_shape_str(v, s0, sizeof s0));
    const int64_t n = v->shape[0];
    if (index->ndim != 1 || index->shape[0] != n)
        return dc_error(ctx, DC_ERR_SHAPE, "%s: index must be [%lld] for values of shape %s, got %s", name,
                        (long long)n, dc_tensor_shape_str(v, s0, sizeof s0), dc_tensor_shape_str(index, s1, sizeof s1));
    if (index->dtype != v->dtype)
        return dc_error(ctx, DC_ERR_DTYPE, "%s: values are %s but index is %s", name, dc_dtype_name(v->dtype),
                        dc_dtype_name(index->dtype));
    if (n_segments < 0 || (n_segments == 0 && n > 0))
        return dc_error(ctx, DC_ERR_ARG, "%s: n_segments is %lld for %lld rows", name, (long long)n_segments,
                        (long long)n);
    int64_t shape[DC_MAX_DIMS];
    memcpy(shape, v->shape, (size_t)v->ndim * sizeof *shape);
    shape[0] = n_segments;
    /* the outputs' shape first: the grouping below takes n_segments + 1
     * numbers */
    if ((st = dc_check_shape(ctx, name, v->ndim, shape)) != DC_OK)
        return st;
    dc_assoc_record rec;
    memset(&rec, 0, sizeof rec);
    const int first = 0;
    if ((st = dc_axes_parse(ctx, name, v, 1, &first, true, &rec.ax)) != DC_OK)
        return st;
    rec.n_segments = n_segments;
    rec.rows = dc_read_indices(tape, name, "index", DC_SITE_SEGMENT_REDUCE_FN_INDEX, index, n_segments);
    if (!rec.rows)
        return dc_last_status(ctx);
    if (ctx->cuda) {
        const dc_index_groups *groups = dc_group_indices(tape, rec.rows, n, n_segments);
        if (!groups)
            return DC_ERR_MEMORY;
        rec.seg_start = groups->start;
        rec.seg_rows = groups->positions;
    } else if (!group_on_host(tape, rec.rows, n, n_segments, &rec)) {
        return DC_ERR_MEMORY;
    }
    void *y[DC_ASSOC_MAX_STATE];
    if (!block_fields(tape, k, values, &rec.ax, rec.x))
        return DC_ERR_MEMORY;
    if ((st = new_outputs(tape, k, v->dtype, v->ndim, shape, out, y)) != DC_OK)
        return st;
    if (n_segments > 0 && rec.ax.inner > 0) {
        dc_assoc_scan_launch L;
        memset(&L, 0, sizeof L);
        L.outer = n_segments;
        L.inner = rec.ax.inner;
        L.seg_start = rec.seg_start;
        L.seg_rows = rec.seg_rows;
        for (int f = 0; f < k; ++f) {
            L.x[f] = rec.x[f];
            L.carry[f] = y[f];
        }
        L.flags = DC_ASSOC_FROM_NEUTRAL;
        if ((st = dc_assoc_run_scan(tape, op, v->dtype, &L)) != DC_OK)
            return st;
    }
    return record(tape, DC_OP_SEGMENT_REDUCE_FN, op, values, out, &rec);
}

/* ---- adjoints ---- */

/* The adjoint of output f as read by a vector-Jacobian launch: its
 * gradient, contiguous, with `strides`; or the tape's zero, read with zero
 * strides, when none reached it. */
static bool adjoint_input(dc_tape *tape, const dc_tensor *y, const int64_t strides[3], const void **data,
                          int64_t out_strides[3])
{
    if (y->grad && y->grad_valid) {
        const dc_tensor *g = dc_grad_contiguous(tape, y);
        if (!g)
            return false;
        *data = g->data;
        memcpy(out_strides, strides, 3 * sizeof *strides);
    } else {
        *data = tape->zero;
        memset(out_strides, 0, 3 * sizeof *out_strides);
    }
    return true;
}

static void set_strides(int64_t s[3], int64_t s0, int64_t s1, int64_t s2)
{
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
}

/* The gradients of an op over no elements: empty, but given to every
 * input that requires one, as other ops' are. */
static dc_status empty_gradients(dc_tape *tape, dc_node *node)
{
    for (int f = 0; f < node->n_in; ++f) {
        if (!node->in[f]->requires_grad)
            continue;
        const dc_status st = dc_grad_prepare_partial(tape, node->in[f]);
        if (st != DC_OK)
            return st;
    }
    return DC_OK;
}

/* abar of each segment: `scan` is the launch of the left-to-right scans of
 * the segments, `rows` the segment of each row. */
static dc_status segment_adjoint(dc_tape *tape, dc_node *node, const dc_assoc_scan_launch *scan, const int64_t *rows)
{
    const dc_assoc *op = node->as.assoc.op;
    const dc_assoc_record *rec = node->as.assoc.rec;
    const int k = op->n_state;
    const dc_dtype dtype = node->in[0]->dtype;
    const int64_t outer = rec->ax.outer, len = rec->ax.len, inner = rec->ax.inner, n = outer * len * inner;
    if (n == 0)
        return empty_gradients(tape, node);
    void *l[DC_ASSOC_MAX_STATE], *r[DC_ASSOC_MAX_STATE], *s[DC_ASSOC_MAX_STATE], *w[DC_ASSOC_MAX_STATE],
        *gx[DC_ASSOC_MAX_STATE];
    if (!dc_assoc_alloc_fields(tape, k, n, dtype, l) || !dc_assoc_alloc_fields(tape, k, n, dtype, r) ||
        !dc_assoc_alloc_fields(tape, k, n, dtype, s) || !dc_assoc_alloc_fields(tape, k, n, dtype, w) ||
        !dc_assoc_alloc_fields(tape, k, n, dtype, gx))
        return DC_ERR_MEMORY;
    /* the exclusive scans from the left and from the right */
    void *carry[DC_ASSOC_MAX_STATE];
    if (!dc_assoc_alloc_fields(tape, k, scan->outer * inner, dtype, carry))
        return DC_ERR_MEMORY;
    dc_assoc_scan_launch L = *scan;
    for (int f = 0; f < k; ++f) {
        L.y[f] = l[f];
        L.carry[f] = carry[f];
    }
    L.flags = DC_ASSOC_EXCLUSIVE | DC_ASSOC_FROM_NEUTRAL;
    dc_status st = dc_assoc_run_scan(tape, op, dtype, &L);
    if (st != DC_OK)
        return st;
    for (int f = 0; f < k; ++f)
        L.y[f] = r[f];
    L.flags |= DC_ASSOC_REVERSE;
    if ((st = dc_assoc_run_scan(tape, op, dtype, &L)) != DC_OK)
        return st;
    /* s = a (+) r; w = ybar^T d(l (+) s)/d s; abar = w^T d(a (+) r)/d a */
    dc_assoc_vjp_launch V;
    memset(&V, 0, sizeof V);
    V.shape[0] = outer;
    V.shape[1] = len;
    V.shape[2] = inner;
    V.row_index = rows;
    for (int j = 0; j < 2 * k; ++j)
        set_strides(V.in_strides[j], len * inner, inner, 1);
    for (int f = 0; f < k; ++f) {
        V.in[f] = rec->x[f];
        V.in[k + f] = r[f];
        V.val[f] = s[f];
    }
    if ((st = dc_assoc_run_vjp(tape, op, dtype, &V)) != DC_OK)
        return st;
    int64_t ybar_strides[3]; /* ybar [n_segments, inner], its row the row's segment */
    set_strides(ybar_strides, 0, inner, 1);
    for (int f = 0; f < k; ++f) {
        V.in[f] = l[f];
        V.in[k + f] = s[f];
        V.val[f] = NULL;
        V.adj[k + f] = w[f];
        if (!adjoint_input(tape, node->out[f], ybar_strides, &V.u[f], V.u_strides[f]))
            return DC_ERR_MEMORY;
    }
    V.indexed = ((1u << k) - 1u) << (2 * k);
    if ((st = dc_assoc_run_vjp(tape, op, dtype, &V)) != DC_OK)
        return st;
    for (int f = 0; f < k; ++f) {
        V.in[f] = rec->x[f];
        V.in[k + f] = r[f];
        V.u[f] = w[f];
        set_strides(V.u_strides[f], len * inner, inner, 1);
        V.adj[f] = gx[f];
        V.adj[k + f] = NULL;
    }
    V.indexed = 0;
    if ((st = dc_assoc_run_vjp(tape, op, dtype, &V)) != DC_OK)
        return st;
    for (int f = 0; f < k && st == DC_OK; ++f)
        if (node->in[f]->requires_grad)
            st = dc_axes_add_block_grad(tape, node->in[f], &rec->ax, gx[f]);
    return st;
}

/* Where the kernels write input f's adjoint (n elements): its gradient
 * itself where that can take the block's adjoint as it is written (the
 * block lists the input's elements in its own order, the gradient is
 * contiguous, and no other field is the same tensor, whose writes would
 * then have to add), bit f of *accumulate set where it already holds one;
 * else a block of tape memory (*in_place false), added afterwards. */
static dc_status adjoint_destination(dc_tape *tape, dc_node *node, int f, int64_t n, void **gx, bool *in_place,
                                     uint32_t *accumulate)
{
    const dc_assoc_record *rec = node->as.assoc.rec;
    *in_place = dc_axes_one_run(&rec->ax);
    for (int q = 0; q < node->n_in && *in_place; ++q)
        if (q != f && node->in[q] == node->in[f])
            *in_place = false;
    if (*in_place) {
        dc_write_mode mode;
        const dc_status st = dc_grad_prepare(tape, node->in[f], &mode);
        if (st != DC_OK)
            return st;
        *in_place = dc_tensor_is_contiguous(node->in[f]->grad);
        if (*in_place) {
            *gx = node->in[f]->grad->data;
            *accumulate |= mode == DC_WRITE_ACCUMULATE ? 1u << f : 0u;
            return DC_OK;
        }
    }
    return dc_assoc_alloc_fields(tape, 1, n, node->in[f]->dtype, gx) ? DC_OK : DC_ERR_MEMORY;
}

/* Whether an adjoint's gradients gx (n numbers each) go out in streaming
 * stores: DC_STREAM_MIN_BYTES or more in all, each written in place (a
 * block that is then added through its input's layout is read back at
 * once, better from the cache). */
static bool streams(int k, int64_t n, dc_dtype dtype, void *const *gx, const bool *in_place)
{
    size_t bytes = 0;
    for (int f = 0; f < k; ++f) {
        if (gx[f] && !in_place[f])
            return false;
        bytes += gx[f] ? (size_t)n * dc_dtype_size(dtype) : 0;
    }
    return bytes >= DC_STREAM_MIN_BYTES;
}

dc_status dc_reduce_fn_backward(dc_tape *tape, dc_node *node)
{
    const dc_assoc *op = node->as.assoc.op;
    const dc_assoc_record *rec = node->as.assoc.rec;
    const int k = op->n_state;
    const dc_dtype dtype = node->in[0]->dtype;
    const int64_t rows = rec->ax.outer * rec->ax.inner, n = rows * rec->ax.len;
    if (n == 0)
        return empty_gradients(tape, node);
    dc_assoc_reduce_adjoint_launch L;
    memset(&L, 0, sizeof L);
    L.outer = rec->ax.outer;
    L.len = rec->ax.len;
    L.inner = rec->ax.inner;
    L.chunk = DC_ASSOC_CHUNK;
    const int64_t pieces = rows * ((L.len + L.chunk - 1) / L.chunk);
    for (int f = 0; f < k; ++f) {
        const dc_tensor *y = node->out[f];
        L.x[f] = rec->x[f];
        if (y->grad && y->grad_valid) { /* [outer, inner], as the block's rows */
            const dc_tensor *g = dc_grad_contiguous(tape, y);
            if (!g)
                return DC_ERR_MEMORY;
            L.g[f] = g->data;
        }
    }
    dc_status st;
    if (rec->totals[0]) { /* several pieces a row: the states around each */
        for (int f = 0; f < k; ++f)
            L.totals[f] = rec->totals[f];
        if (!dc_assoc_alloc_fields(tape, k, pieces, dtype, L.left) ||
            !dc_assoc_alloc_fields(tape, k, pieces, dtype, L.right))
            return DC_ERR_MEMORY;
        if (tape->ctx->cuda) {
            /* the exclusive scans of the totals from the left and from the
             * right, block-parallel where the primal's are; the CPU walks
             * each row's totals in order, as they do */
            const int64_t n_chunks = (L.len + L.chunk - 1) / L.chunk;
            if ((st = dc_assoc_scan_blocks(tape, op, dtype, L.outer, n_chunks, L.inner, L.totals, L.left, NULL,
                                           DC_ASSOC_EXCLUSIVE, NULL)) != DC_OK ||
                (st = dc_assoc_scan_blocks(tape, op, dtype, L.outer, n_chunks, L.inner, L.totals, L.right, NULL,
                                           DC_ASSOC_EXCLUSIVE | DC_ASSOC_REVERSE, NULL)) != DC_OK)
                return st;
        } else {
            L.phase = DC_ASSOC_RED_CARRIES;
            if ((st = dc_assoc_run_reduce_adjoint(tape, op, dtype, &L)) != DC_OK)
                return st;
        }
    }
    bool in_place[DC_ASSOC_MAX_STATE] = {false};
    for (int f = 0; f < k; ++f)
        if (node->in[f]->requires_grad &&
            (st = adjoint_destination(tape, node, f, n, &L.gx[f], &in_place[f], &L.accumulate)) != DC_OK)
            return st;
    /* CUDA, where a piece goes to one thread: each thread's buffer of the r_j
     * of its piece */
    const int64_t piece = L.len < L.chunk ? L.len : L.chunk;
    if (tape->ctx->cuda && !dc_assoc_cuda_reduce_by_block(L.inner, L.len, L.chunk) &&
        !(L.scratch = dc_tape_alloc_data(tape, (size_t)(pieces * piece * k) * dc_dtype_size(dtype))))
        return DC_ERR_MEMORY;
    /* large gradients streamed past the caches (stream_store.h): the linear
     * recurrence's reduction (bench_reduce), gradient and forward, of 2 x
     * 10^7 float32 took 11.0 ms with them against 13.7-14.0 without */
    L.streaming = !tape->ctx->cuda && streams(k, n, dtype, L.gx, in_place);
    L.phase = DC_ASSOC_RED_PIECES;
    if ((st = dc_assoc_run_reduce_adjoint(tape, op, dtype, &L)) != DC_OK)
        return st;
    for (int f = 0; f < k && st == DC_OK; ++f) {
        if (in_place[f])
            dc_grad_done(node->in[f]);
        else if (node->in[f]->requires_grad)
            st = dc_axes_add_block_grad(tape, node->in[f], &rec->ax, L.gx[f]);
    }
    return st;
}

dc_status dc_segment_reduce_fn_backward(dc_tape *tape, dc_node *node)
{
    const dc_assoc_record *rec = node->as.assoc.rec;
    dc_assoc_scan_launch L;
    memset(&L, 0, sizeof L);
    L.outer = rec->n_segments;
    L.inner = rec->ax.inner;
    L.seg_start = rec->seg_start;
    L.seg_rows = rec->seg_rows;
    for (int f = 0; f < node->as.assoc.op->n_state; ++f)
        L.x[f] = rec->x[f];
    return segment_adjoint(tape, node, &L, rec->rows);
}

dc_status dc_scan_fn_backward(dc_tape *tape, dc_node *node)
{
    const dc_assoc *op = node->as.assoc.op;
    const dc_assoc_record *rec = node->as.assoc.rec;
    const int k = op->n_state;
    const dc_dtype dtype = node->in[0]->dtype;
    const int64_t n = rec->ax.outer * rec->ax.len * rec->ax.inner;
    if (n == 0)
        return empty_gradients(tape, node);
    dc_assoc_scan_adjoint_launch L;
    memset(&L, 0, sizeof L);
    L.outer = rec->ax.outer;
    L.len = rec->ax.len;
    L.inner = rec->ax.inner;
    L.exclusive = rec->exclusive;
    dc_status st = DC_OK;
    bool in_place[DC_ASSOC_MAX_STATE] = {false};
    for (int f = 0; f < k; ++f) {
        const dc_tensor *y = node->out[f];
        L.x[f] = rec->x[f];
        L.y[f] = y->data; /* contiguous, laid out as the block */
        if (node->in[f]->requires_grad &&
            (st = adjoint_destination(tape, node, f, n, &L.gx[f], &in_place[f], &L.accumulate)) != DC_OK)
            return st;
        if (y->grad && y->grad_valid) {
            const dc_tensor *g = dc_grad_contiguous(tape, y);
            if (!g)
                return DC_ERR_MEMORY;
            L.g[f] = g->data;
        }
    }
    /* large gradients streamed past the caches, as dc_reduce_fn_backward's */
    L.streaming = !tape->ctx->cuda && streams(k, n, dtype, L.gx, in_place);
    if (L.len <= DC_ASSOC_CHUNK) {
        st = dc_assoc_run_scan_adjoint(tape, op, dtype, &L);
    } else { /* in the forward's pieces: their maps, the carries between them, then each */
        L.chunk = DC_ASSOC_CHUNK;
        const int64_t pieces = L.outer * ((L.len + L.chunk - 1) / L.chunk) * L.inner;
        L.maps = dc_tape_alloc_data(tape, (size_t)(pieces * (k * k + k)) * dc_dtype_size(dtype));
        L.carry = dc_tape_alloc_data(tape, (size_t)(pieces * k) * dc_dtype_size(dtype));
        if (!L.maps || !L.carry)
            return DC_ERR_MEMORY;
        for (int phase = DC_ASSOC_ADJ_MAPS; phase <= DC_ASSOC_ADJ_PIECES && st == DC_OK; ++phase) {
            L.phase = phase;
            st = dc_assoc_run_scan_adjoint(tape, op, dtype, &L);
        }
    }
    for (int f = 0; f < k && st == DC_OK; ++f) {
        if (in_place[f])
            dc_grad_done(node->in[f]);
        else if (node->in[f]->requires_grad)
            st = dc_axes_add_block_grad(tape, node->in[f], &rec->ax, L.gx[f]);
    }
    return st;
}
