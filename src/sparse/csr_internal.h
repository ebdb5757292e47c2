/* The CSR pattern behind dc_csr, and the kernels of the sparse ops. */
#ifndef DC_SPARSE_CSR_INTERNAL_H
#define DC_SPARSE_CSR_INTERNAL_H

#include "../ops/ops_internal.h"

struct dc_csr {
    dc_ctx *ctx;
    dc_dtype dtype;
    int64_t rows, cols, nnz;
    bool wide; /* int64 indices, else int32 */
    /* On the context's device, each of the index type. CSR: */
    void *row_ptr; /* rows + 1 */
    void *col_idx; /* nnz */
    /* The same entries in column order (the transpose's CSR): */
    void *col_ptr;  /* cols + 1 */
    void *csc_row;  /* nnz: the row of each */
    void *csc_perm; /* nnz: its entry in CSR order */
    void *alloc;    /* one allocation holding the five arrays */
    dc_tensor *values;
};

/* The matrix for a checked CSR pattern in host memory (val: nnz values or
 * NULL for ones): the column order computed, the arrays copied to the
 * context's device, the values tensor made. NULL with a message naming
 * `fn` when out of memory. */
dc_csr *dc_csr_build(dc_ctx *ctx, const char *fn, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz,
                     const int64_t *row_ptr, const int64_t *col_idx, const double *val);

/* Index k of an index array of the pattern. */
static inline int64_t dc_csr_ix(const void *p, bool wide, int64_t k)
{
    return wide ? ((const int64_t *)p)[k] : (int64_t)((const int32_t *)p)[k];
}

/* A dense matrix operand: rows x n elements at ptr with strides in
 * elements. NULL ptr: every element is 1 (the sums and gathers use it). */
typedef struct dc_dense_view {
    void *ptr;
    int64_t rs, cs;
} dc_dense_view;

/* A [nnz] vector: elements at ptr, stride s. */
typedef struct dc_vec_view {
    void *ptr;
    int64_t s;
} dc_vec_view;

/* One side of the pattern: rows of out_rows, entries ptr[i]..ptr[i+1]-1,
 * the column (CSR) or row (CSC) of each in idx, and for CSC the CSR entry
 * of each in perm (NULL for CSR); idx is below in_rows. */
typedef struct dc_csr_side {
    int64_t out_rows, nnz;
    const void *ptr, *idx, *perm;
    bool wide;
    int64_t in_rows;
} dc_csr_side;

dc_csr_side dc_csr_rows_side(const dc_csr *a);
dc_csr_side dc_csr_cols_side(const dc_csr *a);

/* out[i, c] (= or +=) sum over the side's entries p of row i of
 * vals[perm ? perm[p] : p] * x[idx[p], c], for c < n. The CSR side gives
 * A x, the CSC side A^T x. Runs on the tape's context; on CUDA, a product
 * that cuSPARSE takes (src/cuda/sparse_cusparse.cu) has its workspace from
 * the tape's data. */
dc_status dc_csr_kernel_mm(dc_tape *tape, dc_dtype dtype, dc_csr_side side, dc_vec_view vals, dc_dense_view x,
                           int64_t n, dc_dense_view out, dc_write_mode mode);

/* out[k] (= or +=) sum over c < n of u[i, c] * v[j, c], for entry k at
 * (i, j). The tape as for dc_csr_kernel_mm. */
dc_status dc_csr_kernel_sddmm(dc_tape *tape, dc_dtype dtype, const dc_csr *a, dc_dense_view u, dc_dense_view v,
                              int64_t n, dc_vec_view out, dc_write_mode mode);

/* Both adjoints of out = fwd * x (fwd the side of the forward product, as
 * for dc_csr_kernel_mm; side its transpose) given the output's adjoint g, in
 * one walk of side (or, when side is the CSC one and the product small, of
 * fwd on one thread, with the same bits): vals_grad[k] (= or +=, by
 * vals_mode) sum over c < n of g[idx[p], c] * x[r, c] for entry p of row r
 * (k its CSR entry), and x_grad (= or +=, by x_mode) the side's transpose
 * times g: the same bits as dc_csr_kernel_sddmm and dc_csr_kernel_mm.
 * Sets *taken to false and writes nothing on CUDA, when n is above 256, or
 * when a dense operand's rows are not contiguous (n > 1): the caller then
 * runs the two kernels. Adding to x_grad takes scratch from the tape. */
dc_status dc_csr_kernel_mm_backward(dc_tape *tape, dc_dtype dtype, dc_csr_side side, dc_csr_side fwd, dc_vec_view vals,
                                    dc_dense_view g, dc_dense_view x, int64_t n, dc_vec_view vals_grad,
                                    dc_write_mode vals_mode, dc_dense_view x_grad, dc_write_mode x_mode, bool *taken);

/* Gather (out[p] = in[perm[p]]) or scatter (out[perm[p]] = in[p]) by the
 * column-order permutation, = or +=. */
dc_status dc_csr_kernel_permute(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, bool scatter, dc_vec_view in,
                                dc_vec_view out, dc_write_mode mode);

/* Dense at the pattern: to_dense writes vals into d at their positions
 * (zeroing the rest when mode is DC_WRITE_ASSIGN); sample reads d at the
 * positions into vals (= or +=). */
dc_status dc_csr_kernel_to_dense(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, dc_vec_view vals, dc_dense_view d,
                                 dc_write_mode mode);
dc_status dc_csr_kernel_sample(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, dc_dense_view d, dc_vec_view vals,
                               dc_write_mode mode);

/* ---- shared by the ops (csr_ops_common.c) ---- */

/* Checks the matrix (not NULL, the tape's context) and the values ([nnz]);
 * `op` names the function in messages. */
dc_status dc_csr_check(dc_tape *tape, const char *op, const dc_csr *a, const dc_tensor *values);

/* Checks that t has the dtype of the values and the given rank and sizes
 * (a negative size: any). */
dc_status dc_csr_check_operand(dc_tape *tape, const char *op, const char *label, const dc_tensor *t, dc_dtype dtype,
                               int ndim, int64_t d0, int64_t d1);

/* Views of a tensor: a matrix (a vector is [len, 1]) and a vector. */
dc_dense_view dc_csr_dense_of(const dc_tensor *t);
dc_vec_view dc_csr_vec_of(const dc_tensor *t);

#endif /* DC_SPARSE_CSR_INTERNAL_H */
