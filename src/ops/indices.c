#include "indices.h"

#include <math.h>
#include <string.h>

/* The CPU's way: the values read on the host and checked one by one. */
static int64_t *read_on_host(dc_tape *tape, const char *op, const char *what, const dc_tensor *ids, int64_t limit)
{
    dc_ctx *ctx = tape->ctx;
    const int64_t n = ids->numel;
    int64_t *out = dc_tape_alloc_meta(tape, (size_t)(n ? n : 1) * sizeof *out);
    double *vals = dc_tape_alloc_meta(tape, (size_t)(n ? n : 1) * sizeof *vals);
    if (!out || !vals)
        return NULL;
    if (ids->dtype == DC_F64) {
        if (dc_tensor_to_host(ids, vals, (size_t)n * sizeof(double)) != DC_OK)
            return NULL;
    } else {
        float *f = (float *)out; /* int64 storage holds twice the floats we need */
        if (dc_tensor_to_host(ids, f, (size_t)n * sizeof(float)) != DC_OK)
            return NULL;
        for (int64_t i = n; i-- > 0;)
            vals[i] = f[i];
    }
    for (int64_t i = 0; i < n; ++i) {
        const double v = vals[i];
        if (!(v >= 0 && v < (double)limit) || v != floor(v)) {
            dc_error(ctx, DC_ERR_ARG, "%s: %s[%lld] is %g, not an index in 0..%lld", op, what, (long long)i, v,
                     (long long)limit - 1);
            return NULL;
        }
        out[i] = (int64_t)v;
    }
    return out;
}

const int64_t *dc_read_indices(dc_tape *tape, const char *op, const char *what, dc_index_site site,
                               const dc_tensor *ids, int64_t limit)
{
    dc_ctx *ctx = tape->ctx;
    if (!ctx->cuda)
        return read_on_host(tape, op, what, ids, limit);
    const dc_tensor *dense = ids;
    if (!dc_tensor_is_contiguous(ids)) {
        dc_tensor *copy = dc_tape_alloc_tensor(tape, ids->dtype, ids->ndim, ids->shape);
        if (!copy || dc_tensor_copy(copy, ids) != DC_OK)
            return NULL;
        dense = copy;
    }
    const int64_t n = ids->numel;
    int64_t *out = dc_tape_alloc_data(tape, (size_t)(n ? n : 1) * sizeof *out);
    double *parts = dc_tape_alloc_data(tape, DC_CUDA_INDEX_PARTS * sizeof *parts);
    if (!out || !parts)
        return NULL;
    return dc_cuda_read_indices(ctx, ids->dtype, dense->data, n, limit, (int)site, out, parts) == DC_OK ? out
                                                                                                       : NULL;
}

const dc_index_groups *dc_group_indices(dc_tape *tape, const int64_t *ids, int64_t n, int64_t limit)
{
    dc_index_groups *g = dc_tape_alloc_meta(tape, sizeof *g);
    int64_t *start = dc_tape_alloc_data(tape, (size_t)(limit + 1) * sizeof *start);
    int64_t *cursor = dc_tape_alloc_data(tape, (size_t)(limit ? limit : 1) * sizeof *cursor);
    int64_t *positions = dc_tape_alloc_data(tape, (size_t)(n ? n : 1) * sizeof *positions);
    if (!g || !start || !cursor || !positions)
        return NULL;
    if (dc_cuda_group_indices(tape->ctx, ids, n, limit, start, cursor, positions) != DC_OK)
        return NULL;
    g->start = start;
    g->positions = positions;
    return g;
}
