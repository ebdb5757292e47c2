/* Values moved between layouts: to a dense matrix and back (each the
 * other's adjoint), and into the transpose's order (a gather by a
 * permutation, whose adjoint is the scatter by it). */
#include "../ops/backward.h"
#include "csr_internal.h"

static dc_tensor *record1(dc_tape *tape, dc_op op, const dc_csr *a, dc_tensor *in, dc_tensor *y)
{
    if (!dc_tape_wants_node(tape, 1, &in))
        return y;
    dc_node *node = dc_tape_record(tape, op, 1, &in, 1, &y);
    if (!node)
        return NULL;
    node->as.csr.a = a;
    node->as.csr.transpose = false;
    return y;
}

dc_tensor *dc_op_csr_to_dense(dc_tape *tape, const dc_csr *a, dc_tensor *values)
{
    const char *op = "dc_op_csr_to_dense";
    const char *const labels[] = {"values"};
    if (dc_op_check_args(tape, op, 1, &values, labels) != DC_OK || dc_csr_check(tape, op, a, values) != DC_OK)
        return NULL;
    const int64_t shape[2] = {a->rows, a->cols};
    dc_tensor *y = dc_tape_alloc_tensor(tape, values->dtype, 2, shape);
    if (!y || dc_csr_kernel_to_dense(tape->ctx, values->dtype, a, dc_csr_vec_of(values), dc_csr_dense_of(y),
                                     DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    return record1(tape, DC_OP_CSR_TO_DENSE, a, values, y);
}

dc_status dc_csr_to_dense_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *values = node->in[0];
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, values, &mode);
    if (st == DC_OK)
        st = dc_csr_kernel_sample(tape->ctx, values->dtype, node->as.csr.a, dc_csr_dense_of(node->out[0]->grad),
                                  dc_csr_vec_of(values->grad), mode);
    if (st == DC_OK)
        dc_grad_done(values);
    return st;
}

dc_tensor *dc_op_csr_sample(dc_tape *tape, const dc_csr *a, dc_tensor *dense)
{
    const char *op = "dc_op_csr_sample";
    const char *const labels[] = {"dense"};
    if (dc_op_check_args(tape, op, 1, &dense, labels) != DC_OK || dc_csr_check(tape, op, a, NULL) != DC_OK ||
        dc_csr_check_operand(tape, op, "dense", dense, dense->dtype, 2, a->rows, a->cols) != DC_OK)
        return NULL;
    const int64_t shape[1] = {a->nnz};
    dc_tensor *y = dc_tape_alloc_tensor(tape, dense->dtype, 1, shape);
    if (!y || dc_csr_kernel_sample(tape->ctx, dense->dtype, a, dc_csr_dense_of(dense), dc_csr_vec_of(y),
                                   DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    return record1(tape, DC_OP_CSR_SAMPLE, a, dense, y);
}

dc_status dc_csr_sample_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *dense = node->in[0];
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, dense, &mode);
    if (st == DC_OK) /* assigning writes the zeros around the pattern too */
        st = dc_csr_kernel_to_dense(tape->ctx, dense->dtype, node->as.csr.a, dc_csr_vec_of(node->out[0]->grad),
                                    dc_csr_dense_of(dense->grad), mode);
    if (st == DC_OK)
        dc_grad_done(dense);
    return st;
}

dc_tensor *dc_op_csr_transpose_values(dc_tape *tape, const dc_csr *a, dc_tensor *values)
{
    const char *op = "dc_op_csr_transpose_values";
    const char *const labels[] = {"values"};
    if (dc_op_check_args(tape, op, 1, &values, labels) != DC_OK || dc_csr_check(tape, op, a, values) != DC_OK)
        return NULL;
    const int64_t shape[1] = {a->nnz};
    dc_tensor *y = dc_tape_alloc_tensor(tape, values->dtype, 1, shape);
    if (!y || dc_csr_kernel_permute(tape->ctx, values->dtype, a, false, dc_csr_vec_of(values), dc_csr_vec_of(y),
                                    DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    return record1(tape, DC_OP_CSR_PERMUTE, a, values, y);
}

dc_status dc_csr_permute_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *values = node->in[0];
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, values, &mode);
    if (st == DC_OK)
        st = dc_csr_kernel_permute(tape->ctx, values->dtype, node->as.csr.a, true, dc_csr_vec_of(node->out[0]->grad),
                                   dc_csr_vec_of(values->grad), mode);
    if (st == DC_OK)
        dc_grad_done(values);
    return st;
}
