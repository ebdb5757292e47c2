#include "indices.h"

#include <math.h>
#include <string.h>

/* Values converted per chunk on the host: a chunk is read before its
 * indices overwrite it (see read_on_host). */
enum { kChunk = 1024 };

/* Indices below which one thread converts them all. */
enum { kParallel = 32768 };

/* The CPU's way: the values read on the host, checked and converted chunk
 * by chunk; the first bad value is reported. */
static int64_t *read_on_host(dc_tape *tape, const char *op, const char *what, const dc_tensor *ids, int64_t limit)
{
    dc_ctx *ctx = tape->ctx;
    const int64_t n = ids->numel;
    int64_t *out = dc_tape_alloc_meta(tape, (size_t)(n ? n : 1) * sizeof *out);
    if (!out)
        return NULL;
    const bool f32 = ids->dtype != DC_F64;
    /* contiguous values are read where they are (host memory: a CPU
     * context's); others gathered into out's storage first: float32
     * element i at float n + i, which the indices reach only at i == n,
     * float64 element i where index i goes, read before written */
    const float *f = ids->data;
    const double *d = ids->data;
    if (!dc_tensor_is_contiguous(ids)) {
        float *upper = (float *)out + n;
        f = upper;
        d = (const double *)out;
        if (dc_tensor_to_host(ids, f32 ? (void *)upper : (void *)out,
                              (size_t)n * (f32 ? sizeof(float) : sizeof(double))) != DC_OK)
            return NULL;
    }
    const double top = (double)limit;
    /* chunks over the threads where each is read from the values' own
     * memory (a gathered chunk is overwritten by the indices before it:
     * those go in order); the first bad value found after */
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    const int n_threads = ids->data == (const void *)f && n >= kParallel ? ctx->cpu.num_threads : 1;
    int64_t first_bad = n;
    double bad_value = 0;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t i0 = c * kChunk;
        const int m = n - i0 < kChunk ? (int)(n - i0) : kChunk;
        double buf[kChunk];
        for (int k = 0; k < m; ++k)
            buf[k] = f32 ? (double)f[i0 + k] : d[i0 + k];
        int bad = 0;
        for (int k = 0; k < m; ++k) {
            const double v = buf[k];
            const int ok = (v >= 0) & (v < top) & (v == floor(v));
            bad += 1 - ok;
            out[i0 + k] = (int64_t)(ok ? v : 0.0);
        }
        for (int k = 0; bad && k < m; ++k)
            if (!(buf[k] >= 0 && buf[k] < top) || buf[k] != floor(buf[k])) {
#pragma omp critical(dc_read_indices_bad)
                if (i0 + k < first_bad) {
                    first_bad = i0 + k;
                    bad_value = buf[k]; /* kept: a gathered value may be overwritten by then */
                }
                break;
            }
    }
    if (first_bad < n) {
        if (limit == 0)
            dc_error(ctx, DC_ERR_ARG, "%s: %s[%lld] is %g, but there is nothing to index (0 rows)", op, what,
                     (long long)first_bad, bad_value);
        else
            dc_error(ctx, DC_ERR_ARG, "%s: %s[%lld] is %g, not an index in 0..%lld", op, what,
                     (long long)first_bad, bad_value, (long long)limit - 1);
        return NULL;
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
    int64_t *positions = dc_tape_alloc_data(tape, (size_t)(n ? n : 1) * sizeof *positions);
    int64_t *scratch = dc_tape_alloc_data(tape, (size_t)dc_cuda_group_scratch(n) * sizeof *scratch);
    if (!g || !start || !positions || !scratch)
        return NULL;
    if (dc_cuda_group_indices(tape->ctx, ids, n, limit, start, positions, scratch) != DC_OK)
        return NULL;
    g->start = start;
    g->positions = positions;
    return g;
}
