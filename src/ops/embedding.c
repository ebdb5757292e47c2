/* Embedding lookup: rows of a table picked by ids; the adjoint adds each
 * output row's gradient into the picked row of the table's gradient. */
#include <string.h>

#include "../cuda/nn_cuda.h"
#include "backward.h"
#include "indices.h"

dc_tensor *dc_op_embedding(dc_tape *tape, dc_tensor *table, dc_tensor *ids)
{
    const char *const labels[] = {"table", "ids"};
    dc_tensor *in[2] = {table, ids};
    if (dc_op_check_args(tape, "dc_op_embedding", 2, in, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    char s[128];
    if (table->ndim != 2) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_embedding: the table must be [rows, width], got %s",
                 dc_tensor_shape_str(table, s, sizeof s));
        return NULL;
    }
    if (ids->ndim + 1 > DC_MAX_DIMS) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_embedding: ids of rank %d leave no room for the width", ids->ndim);
        return NULL;
    }
    if (ids->dtype != table->dtype) {
        dc_error(ctx, DC_ERR_DTYPE, "dc_op_embedding: table is %s but ids are %s", dc_dtype_name(table->dtype),
                 dc_dtype_name(ids->dtype));
        return NULL;
    }
    const int64_t *rows = dc_read_indices(tape, "dc_op_embedding", "ids", DC_SITE_EMBEDDING_IDS, ids, table->shape[0]);
    if (!rows)
        return NULL;
    const int64_t width = table->shape[1];
    int64_t shape[DC_MAX_DIMS];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof *shape);
    shape[ids->ndim] = width;
    dc_tensor *y = dc_tape_alloc_tensor(tape, table->dtype, ids->ndim + 1, shape);
    if (!y)
        return NULL;
    const size_t es = dc_dtype_size(table->dtype);
    if (ctx->cuda && dc_cuda_gather_rows(ctx, table->dtype, table->data, table->strides[0], table->strides[1], rows,
                                         ids->numel, width, y->data) != DC_OK)
        return NULL;
    for (int64_t n = 0; !ctx->cuda && n < ids->numel; ++n) {
        const unsigned char *src = (const unsigned char *)table->data + (size_t)(rows[n] * table->strides[0]) * es;
        unsigned char *dst = (unsigned char *)y->data + (size_t)(n * width) * es;
        if (table->strides[1] == 1) {
            memcpy(dst, src, (size_t)width * es);
        } else {
            for (int64_t j = 0; j < width; ++j)
                memcpy(dst + (size_t)j * es, src + (size_t)(j * table->strides[1]) * es, es);
        }
    }
    if (!dc_tape_wants_node(tape, 1, &table))
        return y;
    /* on CUDA the adjoint runs one thread per picked row and column, so
     * the positions of each id are grouped for it */
    const dc_index_groups *groups = ctx->cuda ? dc_group_indices(tape, rows, ids->numel, table->shape[0]) : NULL;
    if (ctx->cuda && !groups)
        return NULL;
    dc_node *node = dc_tape_record(tape, DC_OP_EMBEDDING, 2, in, 1, &y);
    if (!node)
        return NULL;
    node->as.embedding.rows = ctx->cuda ? NULL : rows;
    node->as.embedding.groups = groups;
    return y;
}

#define DEFINE_SCATTER(T)                                                                          \
    static void scatter_##T(T *grad, int64_t gs0, int64_t gs1, const T *gy, int64_t ys0, int64_t ys1,  \
                            const int64_t *rows, int64_t n, int64_t j0, int64_t j1)                \
    {                                                                                              \
        for (int64_t i = 0; i < n; ++i) {                                                          \
            T *g = grad + rows[i] * gs0;                                                           \
            const T *y = gy + i * ys0;                                                             \
            for (int64_t j = j0; j < j1; ++j)                                                      \
                g[j * gs1] += y[j * ys1];                                                          \
        }                                                                                          \
    }
DEFINE_SCATTER(float)
DEFINE_SCATTER(double)

/* Threads split the width, not the ids (on CUDA: one per picked row and
 * column): each element of the table's gradient sums its contributions in
 * id order, the same on every run. */
dc_status dc_embedding_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *table = node->in[0];
    const dc_tensor *y = node->out[0];
    dc_status st = dc_grad_prepare_partial(tape, table);
    if (st != DC_OK)
        return st;
    const dc_tensor *g = table->grad, *gy = dc_grad_contiguous(tape, y);
    if (!gy)
        return DC_ERR_MEMORY;
    const int64_t n = node->in[1]->numel, width = table->shape[1];
    const int64_t ys0 = width, ys1 = 1;
    if (tape->ctx->cuda) {
        const dc_index_groups *groups = node->as.embedding.groups;
        st = dc_cuda_scatter_rows(tape->ctx, table->dtype, g->data, g->strides[0], g->strides[1], groups->start,
                                  groups->positions, table->shape[0], width, gy->data);
        return st;
    }
    const int64_t *rows = node->as.embedding.rows;
    const int n_threads = (n * width > 32768 && width >= 64) ? tape->ctx->cpu.num_threads : 1;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int t = 0; t < n_threads; ++t) {
        const int64_t j0 = width * t / n_threads, j1 = width * (t + 1) / n_threads;
        if (table->dtype == DC_F32)
            scatter_float(g->data, g->strides[0], g->strides[1], gy->data, ys0, ys1, rows, n, j0, j1);
        else
            scatter_double(g->data, g->strides[0], g->strides[1], gy->data, ys0, ys1, rows, n, j0, j1);
    }
    return DC_OK;
}
