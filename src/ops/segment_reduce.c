/* Reductions by index (dc_op_segment_reduce, reduce.h): the rows of values
 * reduced into the segments their index names. The forward walks each
 * segment's rows in ascending order: on the CPU a piece of columns at a
 * time over all rows, on CUDA a thread per piece of rows, segment and
 * column over the rows grouped by segment on the device, the pieces' states
 * then combined in order (no atomics); what the adjoint needs per output
 * (reduce_formulas.h) stays in tape memory, and the adjoint is one pass
 * over the values, each row reading its segment's. */
#include "../cuda/reduce_cuda.h"
#include "axes.h"
#include "backward.h"
#include "indices.h"
#include "reduce_cpu.h"
#include "reduce_kinds.h"

/* the kernels take the reduction as their kind */
_Static_assert((int)DC_REDUCE_SUM == DC_RK_SUM && (int)DC_REDUCE_PROD == DC_RK_PROD &&
                   (int)DC_REDUCE_MAX == DC_RK_MAX && (int)DC_REDUCE_MIN == DC_RK_MIN,
               "dc_reduction and the kernels' kinds agree");

static const char *const kFn = "dc_op_segment_reduce";

/* The arguments' checks; the message names the function, the argument and
 * the shapes. */
static dc_status check(dc_ctx *ctx, const dc_tensor *values, const dc_tensor *index, int64_t n_segments,
                       dc_reduction op)
{
    char sv[128], si[128];
    if (op != DC_REDUCE_SUM && op != DC_REDUCE_PROD && op != DC_REDUCE_MAX && op != DC_REDUCE_MIN)
        return dc_error(ctx, DC_ERR_ARG, "%s: op %d is not a dc_reduction", kFn, (int)op);
    if (values->ndim < 1 || index->ndim != 1 || index->shape[0] != values->shape[0])
        return dc_error(ctx, DC_ERR_SHAPE, "%s: values %s and index %s; want [n, ...] and [n]", kFn,
                        dc_tensor_shape_str(values, sv, sizeof sv), dc_tensor_shape_str(index, si, sizeof si));
    if (index->dtype != values->dtype)
        return dc_error(ctx, DC_ERR_DTYPE, "%s: values are %s but index is %s", kFn, dc_dtype_name(values->dtype),
                        dc_dtype_name(index->dtype));
    if (n_segments < 0 || (n_segments == 0 && values->shape[0] > 0))
        return dc_error(ctx, DC_ERR_ARG, "%s: n_segments is %lld for %lld rows of values %s", kFn,
                        (long long)n_segments, (long long)values->shape[0], dc_tensor_shape_str(values, sv, sizeof sv));
    return DC_OK;
}

dc_tensor *dc_op_segment_reduce(dc_tape *tape, dc_tensor *values, dc_tensor *index, int64_t n_segments, dc_reduction op)
{
    const char *const labels[] = {"values", "index"};
    dc_tensor *in[2] = {values, index};
    if (dc_op_check_args(tape, kFn, 2, in, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (check(ctx, values, index, n_segments, op) != DC_OK)
        return NULL;
    const int64_t n = values->shape[0];
    int64_t shape[DC_MAX_DIMS], width = 1;
    shape[0] = n_segments;
    for (int d = 1; d < values->ndim; ++d) {
        shape[d] = values->shape[d];
        width *= values->shape[d];
    }
    /* on the CPU, rows in pieces read the index as stored, checking it on
     * the way (no converted copy); else the index is read and checked first */
    const bool checked =
        !ctx->cuda && dc_tensor_is_contiguous(index) && dc_segment_piece_rows(n, n_segments, width) < n;
    const int64_t *rows =
        checked ? NULL : dc_read_indices(tape, kFn, "index", DC_SITE_SEGMENT_INDEX, index, n_segments);
    if (!checked && !rows)
        return NULL;
    const dc_tensor *v = values;
    if (!dc_tensor_is_contiguous(values)) {
        dc_tensor *copy = dc_tape_alloc_tensor(tape, values->dtype, values->ndim, values->shape);
        if (!copy || dc_tensor_copy(copy, values) != DC_OK)
            return NULL;
        v = copy;
    }
    dc_tensor *y = dc_tape_alloc_tensor(tape, values->dtype, values->ndim, shape);
    const int64_t count = n_segments * width;
    const size_t outputs = (size_t)(count > 0 ? count : 1);
    void *nz = y ? dc_tape_alloc_data(tape, outputs * dc_dtype_size(values->dtype)) : NULL;
    int64_t *aux = nz ? dc_tape_alloc_data(tape, outputs * sizeof *aux) : NULL;
    if (!aux)
        return NULL;
    if (ctx->cuda) {
        const dc_index_groups *groups = dc_group_indices(tape, rows, n, n_segments);
        /* the pieces' states, where the rows go in pieces */
        const int64_t piece_rows = dc_segment_piece_rows(n, n_segments, width);
        const size_t bytes = dc_cuda_segment_scratch(n, n_segments, width, piece_rows);
        void *scratch = groups && bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if (!groups || (bytes && !scratch) ||
            dc_cuda_segment_reduce(ctx, (int)op, values->dtype, v->data, n, width, groups->start, groups->positions,
                                   n_segments, piece_rows, y->data, nz, aux, scratch) != DC_OK)
            return NULL;
    } else {
        void *scratch = dc_tape_alloc_meta(tape, dc_cpu_segment_scratch(n, n_segments, width));
        if (!scratch)
            return NULL;
        if (!checked) {
            dc_cpu_segment_reduce(ctx, (int)op, values->dtype, v->data, n, width, rows, n_segments, y->data, nz, aux,
                                  scratch);
        } else {
            const int64_t bad = dc_cpu_segment_reduce_checked(ctx, (int)op, values->dtype, v->data, n, width,
                                                              index->data, n_segments, y->data, nz, aux, scratch);
            if (bad < n) {
                const double u = values->dtype == DC_F32 ? (double)((const float *)index->data)[bad]
                                                         : ((const double *)index->data)[bad];
                dc_error(ctx, DC_ERR_ARG, "%s: index[%lld] is %g, not an index in 0..%lld", kFn, (long long)bad, u,
                         (long long)n_segments - 1);
                return NULL;
            }
        }
    }
    if (dc_tape_wants_node(tape, 1, &values)) {
        /* an index read as stored is kept as it was: the adjoint reads it
         * unchecked, and the caller may write the index before then */
        const void *stored_index = NULL;
        if (checked) {
            dc_tensor *kept = dc_tape_alloc_tensor(tape, index->dtype, index->ndim, index->shape);
            if (!kept || dc_tensor_copy(kept, index) != DC_OK)
                return NULL;
            stored_index = kept->data;
        }
        dc_node *node = dc_tape_record(tape, DC_OP_SEGMENT_REDUCE, 2, in, 1, &y);
        if (!node)
            return NULL;
        node->as.segment_reduce.stored_index = stored_index;
        node->as.segment_reduce.op = (int)op;
        node->as.segment_reduce.values = v;
        node->as.segment_reduce.index = rows;
        node->as.segment_reduce.nz = nz;
        node->as.segment_reduce.aux = aux;
    }
    return y;
}

dc_status dc_segment_reduce_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *values = node->in[0];
    const dc_node_segment_reduce *r = &node->as.segment_reduce;
    const dc_tensor *gy = dc_grad_contiguous(tape, node->out[0]);
    const int64_t n = values->shape[0], width = n ? values->numel / n : 0;
    if (gy && !tape->ctx->cuda && (r->op == DC_REDUCE_MAX || r->op == DC_REDUCE_MIN)) {
        /* only the winners' gradient is not zero */
        bool done;
        const dc_status st =
            dc_cpu_winners_grad(tape, values, node->out[0]->shape[0], width, 0, r->aux, gy->data, &done);
        if (st != DC_OK || done)
            return st;
    }
    if (!gy)
        return DC_ERR_MEMORY;
    const void *y = node->out[0]->data;
    /* values' first gradient written in place, else a block of tape memory
     * added afterwards */
    void *g;
    bool direct;
    dc_status st = dc_axes_grad_target(tape, values, true, &g, &direct, NULL);
    if (st != DC_OK)
        return st;
    if (tape->ctx->cuda) {
        st = dc_cuda_segment_reduce_grad(tape->ctx, r->op, values->dtype, r->values->data, n, width, r->index, y, r->nz,
                                         r->aux, gy->data, g);
        if (st != DC_OK)
            return st;
    } else {
        dc_cpu_segment_reduce_grad(tape->ctx, r->op, values->dtype, r->values->data, n, width, r->index,
                                   r->stored_index, y, r->nz, r->aux, gy->data, g);
    }
    if (direct) {
        dc_grad_done(values);
        return DC_OK;
    }
    /* the gradient, laid out as the contiguous values, added into theirs */
    dc_tensor view = *values;
    view.data = g;
    view.grad = NULL;
    dc_contiguous_strides(values->ndim, values->shape, view.strides);
    const dc_tensor *reads[1] = {&view};
    return dc_backward_kernel(tape, DC_K_COPY, NULL, values->ndim, values->shape, 1, reads, 1, &values);
}
