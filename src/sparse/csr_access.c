/* A pattern's accessors, its copy to the host, its transpose, its end. */
#include <stdlib.h>
#include <string.h>

#include "csr_internal.h"

void dc_csr_free(dc_csr *a)
{
    if (!a)
        return;
    dc_tensor_free(a->values);
    dc_mem_free(a->ctx, a->alloc);
    free(a);
}

dc_tensor *dc_csr_values(const dc_csr *a) { return a ? a->values : NULL; }
int64_t dc_csr_rows(const dc_csr *a) { return a ? a->rows : 0; }
int64_t dc_csr_cols(const dc_csr *a) { return a ? a->cols : 0; }
int64_t dc_csr_nnz(const dc_csr *a) { return a ? a->nnz : 0; }
dc_dtype dc_csr_dtype(const dc_csr *a) { return a ? a->dtype : DC_F32; }
dc_ctx *dc_csr_ctx(const dc_csr *a) { return a ? a->ctx : NULL; }
int dc_csr_index_bits(const dc_csr *a) { return a && a->wide ? 64 : 32; }

/* n indices of the pattern's type at `src` (device) into int64 dst. */
static dc_status indices_to_host(const dc_csr *a, const void *src, int64_t n, int64_t *dst)
{
    if (n == 0)
        return DC_OK;
    if (a->wide)
        return dc_mem_to_host(a->ctx, dst, src, (size_t)n * sizeof *dst);
    int32_t *narrow = malloc((size_t)n * sizeof *narrow);
    if (!narrow)
        return dc_error(a->ctx, DC_ERR_MEMORY, "out of host memory for %lld indices", (long long)n);
    dc_status st = dc_mem_to_host(a->ctx, narrow, src, (size_t)n * sizeof *narrow);
    for (int64_t k = 0; st == DC_OK && k < n; ++k)
        dst[k] = narrow[k];
    free(narrow);
    return st;
}

dc_status dc_csr_pattern_to_host(const dc_csr *a, int64_t *row_ptr, int64_t *col_idx)
{
    if (!a)
        return dc_error_noctx(DC_ERR_ARG, "dc_csr_pattern_to_host: the matrix is NULL");
    dc_status st = row_ptr ? indices_to_host(a, a->row_ptr, a->rows + 1, row_ptr) : DC_OK;
    if (st == DC_OK && col_idx)
        st = indices_to_host(a, a->col_idx, a->nnz, col_idx);
    return st;
}

dc_csr *dc_csr_transpose(const dc_csr *a)
{
    const char *fn = "dc_csr_transpose";
    if (!a) {
        dc_error_noctx(DC_ERR_ARG, "%s: the matrix is NULL", fn);
        return NULL;
    }
    const int64_t nnz = a->nnz, n1 = nnz ? nnz : 1;
    const size_t es = dc_dtype_size(a->dtype);
    int64_t *col_ptr = malloc((size_t)(a->cols + 1) * sizeof *col_ptr);
    int64_t *csc_row = malloc((size_t)n1 * sizeof *csc_row);
    int64_t *perm = malloc((size_t)n1 * sizeof *perm);
    unsigned char *raw = malloc((size_t)n1 * es);
    double *val = malloc((size_t)n1 * sizeof *val);
    dc_csr *t = NULL;
    if (!col_ptr || !csc_row || !perm || !raw || !val) {
        dc_error(a->ctx, DC_ERR_MEMORY, "%s: out of host memory", fn);
        goto done;
    }
    if (indices_to_host(a, a->col_ptr, a->cols + 1, col_ptr) != DC_OK ||
        indices_to_host(a, a->csc_row, nnz, csc_row) != DC_OK || indices_to_host(a, a->csc_perm, nnz, perm) != DC_OK)
        goto done;
    if (nnz > 0 && dc_tensor_to_host(a->values, raw, (size_t)nnz * es) != DC_OK)
        goto done;
    for (int64_t p = 0; p < nnz; ++p) {
        if (a->dtype == DC_F32) {
            float f;
            memcpy(&f, raw + (size_t)perm[p] * es, sizeof f);
            val[p] = f;
        } else {
            memcpy(&val[p], raw + (size_t)perm[p] * es, sizeof val[p]);
        }
    }
    t = dc_csr_build(a->ctx, fn, a->dtype, a->cols, a->rows, nnz, col_ptr, csc_row, val);
done:
    free(col_ptr);
    free(csc_row);
    free(perm);
    free(raw);
    free(val);
    return t;
}
