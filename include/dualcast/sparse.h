/* Sparse matrices in CSR form, differentiated through their values.
 *
 * A dc_csr is a fixed sparsity pattern: rows x cols, nnz stored entries,
 * row by row, with strictly increasing column indices within each row (so
 * no entry is stored twice). Entry k is the k-th stored entry in that order.
 * The pattern is constant structure and carries no gradient; the numbers
 * flow through the tape as a values tensor of shape [nnz], whose element k
 * belongs to entry k.
 *
 * Every op takes the pattern and a values tensor separately. The values may
 * be the matrix's own (dc_csr_values: a persistent tensor to mark with
 * dc_tensor_set_requires_grad and hand to an optimizer) or any tensor of
 * shape [nnz] computed on the tape (by dc_op_sddmm, dc_op_csr_broadcast, an
 * elementwise op on other values...). A gradient with respect to values is
 * again [nnz], in the pattern's order: the pattern never changes under
 * differentiation, an entry absent from it has no gradient.
 *
 * Indices are int32 when rows, cols and nnz all fit in int32, else int64
 * (dc_csr_index_bits); the choice changes no result. For tests, the
 * environment variable DC_CSR_INDEX64=1, read when a pattern is built,
 * forces int64.
 *
 * The pattern's arrays live on the context's device (host memory on the
 * CPU, device memory on CUDA); they are built on the host and copied once.
 * A pattern an op used must live until the tape that recorded the op is
 * reset (its adjoint reads it) and must not be freed while device work that
 * reads it is queued.
 *
 * Determinism: every result and every gradient is the same, bit for bit,
 * whatever the number of CPU threads: each output element is one sum in
 * the pattern's order, by one thread. Adjoints that sum over a column (the
 * adjoint of A x with respect to x, a column sum) read a transposed copy of
 * the pattern built with the matrix (CSC order with the permutation to CSR
 * order), never scatter-adds.
 *
 * Both backends run every op. On CUDA, the products with A over its CSR
 * order (A x, A X, and the sampled product) run through cuSPARSE with the
 * algorithms its documentation calls deterministic (CSR_ALG2 for SpMV,
 * CSR_ALG3 for SpMM, SDDMM), where the operands' layout allows (rows of
 * the dense operands contiguous, arrays aligned to 16 bytes); everything
 * else, A^T X included, runs the library's kernels, where each output
 * element is one sum in the pattern's order by one thread (no atomics).
 * DC_CUSPARSE=0 in the environment when a context is made keeps that
 * context to the library's kernels. Either way the same bits on every run,
 * not necessarily the CPU's (the device may fuse multiply-adds or sum in
 * another order); docs/design.md lists which product goes where. No op
 * waits for the device or allocates outside the tape (cuSPARSE's
 * workspace is tape memory), so a training step with sparse ops can be
 * captured as a CUDA graph. */
#ifndef DUALCAST_SPARSE_H
#define DUALCAST_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "broadcast.h"
#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_csr dc_csr;

/* What dc_csr_from_coo does with two triplets at the same (row, col). */
typedef enum dc_coo_duplicates {
    DC_COO_SUM = 0,    /* one entry, the sum of their values in input order */
    DC_COO_REFUSE = 1, /* DC_ERR_ARG naming the position and both triplets */
} dc_coo_duplicates;

/* A matrix from nnz triplets (row[k], col[k], val[k]) in host memory, in any
 * order: the entries are sorted by row, then column (a stable sort: equal
 * positions keep their input order), and duplicates are summed or refused
 * as `duplicates` says. The values are converted to `dtype` after summing
 * in double; `val` may be NULL for a pattern whose values are all 1 (an
 * adjacency matrix). NaN and infinite values are kept as they are.
 * rows, cols and nnz may be 0 (row and col may then be NULL).
 * Errors (NULL returned, message in dc_last_error naming the function and
 * the argument): negative rows, cols or nnz, NULL row or col with nnz > 0,
 * an index out of range (naming the triplet k and the bound), a duplicate
 * under DC_COO_REFUSE (DC_ERR_ARG), an unknown dtype (DC_ERR_DTYPE),
 * memory. The caller owns the result: dc_csr_free. */
dc_csr *dc_csr_from_coo(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz, const int64_t *row,
                        const int64_t *col, const double *val, dc_coo_duplicates duplicates);

/* A matrix from CSR arrays in host memory, checked before use: row_ptr has
 * rows + 1 entries, row_ptr[0] == 0, it never decreases, row_ptr[rows] ==
 * nnz; col_idx has nnz entries, each in 0..cols-1, strictly increasing
 * within a row (sorted, no duplicates). `val` (nnz values, or NULL for all
 * 1) is converted to `dtype`. A violation fails with DC_ERR_ARG and a
 * message naming the array, the index and the values at fault (for example
 * "col_idx[4] = 2 is not above col_idx[3] = 2 in row 1"). Other errors as
 * dc_csr_from_coo. The caller owns the result. */
dc_csr *dc_csr_from_csr(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz, const int64_t *row_ptr,
                        const int64_t *col_idx, const double *val);

/* A matrix holding the entries of a 2-D tensor that are not zero (NaN
 * counts as not zero), with their values, in the tensor's dtype and
 * context. Waits for the device. DC_ERR_SHAPE for a tensor that is not
 * 2-D; DC_ERR_ARG for NULL. */
dc_csr *dc_csr_from_dense(const dc_tensor *dense);

/* The transpose as a new matrix (cols x rows) that the caller owns: its
 * pattern is A's in column order, its values a copy of A's current values
 * in that order (a new persistent tensor; see dc_op_csr_transpose_values
 * for values that flow on the tape). NULL with a message on error. */
dc_csr *dc_csr_transpose(const dc_csr *a);

/* Frees the pattern and its values tensor (and that tensor's gradient).
 * NULL is allowed. */
void dc_csr_free(dc_csr *a);

/* The matrix's own values: a persistent [nnz] tensor owned by the matrix,
 * zero-initialized when built from nothing. */
dc_tensor *dc_csr_values(const dc_csr *a);

/* Sizes, dtype, context; 0 (or DC_F32 / NULL) for a NULL matrix. */
int64_t dc_csr_rows(const dc_csr *a);
int64_t dc_csr_cols(const dc_csr *a);
int64_t dc_csr_nnz(const dc_csr *a);
dc_dtype dc_csr_dtype(const dc_csr *a);
dc_ctx *dc_csr_ctx(const dc_csr *a);
/* 32 or 64: the width of the stored indices. */
int dc_csr_index_bits(const dc_csr *a);

/* Copies the pattern to host memory: row_ptr (rows + 1 entries) and
 * col_idx (nnz entries) as int64; either may be NULL to skip it. Waits for
 * the device. DC_ERR_ARG for a NULL matrix. */
dc_status dc_csr_pattern_to_host(const dc_csr *a, int64_t *row_ptr, int64_t *col_idx);

/* ---- ops: one tape node each (dc_op_csr_broadcast: see there), recorded
 * when an input requires a gradient. `values` is a [nnz] tensor of the
 * tape's context; dense operands share its dtype, which is the op's (the
 * pattern has none of its own: dc_csr_dtype is its values tensor's).
 * Errors as for the dense ops (NULL returned, message naming the op, the
 * argument and both shapes): a NULL matrix (DC_ERR_ARG), a matrix of
 * another context (DC_ERR_ARG), values that are not [nnz] or an operand of
 * the wrong size (DC_ERR_SHAPE), mixed dtypes (DC_ERR_DTYPE). Dense
 * operands may be any strided view. ---- */

/* y = A x (x: [cols], y: [rows]), or with transpose_a y = A^T x (x: [rows],
 * y: [cols]). Each y_i sums its row's products in the pattern's order;
 * an empty row gives 0. Adjoints: values_k += ybar_i x_j for entry k at
 * (i, j); x += A^T ybar (A ybar when transposed), read through the
 * transposed pattern. NaN and Inf propagate as in the dense product over
 * the stored entries only (an absent entry is no 0 * Inf term). */
dc_tensor *dc_op_spmv(dc_tape *tape, const dc_csr *a, dc_tensor *values, dc_tensor *x, bool transpose_a);

/* Y = A X (X: [cols, n], Y: [rows, n]) or with transpose_a Y = A^T X
 * (X: [rows, n], Y: [cols, n]). Adjoints as for dc_op_spmv, a row at a
 * time: values_k += <Ybar[i,:], X[j,:]> (transposed: <X[i,:], Ybar[j,:]>),
 * a sampled dense-dense product. */
dc_tensor *dc_op_spmm(dc_tape *tape, const dc_csr *a, dc_tensor *values, dc_tensor *x, bool transpose_a);

/* The sampled dense-dense product: (U V^T) at A's pattern, as [nnz]
 * values: out_k = <U[i,:], V[j,:]> for entry k at (i, j); U: [rows, d],
 * V: [cols, d] (d may be 0: zeros). A's values are not read. Adjoints:
 * U += B V and V += B^T U where B holds the output's adjoint at A's
 * pattern. */
dc_tensor *dc_op_sddmm(dc_tape *tape, const dc_csr *a, dc_tensor *u, dc_tensor *v);

/* Row sums ([rows]) and column sums ([cols]) of the matrix with these
 * values; an empty row or column sums to 0. Adjoint: values_k += the
 * adjoint of entry k's row (column). */
dc_tensor *dc_op_csr_row_sum(dc_tape *tape, const dc_csr *a, dc_tensor *values);
dc_tensor *dc_op_csr_col_sum(dc_tape *tape, const dc_csr *a, dc_tensor *values);

/* The dense [rows, cols] matrix: values at the pattern, 0 elsewhere.
 * Adjoint: values_k += the adjoint at entry k's position. */
dc_tensor *dc_op_csr_to_dense(dc_tape *tape, const dc_csr *a, dc_tensor *values);

/* A dense [rows, cols] tensor read at A's pattern: [nnz] values. The
 * adjoint adds each value's adjoint at its position, 0 elsewhere. */
dc_tensor *dc_op_csr_sample(dc_tape *tape, const dc_csr *a, dc_tensor *dense);

/* A's values in the order of the pattern of dc_csr_transpose(a): a gather
 * by a permutation, whose adjoint is the scatter by the same permutation
 * (each element written once: deterministic). */
dc_tensor *dc_op_csr_transpose_values(dc_tape *tape, const dc_csr *a, dc_tensor *values);

/* How dc_op_csr_broadcast reads each input of its function. */
typedef enum dc_csr_operand {
    DC_CSR_ENTRY = 0, /* any tensor that broadcasts to [nnz]: values, a scalar */
    DC_CSR_ROW = 1,   /* a [rows] vector u, read as u_i for entry k at (i, j) */
    DC_CSR_COL = 2,   /* a [cols] vector v, read as v_j */
} dc_csr_operand;

/* Runs the broadcast function `fn` (broadcast.h) over A's entries: input m
 * is read as kinds[m] says, and each output is a new [nnz] tape tensor,
 * values at A's pattern. For example a function of (a, u, v) returning
 * a * u * v, given A's values (DC_CSR_ENTRY), u (DC_CSR_ROW) and v
 * (DC_CSR_COL), gives the values of diag(u) A diag(v). The row and column
 * vectors are gathered along the pattern into [nnz] operands (nodes whose
 * adjoints are row and column sums, deterministic), then the function runs
 * as ONE dc_broadcast node: one dual pass writes its outputs and all its
 * partials, exactly as for dense operands, control inputs included.
 * Errors as dc_broadcast's, plus a NULL matrix or kinds (DC_ERR_ARG), an
 * unknown kind (DC_ERR_ARG), a row or column vector of the wrong size
 * (DC_ERR_SHAPE). On error outputs[] holds no usable result. */
dc_status dc_op_csr_broadcast(dc_tape *tape, const dc_bfn *fn, const dc_csr *a, int n_inputs, dc_tensor *const *inputs,
                              const dc_csr_operand *kinds, int n_outputs, dc_tensor **outputs);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_SPARSE_H */
