/* Building CSR patterns: from triplets (sorted, duplicates summed or
 * refused), from user CSR arrays (validated), from a dense tensor; the
 * transposed (column-order) copy every pattern carries; the transpose. */
#include <stdlib.h>
#include <string.h>

#include "csr_internal.h"

/* The pattern in host memory, int64, before it goes to the device. */
typedef struct host_pattern {
    int64_t rows, cols, nnz;
    int64_t *row_ptr, *col_idx; /* CSR */
    double *val;                /* nnz values in CSR order, or NULL for ones */
} host_pattern;

static void host_pattern_free(host_pattern *h)
{
    free(h->row_ptr);
    free(h->col_idx);
    free(h->val);
}

static bool fits32(int64_t v) { return v <= INT32_MAX; }

static bool force_wide(void)
{
    const char *e = getenv("DC_CSR_INDEX64");
    return e && strcmp(e, "1") == 0;
}

static void store_indices(void *dst, bool wide, const int64_t *src, int64_t n)
{
    for (int64_t k = 0; k < n; ++k) {
        if (wide)
            ((int64_t *)dst)[k] = src[k];
        else
            ((int32_t *)dst)[k] = (int32_t)src[k];
    }
}

/* dc_csr_build (csr_internal.h) for a checked host pattern. */
static dc_csr *finish(dc_ctx *ctx, const char *fn, dc_dtype dtype, const host_pattern *h)
{
    return dc_csr_build(ctx, fn, dtype, h->rows, h->cols, h->nnz, h->row_ptr, h->col_idx, h->val);
}

dc_csr *dc_csr_build(dc_ctx *ctx, const char *fn, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz,
                     const int64_t *row_ptr, const int64_t *col_idx, const double *val)
{
    const host_pattern hp = {rows, cols, nnz, (int64_t *)row_ptr, (int64_t *)col_idx, (double *)val};
    const host_pattern *h = &hp;
    int64_t *col_ptr = calloc((size_t)cols + 1, sizeof *col_ptr);
    int64_t *csc_row = malloc((size_t)(nnz ? nnz : 1) * sizeof *csc_row);
    int64_t *csc_perm = malloc((size_t)(nnz ? nnz : 1) * sizeof *csc_perm);
    double *vals = malloc((size_t)(nnz ? nnz : 1) * sizeof *vals);
    const bool wide = force_wide() || !fits32(rows) || !fits32(cols) || !fits32(nnz);
    const size_t isz = wide ? 8 : 4;
    /* the five arrays in one block, each starting on 16 bytes (cuSPARSE
     * asks for that alignment) */
    const size_t per = 16 / isz;
#define DC_CSR_PAD(k) (((k) + per - 1) / per * per)
    const size_t at_row_ptr = 0, at_col_idx = DC_CSR_PAD(at_row_ptr + (size_t)(rows + 1));
    const size_t at_col_ptr = DC_CSR_PAD(at_col_idx + (size_t)nnz);
    const size_t at_csc_row = DC_CSR_PAD(at_col_ptr + (size_t)(cols + 1));
    const size_t at_csc_perm = DC_CSR_PAD(at_csc_row + (size_t)nnz);
#undef DC_CSR_PAD
    const size_t n_ix = at_csc_perm + (size_t)nnz;
    unsigned char *host = calloc(n_ix, isz);
    dc_csr *a = calloc(1, sizeof *a);
    if (!col_ptr || !csc_row || !csc_perm || !vals || !host || !a) {
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of host memory for a pattern of %lld entries", fn, (long long)nnz);
        goto fail;
    }
    /* entries by column, rows ascending within one: a counting sort over
     * the CSR order, which is by row already */
    for (int64_t k = 0; k < nnz; ++k)
        col_ptr[h->col_idx[k] + 1]++;
    for (int64_t j = 0; j < cols; ++j)
        col_ptr[j + 1] += col_ptr[j];
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t k = h->row_ptr[i]; k < h->row_ptr[i + 1]; ++k) {
            const int64_t at = col_ptr[h->col_idx[k]]++;
            csc_row[at] = i;
            csc_perm[at] = k;
        }
    for (int64_t j = cols; j > 0; --j)
        col_ptr[j] = col_ptr[j - 1];
    col_ptr[0] = 0;

    a->ctx = ctx;
    a->dtype = dtype;
    a->rows = rows;
    a->cols = cols;
    a->nnz = nnz;
    a->wide = wide;
    store_indices(host + at_row_ptr * isz, wide, h->row_ptr, rows + 1);
    store_indices(host + at_col_idx * isz, wide, h->col_idx, nnz);
    store_indices(host + at_col_ptr * isz, wide, col_ptr, cols + 1);
    store_indices(host + at_csc_row * isz, wide, csc_row, nnz);
    store_indices(host + at_csc_perm * isz, wide, csc_perm, nnz);
    a->alloc = dc_mem_alloc(ctx, n_ix * isz);
    if (!a->alloc) {
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of device memory for a pattern of %lld entries", fn, (long long)nnz);
        goto fail;
    }
    if (dc_mem_from_host(ctx, a->alloc, host, n_ix * isz) != DC_OK)
        goto fail;
    unsigned char *base = a->alloc;
    a->row_ptr = base + at_row_ptr * isz;
    a->col_idx = base + at_col_idx * isz;
    a->col_ptr = base + at_col_ptr * isz;
    a->csc_row = base + at_csc_row * isz;
    a->csc_perm = base + at_csc_perm * isz;

    const int64_t shape[1] = {nnz};
    a->values = dc_tensor_new(ctx, dtype, 1, shape);
    if (!a->values)
        goto fail;
    if (nnz > 0) {
        if (dtype == DC_F32) {
            float *f = (float *)vals;
            for (int64_t k = 0; k < nnz; ++k)
                f[k] = h->val ? (float)h->val[k] : 1.0f;
        } else {
            for (int64_t k = 0; k < nnz; ++k)
                vals[k] = h->val ? h->val[k] : 1.0;
        }
        if (dc_tensor_from_host_copy(a->values, vals, (size_t)nnz * dc_dtype_size(dtype)) != DC_OK)
            goto fail;
    }
    free(col_ptr);
    free(csc_row);
    free(csc_perm);
    free(vals);
    free(host);
    return a;
fail:
    free(col_ptr);
    free(csc_row);
    free(csc_perm);
    free(vals);
    free(host);
    dc_csr_free(a);
    return NULL;
}

static dc_status check_sizes(dc_ctx *ctx, const char *fn, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz)
{
    if (dtype != DC_F32 && dtype != DC_F64)
        return dc_error(ctx, DC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
    if (rows < 0 || cols < 0 || nnz < 0)
        return dc_error(ctx, DC_ERR_ARG, "%s: rows %lld, cols %lld and nnz %lld must not be negative", fn,
                        (long long)rows, (long long)cols, (long long)nnz);
    /* the index arrays and the byte counts must stay far from overflow */
    const int64_t limit = INT64_MAX / 64;
    if (rows >= limit || cols >= limit || nnz >= limit)
        return dc_error(ctx, DC_ERR_ARG, "%s: rows %lld, cols %lld or nnz %lld too large", fn, (long long)rows,
                        (long long)cols, (long long)nnz);
    return DC_OK;
}

dc_csr *dc_csr_from_coo(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz, const int64_t *row,
                        const int64_t *col, const double *val, dc_coo_duplicates duplicates)
{
    const char *fn = "dc_csr_from_coo";
    if (!ctx)
        return NULL;
    if (check_sizes(ctx, fn, dtype, rows, cols, nnz) != DC_OK)
        return NULL;
    if (nnz > 0 && (!row || !col)) {
        dc_error(ctx, DC_ERR_ARG, "%s: %s is NULL with nnz %lld", fn, row ? "col" : "row", (long long)nnz);
        return NULL;
    }
    if (duplicates != DC_COO_SUM && duplicates != DC_COO_REFUSE) {
        dc_error(ctx, DC_ERR_ARG, "%s: unknown duplicates policy %d", fn, (int)duplicates);
        return NULL;
    }
    for (int64_t k = 0; k < nnz; ++k)
        if (row[k] < 0 || row[k] >= rows || col[k] < 0 || col[k] >= cols) {
            dc_error(ctx, DC_ERR_ARG, "%s: triplet %lld at (%lld, %lld) is outside the %lld x %lld matrix", fn,
                     (long long)k, (long long)row[k], (long long)col[k], (long long)rows, (long long)cols);
            return NULL;
        }
    host_pattern h = {rows, cols, 0, NULL, NULL, NULL};
    int64_t *by_col = malloc((size_t)(nnz ? nnz : 1) * sizeof *by_col);
    int64_t *order = malloc((size_t)(nnz ? nnz : 1) * sizeof *order);
    int64_t *count = calloc((size_t)(rows > cols ? rows : cols) + 1, sizeof *count);
    h.row_ptr = calloc((size_t)rows + 1, sizeof *h.row_ptr);
    h.col_idx = malloc((size_t)(nnz ? nnz : 1) * sizeof *h.col_idx);
    h.val = val ? malloc((size_t)(nnz ? nnz : 1) * sizeof *h.val) : NULL;
    dc_csr *a = NULL;
    if (!by_col || !order || !count || !h.row_ptr || !h.col_idx || (val && !h.val)) {
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of host memory for %lld triplets", fn, (long long)nnz);
        goto done;
    }
    /* a stable radix sort: by column, then by row */
    for (int64_t k = 0; k < nnz; ++k)
        count[col[k] + 1]++;
    for (int64_t j = 0; j < cols; ++j)
        count[j + 1] += count[j];
    for (int64_t k = 0; k < nnz; ++k)
        by_col[count[col[k]]++] = k;
    memset(count, 0, ((size_t)(rows > cols ? rows : cols) + 1) * sizeof *count);
    for (int64_t k = 0; k < nnz; ++k)
        count[row[k] + 1]++;
    for (int64_t i = 0; i < rows; ++i)
        count[i + 1] += count[i];
    for (int64_t q = 0; q < nnz; ++q)
        order[count[row[by_col[q]]]++] = by_col[q];
    /* merge equal positions, summing in input order */
    for (int64_t q = 0; q < nnz; ++q) {
        const int64_t k = order[q];
        const bool repeat = q > 0 && row[order[q - 1]] == row[k] && col[order[q - 1]] == col[k];
        if (repeat && duplicates == DC_COO_REFUSE) {
            dc_error(ctx, DC_ERR_ARG, "%s: triplets %lld and %lld are both at (%lld, %lld) (duplicates refused)", fn,
                     (long long)order[q - 1], (long long)k, (long long)row[k], (long long)col[k]);
            goto done;
        }
        if (repeat) {
            if (h.val)
                h.val[h.nnz - 1] += val[k];
            continue;
        }
        h.col_idx[h.nnz] = col[k];
        if (h.val)
            h.val[h.nnz] = val[k];
        h.row_ptr[row[k] + 1]++;
        h.nnz++;
    }
    for (int64_t i = 0; i < rows; ++i)
        h.row_ptr[i + 1] += h.row_ptr[i];
    /* merged duplicates of a pattern matrix (val NULL) still hold 1 */
    a = finish(ctx, fn, dtype, &h);
done:
    free(by_col);
    free(order);
    free(count);
    host_pattern_free(&h);
    return a;
}

dc_csr *dc_csr_from_csr(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz, const int64_t *row_ptr,
                        const int64_t *col_idx, const double *val)
{
    const char *fn = "dc_csr_from_csr";
    if (!ctx)
        return NULL;
    if (check_sizes(ctx, fn, dtype, rows, cols, nnz) != DC_OK)
        return NULL;
    if (!row_ptr || (nnz > 0 && !col_idx)) {
        dc_error(ctx, DC_ERR_ARG, "%s: %s is NULL", fn, row_ptr ? "col_idx" : "row_ptr");
        return NULL;
    }
    if (row_ptr[0] != 0) {
        dc_error(ctx, DC_ERR_ARG, "%s: row_ptr[0] = %lld, must be 0", fn, (long long)row_ptr[0]);
        return NULL;
    }
    for (int64_t i = 0; i < rows; ++i) {
        if (row_ptr[i + 1] < row_ptr[i]) {
            dc_error(ctx, DC_ERR_ARG,
                     "%s: row_ptr[%lld] = %lld is below row_ptr[%lld] = %lld (row pointers must not "
                     "decrease)",
                     fn, (long long)(i + 1), (long long)row_ptr[i + 1], (long long)i, (long long)row_ptr[i]);
            return NULL;
        }
        if (row_ptr[i + 1] > nnz) {
            dc_error(ctx, DC_ERR_ARG, "%s: row_ptr[%lld] = %lld is past nnz = %lld", fn, (long long)(i + 1),
                     (long long)row_ptr[i + 1], (long long)nnz);
            return NULL;
        }
    }
    if (row_ptr[rows] != nnz) {
        dc_error(ctx, DC_ERR_ARG, "%s: row_ptr[%lld] = %lld, must be nnz = %lld", fn, (long long)rows,
                 (long long)row_ptr[rows], (long long)nnz);
        return NULL;
    }
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t k = row_ptr[i]; k < row_ptr[i + 1]; ++k) {
            if (col_idx[k] < 0 || col_idx[k] >= cols) {
                dc_error(ctx, DC_ERR_ARG, "%s: col_idx[%lld] = %lld in row %lld is outside 0..%lld", fn, (long long)k,
                         (long long)col_idx[k], (long long)i, (long long)cols - 1);
                return NULL;
            }
            if (k > row_ptr[i] && col_idx[k] <= col_idx[k - 1]) {
                dc_error(ctx, DC_ERR_ARG,
                         "%s: col_idx[%lld] = %lld is not above col_idx[%lld] = %lld in row %lld "
                         "(columns must increase within a row: sorted, no duplicates)",
                         fn, (long long)k, (long long)col_idx[k], (long long)(k - 1), (long long)col_idx[k - 1],
                         (long long)i);
                return NULL;
            }
        }
    const host_pattern h = {rows, cols, nnz, (int64_t *)row_ptr, (int64_t *)col_idx, (double *)val};
    return finish(ctx, fn, dtype, &h);
}

/* The tensor's elements as doubles, row-major: one copy when contiguous. */
static dc_status read_dense(const dc_tensor *t, double *d)
{
    if (!dc_tensor_is_contiguous(t)) {
        for (int64_t e = 0; e < t->numel; ++e) {
            const dc_status st = dc_tensor_get(t, e, &d[e]);
            if (st != DC_OK)
                return st;
        }
        return DC_OK;
    }
    const dc_status st = dc_tensor_to_host(t, d, (size_t)t->numel * dc_dtype_size(t->dtype));
    if (st == DC_OK && t->dtype == DC_F32) /* widen in place, from the end */
        for (int64_t e = t->numel; e-- > 0;) {
            float f;
            memcpy(&f, (unsigned char *)d + (size_t)e * sizeof f, sizeof f);
            d[e] = (double)f;
        }
    return st;
}

dc_csr *dc_csr_from_dense(const dc_tensor *dense)
{
    const char *fn = "dc_csr_from_dense";
    if (!dense) {
        dc_error_noctx(DC_ERR_ARG, "%s: the tensor is NULL", fn);
        return NULL;
    }
    dc_ctx *ctx = dense->ctx;
    char s[128];
    if (dense->ndim != 2) {
        dc_error(ctx, DC_ERR_SHAPE, "%s: the tensor must be 2-D, got %s", fn, dc_tensor_shape_str(dense, s, sizeof s));
        return NULL;
    }
    const int64_t rows = dense->shape[0], cols = dense->shape[1];
    double *d = malloc((size_t)(dense->numel ? dense->numel : 1) * sizeof *d);
    host_pattern h = {rows,
                      cols,
                      0,
                      calloc((size_t)rows + 1, sizeof(int64_t)),
                      malloc((size_t)(dense->numel ? dense->numel : 1) * sizeof(int64_t)),
                      malloc((size_t)(dense->numel ? dense->numel : 1) * sizeof(double))};
    dc_csr *a = NULL;
    if (!d || !h.row_ptr || !h.col_idx || !h.val) {
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of host memory", fn);
        goto done;
    }
    if (read_dense(dense, d) != DC_OK)
        goto done;
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j)
            if (d[i * cols + j] != 0) { /* NaN too */
                h.col_idx[h.nnz] = j;
                h.val[h.nnz++] = d[i * cols + j];
            }
        h.row_ptr[i + 1] = h.nnz;
    }
    a = finish(ctx, fn, dense->dtype, &h);
done:
    free(d);
    host_pattern_free(&h);
    return a;
}
