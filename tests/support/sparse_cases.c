/* What the sparse tests share: see sparse_cases.h. */
#define _POSIX_C_SOURCE 200112L
#include "sparse_cases.h"

#include <stdlib.h>

DC_BFN_DECLARE(csr_edge);

const coo_case sparse_cases[] = {
    /* row 2 and column 3 empty; (1, 5) and (4, 6) given twice */
    {"rectangular, unsorted, duplicates",
     5,
     7,
     11,
     {4, 0, 3, 1, 0, 4, 3, 1, 0, 4, 1},
     {6, 2, 0, 5, 0, 1, 4, 5, 6, 6, 1},
     {0.5, -1.25, 2.0, 0.75, 1.5, -0.5, 0.25, -2.0, 1.0, 0.125, 3.0},
     true},
    {"no entries", 3, 4, 0, {0}, {0}, {0}, true},
    {"no rows", 0, 3, 0, {0}, {0}, {0}, true},
    {"no columns", 2, 0, 0, {0}, {0}, {0}, false},
    {"one entry", 1, 1, 1, {0}, {0}, {1.75}, false},
    {"one entry, tall", 4, 2, 1, {3}, {0}, {-0.5}, true},
    {"wide, sorted", 2, 9, 6, {0, 0, 1, 1, 1, 1}, {3, 7, 0, 2, 4, 8}, {0.3, -0.7, 1.1, 0.9, -1.3, 0.6}, true},
};
const int sparse_n_cases = (int)(sizeof sparse_cases / sizeof sparse_cases[0]);

void sparse_set_index64(bool on) { setenv("DC_CSR_INDEX64", on ? "1" : "0", 1); }

const char *const sparse_op_names[OP_COUNT] = {
    "spmv",    "spmv^T",  "spmm",     "spmm^T", "spmm(view)",       "sddmm",
    "row_sum", "col_sum", "to_dense", "sample", "transpose_values", "broadcast"};

int sparse_op_operands(const dc_csr *a, op_kind op, int *ndim, int64_t (*shape)[2], bool *is_values)
{
    const int64_t r = dc_csr_rows(a), c = dc_csr_cols(a);
    for (int m = 0; m < 3; ++m) {
        is_values[m] = false;
        ndim[m] = 0;
        shape[m][0] = shape[m][1] = 0;
    }
    is_values[0] = true;
#define SET(m, nd, d0, d1) (ndim[m] = (nd), shape[m][0] = (d0), shape[m][1] = (d1))
    switch (op) {
    case OP_SPMV:
        SET(1, 1, c, 0);
        return 2;
    case OP_SPMV_T:
        SET(1, 1, r, 0);
        return 2;
    case OP_SPMM:
        SET(1, 2, c, 3);
        return 2;
    case OP_SPMM_T:
        SET(1, 2, r, 2);
        return 2;
    case OP_SPMM_VIEW:
        SET(1, 2, 3, c);
        return 2;
    case OP_SDDMM:
        is_values[0] = false;
        SET(0, 2, r, 3);
        SET(1, 2, c, 3);
        return 2;
    case OP_SAMPLE:
        is_values[0] = false;
        SET(0, 2, r, c);
        return 1;
    case OP_BROADCAST:
        SET(1, 1, r, 0);
        SET(2, 1, c, 0);
        return 3;
    default:
        return 1;
    }
#undef SET
}

dc_tensor *sparse_op_apply(dc_tape *tape, const dc_csr *a, op_kind op, dc_tensor *const *in)
{
    switch (op) {
    case OP_SPMV:
        return dc_op_spmv(tape, a, in[0], in[1], false);
    case OP_SPMV_T:
        return dc_op_spmv(tape, a, in[0], in[1], true);
    case OP_SPMM:
        return dc_op_spmm(tape, a, in[0], in[1], false);
    case OP_SPMM_T:
        return dc_op_spmm(tape, a, in[0], in[1], true);
    case OP_SPMM_VIEW:
        return dc_op_spmm(tape, a, in[0], dc_op_transpose(tape, in[1], 0, 1), false);
    case OP_SDDMM:
        return dc_op_sddmm(tape, a, in[0], in[1]);
    case OP_ROW_SUM:
        return dc_op_csr_row_sum(tape, a, in[0]);
    case OP_COL_SUM:
        return dc_op_csr_col_sum(tape, a, in[0]);
    case OP_TO_DENSE:
        return dc_op_csr_to_dense(tape, a, in[0]);
    case OP_SAMPLE:
        return dc_op_csr_sample(tape, a, in[0]);
    case OP_TRANSPOSE_VALUES:
        return dc_op_csr_transpose_values(tape, a, in[0]);
    case OP_BROADCAST: {
        const dc_csr_operand kinds[3] = {DC_CSR_ENTRY, DC_CSR_ROW, DC_CSR_COL};
        dc_tensor *out = NULL;
        return dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, kinds, 1, &out) == DC_OK ? out : NULL;
    }
    case OP_COUNT:
        break;
    }
    return NULL;
}
