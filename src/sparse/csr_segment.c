/* Along the pattern's rows and columns: row and column sums, and the
 * gathers of a row (column) vector onto the entries that are their
 * adjoints, each the other's; a broadcast function over the entries with
 * gathered row and column vectors. Sums run through the products' kernels
 * with a missing operand read as ones. */
#include <stdio.h>

#include "../ops/backward.h"
#include "csr_internal.h"

static dc_tensor *record1(dc_tape *tape, dc_op op, const dc_csr *a, bool cols, dc_tensor *in, dc_tensor *y)
{
    if (!dc_tape_wants_node(tape, 1, &in))
        return y;
    dc_node *node = dc_tape_record(tape, op, 1, &in, 1, &y);
    if (!node)
        return NULL;
    node->as.csr.a = a;
    node->as.csr.transpose = cols;
    return y;
}

static const dc_dense_view ones = {NULL, 0, 0};

static dc_tensor *segment_sum(dc_tape *tape, const char *op, const dc_csr *a, dc_tensor *values, bool cols)
{
    const char *const labels[] = {"values"};
    if (dc_op_check_args(tape, op, 1, &values, labels) != DC_OK || dc_csr_check(tape, op, a, values) != DC_OK)
        return NULL;
    const int64_t shape[1] = {cols ? a->cols : a->rows};
    dc_tensor *y = dc_tape_alloc_tensor(tape, values->dtype, 1, shape);
    if (!y || dc_csr_kernel_mm(tape, values->dtype, cols ? dc_csr_cols_side(a) : dc_csr_rows_side(a),
                               dc_csr_vec_of(values), ones, 1, dc_csr_dense_of(y), DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    return record1(tape, DC_OP_CSR_SUM, a, cols, values, y);
}

dc_tensor *dc_op_csr_row_sum(dc_tape *tape, const dc_csr *a, dc_tensor *values)
{
    return segment_sum(tape, "dc_op_csr_row_sum", a, values, false);
}

dc_tensor *dc_op_csr_col_sum(dc_tape *tape, const dc_csr *a, dc_tensor *values)
{
    return segment_sum(tape, "dc_op_csr_col_sum", a, values, true);
}

/* values_k += g[i] (row sums) or g[j] (column sums): a gather */
dc_status dc_csr_sum_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *values = node->in[0];
    const dc_dense_view g = dc_csr_dense_of(node->out[0]->grad);
    const bool cols = node->as.csr.transpose;
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, values, &mode);
    if (st == DC_OK)
        st = dc_csr_kernel_sddmm(tape, values->dtype, node->as.csr.a, cols ? ones : g, cols ? g : ones, 1,
                                 dc_csr_vec_of(values->grad), mode);
    if (st == DC_OK)
        dc_grad_done(values);
    return st;
}

/* u_i (v_j) for each entry at (i, j). */
static dc_tensor *expand(dc_tape *tape, const char *op, const char *label, const dc_csr *a, dc_tensor *u, bool cols)
{
    const char *const labels[] = {label};
    if (dc_op_check_args(tape, op, 1, &u, labels) != DC_OK ||
        dc_csr_check_operand(tape, op, label, u, u->dtype, 1, cols ? a->cols : a->rows, -1) != DC_OK)
        return NULL;
    const int64_t shape[1] = {a->nnz};
    dc_tensor *y = dc_tape_alloc_tensor(tape, u->dtype, 1, shape);
    const dc_dense_view uv = dc_csr_dense_of(u);
    if (!y || dc_csr_kernel_sddmm(tape, u->dtype, a, cols ? ones : uv, cols ? uv : ones, 1, dc_csr_vec_of(y),
                                  DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    return record1(tape, DC_OP_CSR_EXPAND, a, cols, u, y);
}

/* u_i += the sum of the adjoints of row i's entries (v_j: column j's) */
dc_status dc_csr_expand_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *u = node->in[0];
    const dc_csr *a = node->as.csr.a;
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, u, &mode);
    if (st == DC_OK)
        st = dc_csr_kernel_mm(tape, u->dtype, node->as.csr.transpose ? dc_csr_cols_side(a) : dc_csr_rows_side(a),
                              dc_csr_vec_of(node->out[0]->grad), ones, 1, dc_csr_dense_of(u->grad), mode);
    if (st == DC_OK)
        dc_grad_done(u);
    return st;
}

dc_status dc_op_csr_broadcast(dc_tape *tape, const dc_bfn *fn, const dc_csr *a, int n_inputs, dc_tensor *const *inputs,
                              const dc_csr_operand *kinds, int n_outputs, dc_tensor **outputs)
{
    const char *op = "dc_op_csr_broadcast";
    if (!tape)
        return DC_ERR_ARG;
    dc_ctx *ctx = tape->ctx;
    for (int k = 0; outputs && k < n_outputs; ++k)
        outputs[k] = NULL;
    dc_status st = dc_csr_check(tape, op, a, NULL);
    if (st != DC_OK)
        return st;
    if (!fn)
        return dc_error(ctx, DC_ERR_ARG, "%s: the function is NULL", op);
    if (!outputs) /* before any gather is recorded */
        return dc_error(ctx, DC_ERR_ARG, "%s: the outputs array is NULL", op);
    if (n_inputs < 0 || n_inputs > DC_BFN_MAX_INPUTS)
        return dc_error(ctx, DC_ERR_ARG, "%s: %d inputs, at most %d", op, n_inputs, DC_BFN_MAX_INPUTS);
    if (n_inputs > 0 && (!inputs || !kinds))
        return dc_error(ctx, DC_ERR_ARG, "%s: the %s array is NULL", op, inputs ? "kinds" : "inputs");
    dc_tensor *along[DC_BFN_MAX_INPUTS];
    bool entries = false;
    for (int m = 0; m < n_inputs; ++m) {
        char label[64];
        snprintf(label, sizeof label, "input %d (%s)", m, m < fn->n_inputs ? fn->input_names[m] : "?");
        if (kinds[m] == DC_CSR_ENTRY) {
            along[m] = inputs[m];
            if (!along[m]) {
                entries = true; /* dc_broadcast names the NULL */
                continue;
            }
            char s[128];
            if (along[m]->ndim > 1 || (along[m]->ndim == 1 && along[m]->shape[0] != a->nnz && along[m]->shape[0] != 1))
                return dc_error(ctx, DC_ERR_SHAPE, "%s: %s is %s, not [%lld] (the matrix's entries) or one value", op,
                                label, dc_tensor_shape_str(along[m], s, sizeof s), (long long)a->nnz);
        } else if (kinds[m] == DC_CSR_ROW || kinds[m] == DC_CSR_COL) {
            along[m] = expand(tape, op, label, a, inputs[m], kinds[m] == DC_CSR_COL);
            if (!along[m])
                return dc_last_status(ctx);
        } else {
            return dc_error(ctx, DC_ERR_ARG, "%s: %s has unknown kind %d", op, label, (int)kinds[m]);
        }
        entries = entries || along[m]->ndim == 1;
    }
    if (!entries)
        return dc_error(ctx, DC_ERR_SHAPE, "%s: no input runs along the matrix's entries (all are single values)", op);
    return dc_broadcast(tape, fn, n_inputs, along, n_outputs, outputs);
}
