#include "indices.h"

#include <math.h>
#include <string.h>

const int64_t *dc_indices_on_device(dc_tape *tape, const int64_t *host, int64_t n)
{
    if (!tape->ctx->cuda)
        return host;
    int64_t *dev = dc_tape_alloc_data(tape, (size_t)(n ? n : 1) * sizeof *dev);
    if (!dev || dc_mem_from_host(tape->ctx, dev, host, (size_t)n * sizeof *dev) != DC_OK)
        return NULL;
    return dev;
}

int64_t *dc_read_indices(dc_tape *tape, const char *op, const char *what, const dc_tensor *ids, int64_t limit)
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

const dc_index_groups *dc_index_groups_on_device(dc_tape *tape, const int64_t *host, int64_t n, int64_t limit)
{
    dc_index_groups *g = dc_tape_alloc_meta(tape, sizeof *g);
    int64_t *next = dc_tape_alloc_meta(tape, (size_t)(limit ? limit : 1) * sizeof *next);
    int64_t *data = dc_tape_alloc_meta(tape, (size_t)(2 * n + 1 + n) * sizeof *data);
    if (!g || !next || !data)
        return NULL;
    memset(next, 0, (size_t)limit * sizeof *next);
    for (int64_t i = 0; i < n; ++i)
        next[host[i]]++;
    int64_t n_groups = 0;
    for (int64_t v = 0; v < limit; ++v)
        n_groups += next[v] > 0;
    int64_t *values = data, *start = data + n_groups, *positions = start + n_groups + 1;
    /* each value's count becomes where its positions go */
    int64_t k = 0, offset = 0;
    for (int64_t v = 0; v < limit; ++v)
        if (next[v]) {
            values[k] = v;
            start[k++] = offset;
            const int64_t count = next[v];
            next[v] = offset;
            offset += count;
        }
    start[n_groups] = n;
    for (int64_t i = 0; i < n; ++i)
        positions[next[host[i]]++] = i;
    const size_t bytes = (size_t)(2 * n_groups + 1 + n) * sizeof *data;
    int64_t *dev = tape->ctx->cuda ? dc_tape_alloc_data(tape, bytes) : data;
    if (!dev || (dev != data && dc_mem_from_host(tape->ctx, dev, data, bytes) != DC_OK))
        return NULL;
    g->data = dev;
    g->n_groups = n_groups;
    return g;
}
