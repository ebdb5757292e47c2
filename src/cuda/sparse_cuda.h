/* Device kernels of the sparse ops (src/cuda/sparse.cu; the ops are in
 * src/sparse/). All pointers are device memory; a pattern's index arrays
 * are int64 when `wide`, else int32. Each output element is one sum in the
 * pattern's order by one thread: no atomics, the same bits on every run.
 * With `add` the result is added to what out holds, else it replaces it. */
#ifndef DC_CUDA_SPARSE_H
#define DC_CUDA_SPARSE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../internal.h"

/* out[i, c] = sum over p in ptr[i]..ptr[i+1]-1 of vals[(perm ? perm[p] :
 * p) * vs] * x[idx[p] * xr + c * xc] for i < out_rows, c < n; x NULL
 * reads ones. */
dc_status dc_cuda_csr_mm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t out_rows, const void *ptr, const void *idx,
                         const void *perm, const void *vals, int64_t vs, const void *x, int64_t xr, int64_t xc,
                         int64_t n, void *out, int64_t orow, int64_t ocol, bool add);

/* out[p * os] = sum over c < n of u[i, c] * v[j, c] for entry p at (i, j);
 * u or v NULL reads ones. */
dc_status dc_cuda_csr_sddmm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t rows, int64_t nnz, const void *row_ptr,
                            const void *col_idx, const void *u, int64_t ur, int64_t uc, const void *v, int64_t vr,
                            int64_t vc, int64_t n, void *out, int64_t os, bool add);

/* Gather (out[p] = in[perm[p]]) or scatter (out[perm[p]] = in[p]). */
dc_status dc_cuda_csr_permute(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t nnz, const void *perm, bool scatter,
                              const void *in, int64_t is, void *out, int64_t os, bool add);

/* to_dense: the values into the rows x cols matrix d at their positions
 * (without `add`, zeros elsewhere); else d read at the positions into the
 * values. */
dc_status dc_cuda_csr_dense(dc_ctx *ctx, dc_dtype dtype, bool wide, bool to_dense, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, void *vals, int64_t vs, void *d,
                            int64_t dr, int64_t dc, bool add);

/* The products cuSPARSE takes (src/cuda/sparse_cusparse.cu): the CSR side
 * (perm NULL) of dc_cuda_csr_mm with x given, x and out unit-stride along
 * their columns, and dc_cuda_csr_sddmm with u and v given, unit-stride
 * along their columns, and out contiguous; in_rows is the number of rows of
 * x (A's columns), cols A's. Each sets *taken when cuSPARSE ran the product
 * (its workspace from the tape's data), and leaves it false, returning
 * DC_OK, when the product is not one it takes, the context has no cuSPARSE
 * handle, or cuSPARSE reports the layout not supported; the caller then
 * runs the library's kernel. A failure of a call it made is DC_ERR_DEVICE. */
dc_status dc_cusparse_mm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t out_rows, int64_t in_rows,
                         int64_t nnz, const void *ptr, const void *idx, const void *perm, const void *vals, int64_t vs,
                         const void *x, int64_t xr, int64_t xc, int64_t n, void *out, int64_t orow, int64_t ocol,
                         bool add, bool *taken);

dc_status dc_cusparse_sddmm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, const void *u, int64_t ur,
                            int64_t uc, const void *v, int64_t vr, int64_t vc, int64_t n, void *out, int64_t os,
                            bool add, bool *taken);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_SPARSE_H */
