/* Sparse-dense products: y = A x and Y = A X (or with A^T), and the
 * sampled dense-dense product, each the other's adjoint with respect to
 * A's values. The adjoint with respect to a dense operand is a product
 * with the transposed pattern (its column order): no scatter-adds. */
#include "../ops/backward.h"
#include "csr_internal.h"

static dc_tensor *product(dc_tape *tape, const char *op, const dc_csr *a, dc_tensor *values, dc_tensor *x,
                          bool transpose_a, bool vector)
{
    const char *const labels[] = {"values", "x"};
    dc_tensor *in[2] = {values, x};
    if (dc_op_check_args(tape, op, 2, in, labels) != DC_OK || dc_csr_check(tape, op, a, values) != DC_OK)
        return NULL;
    const int64_t in_rows = transpose_a ? a->rows : a->cols, out_rows = transpose_a ? a->cols : a->rows;
    if (dc_csr_check_operand(tape, op, "x", x, values->dtype, vector ? 1 : 2, in_rows, -1) != DC_OK)
        return NULL;
    const int64_t n = vector ? 1 : x->shape[1];
    const int64_t shape[2] = {out_rows, n};
    dc_tensor *y = dc_tape_alloc_tensor(tape, values->dtype, vector ? 1 : 2, shape);
    if (!y)
        return NULL;
    const dc_csr_side side = transpose_a ? dc_csr_cols_side(a) : dc_csr_rows_side(a);
    if (dc_csr_kernel_mm(tape, values->dtype, side, dc_csr_vec_of(values), dc_csr_dense_of(x), n,
                         dc_csr_dense_of(y), DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    if (dc_tape_wants_node(tape, 2, in)) {
        dc_node *node = dc_tape_record(tape, DC_OP_SPMM, 2, in, 1, &y);
        if (!node)
            return NULL;
        node->as.csr.a = a;
        node->as.csr.transpose = transpose_a;
    }
    return y;
}

dc_tensor *dc_op_spmv(dc_tape *tape, const dc_csr *a, dc_tensor *values, dc_tensor *x, bool transpose_a)
{
    return product(tape, "dc_op_spmv", a, values, x, transpose_a, true);
}

dc_tensor *dc_op_spmm(dc_tape *tape, const dc_csr *a, dc_tensor *values, dc_tensor *x, bool transpose_a)
{
    return product(tape, "dc_op_spmm", a, values, x, transpose_a, false);
}

/* Whether t's gradient is (or will be) a view into its slice base's. */
static bool grad_shares_base(const dc_tensor *t) { return t->slice_base && t->slice_base->requires_grad; }

dc_status dc_spmm_backward(dc_tape *tape, dc_node *node)
{
    const dc_csr *a = node->as.csr.a;
    const bool t = node->as.csr.transpose;
    dc_tensor *values = node->in[0], *x = node->in[1];
    const dc_tensor *gy = node->out[0]->grad;
    const int64_t n = x->ndim == 1 ? 1 : x->shape[1];
    dc_write_mode mode;
    dc_status st;
    if (values->requires_grad && x->requires_grad && values != x && !grad_shares_base(values) &&
        !grad_shares_base(x)) {
        /* Both in one walk of the side that x's adjoint sums over (the
         * column order for A, the row order for A^T): gy's row read once.
         * Not for one tensor as both (a vector of nnz numbers as x), nor
         * for slices, whose gradients may share a base's memory. */
        dc_write_mode x_mode;
        st = dc_grad_prepare(tape, values, &mode);
        if (st == DC_OK)
            st = dc_grad_prepare(tape, x, &x_mode);
        bool taken = false;
        if (st == DC_OK)
            st = dc_csr_kernel_mm_backward(tape, x->dtype, t ? dc_csr_rows_side(a) : dc_csr_cols_side(a),
                                           t ? dc_csr_cols_side(a) : dc_csr_rows_side(a), dc_csr_vec_of(values),
                                           dc_csr_dense_of(gy), dc_csr_dense_of(x), n, dc_csr_vec_of(values->grad),
                                           mode, dc_csr_dense_of(x->grad), x_mode, &taken);
        if (st != DC_OK)
            return st;
        if (taken) {
            dc_grad_done(values);
            dc_grad_done(x);
            return DC_OK;
        }
    }
    if (values->requires_grad) {
        /* values_k += <gy[i], x[j]>, or <x[i], gy[j]> for A^T */
        st = dc_grad_prepare(tape, values, &mode);
        if (st == DC_OK)
            st = dc_csr_kernel_sddmm(tape, values->dtype, a, dc_csr_dense_of(t ? x : gy),
                                     dc_csr_dense_of(t ? gy : x), n, dc_csr_vec_of(values->grad), mode);
        if (st != DC_OK)
            return st;
        dc_grad_done(values);
    }
    if (x->requires_grad) {
        /* x += A^T gy, or A gy for A^T */
        st = dc_grad_prepare(tape, x, &mode);
        if (st == DC_OK)
            st = dc_csr_kernel_mm(tape, x->dtype, t ? dc_csr_rows_side(a) : dc_csr_cols_side(a),
                                  dc_csr_vec_of(values), dc_csr_dense_of(gy), n, dc_csr_dense_of(x->grad), mode);
        if (st != DC_OK)
            return st;
        dc_grad_done(x);
    }
    return DC_OK;
}

dc_tensor *dc_op_sddmm(dc_tape *tape, const dc_csr *a, dc_tensor *u, dc_tensor *v)
{
    const char *op = "dc_op_sddmm";
    const char *const labels[] = {"u", "v"};
    dc_tensor *in[2] = {u, v};
    if (dc_op_check_args(tape, op, 2, in, labels) != DC_OK || dc_csr_check(tape, op, a, NULL) != DC_OK)
        return NULL;
    if (dc_csr_check_operand(tape, op, "u", u, u->dtype, 2, a->rows, -1) != DC_OK)
        return NULL;
    const int64_t d = u->shape[1];
    if (v->ndim == 2 && v->dtype == u->dtype && v->shape[0] == a->cols && v->shape[1] != d) {
        char su[128], sv[128];
        dc_error(tape->ctx, DC_ERR_SHAPE, "%s: u %s and v %s: their rows differ in length (%lld and %lld)", op,
                 dc_tensor_shape_str(u, su, sizeof su), dc_tensor_shape_str(v, sv, sizeof sv), (long long)d,
                 (long long)v->shape[1]);
        return NULL;
    }
    if (dc_csr_check_operand(tape, op, "v", v, u->dtype, 2, a->cols, d) != DC_OK)
        return NULL;
    const int64_t shape[1] = {a->nnz};
    dc_tensor *y = dc_tape_alloc_tensor(tape, u->dtype, 1, shape);
    if (!y || dc_csr_kernel_sddmm(tape, u->dtype, a, dc_csr_dense_of(u), dc_csr_dense_of(v), d, dc_csr_vec_of(y),
                                  DC_WRITE_ASSIGN) != DC_OK)
        return NULL;
    if (dc_tape_wants_node(tape, 2, in)) {
        dc_node *node = dc_tape_record(tape, DC_OP_SDDMM, 2, in, 1, &y);
        if (!node)
            return NULL;
        node->as.csr.a = a;
        node->as.csr.transpose = false;
    }
    return y;
}

/* u += B v, v += B^T u, B the output's adjoint at A's pattern. */
dc_status dc_sddmm_backward(dc_tape *tape, dc_node *node)
{
    const dc_csr *a = node->as.csr.a;
    const dc_tensor *gy = node->out[0]->grad;
    for (int side = 0; side < 2; ++side) {
        dc_tensor *target = node->in[side], *other = node->in[1 - side];
        if (!target->requires_grad)
            continue;
        dc_write_mode mode;
        dc_status st = dc_grad_prepare(tape, target, &mode);
        if (st == DC_OK)
            st = dc_csr_kernel_mm(tape, target->dtype, side == 0 ? dc_csr_rows_side(a) : dc_csr_cols_side(a),
                                  dc_csr_vec_of(gy), dc_csr_dense_of(other), target->shape[1],
                                  dc_csr_dense_of(target->grad), mode);
        if (st != DC_OK)
            return st;
        dc_grad_done(target);
    }
    return DC_OK;
}
