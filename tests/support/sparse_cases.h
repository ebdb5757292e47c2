/* What the sparse tests share (test_sparse.c on the CPU, test_sparse_cuda.c
 * on CUDA against the CPU): the matrices given as triplets, and the ops run
 * over each of them, with their operands' shapes. */
#ifndef DC_TEST_SPARSE_CASES_H
#define DC_TEST_SPARSE_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include <dualcast.h>

/* A matrix as triplets, in the order a user might give them; on_device:
 * the CUDA test runs it too. */
typedef struct coo_case {
    const char *name;
    int64_t rows, cols, nnz;
    int64_t row[12], col[12];
    double val[12];
    bool on_device;
} coo_case;

/* Empty rows and columns, duplicate and unsorted triplets, no entries, no
 * rows, no columns, one entry, rectangular shapes; cases[0] has them all. */
extern const coo_case sparse_cases[];
extern const int sparse_n_cases;

/* Sets DC_CSR_INDEX64, which patterns built after use: int64 indices (on)
 * or the narrowest that fit. */
void sparse_set_index64(bool on);

typedef enum op_kind {
    OP_SPMV,
    OP_SPMV_T,
    OP_SPMM,
    OP_SPMM_T,
    OP_SPMM_VIEW, /* X given as a transposed view */
    OP_SDDMM,
    OP_ROW_SUM,
    OP_COL_SUM,
    OP_TO_DENSE,
    OP_SAMPLE,
    OP_TRANSPOSE_VALUES,
    OP_BROADCAST,
    OP_COUNT
} op_kind;

extern const char *const sparse_op_names[OP_COUNT];

/* The op's operands on A: returns their number, with for each its rank and
 * sizes (ndim[m], shape[m]) and whether it is A's values (is_values[m]:
 * then no shape). Operand 0 is the values unless the op takes two dense
 * ones (sddmm) or one (sample). */
int sparse_op_operands(const dc_csr *a, op_kind op, int *ndim, int64_t (*shape)[2], bool *is_values);

/* The op on A and its operands; NULL (the context's error set) on failure.
 * The broadcast applies csr_edge (tests/bfn) to an entry, a row and a
 * column operand. */
dc_tensor *sparse_op_apply(dc_tape *tape, const dc_csr *a, op_kind op, dc_tensor *const *in);

#endif /* DC_TEST_SPARSE_CASES_H */
