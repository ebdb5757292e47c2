/* Sparse CSR matrices: building and validating patterns, every op against
 * its dense equivalent, every adjoint against central differences in
 * float64 (on the values and on the dense operands), over a table of
 * matrices with empty rows and columns, no entries, one entry, duplicate
 * and unsorted triplets and rectangular shapes, with int32 and int64
 * indices; the same bits on any number of threads; bad input refused. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/sparse_cases.h"
#include "support/test_support.h"

DC_BFN_DECLARE(csr_edge);
DC_BFN_DECLARE(gated_scale);

static dc_csr *case_csr(dc_ctx *ctx, dc_dtype dtype, const coo_case *c)
{
    dc_csr *a = dc_csr_from_coo(ctx, dtype, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
    TEST_NONNULL(ctx, a);
    return a;
}

/* The case as a dense row-major matrix (duplicates summed); malloc'd. */
static double *case_dense(const coo_case *c)
{
    double *d = calloc((size_t)(c->rows * c->cols + 1), sizeof *d);
    for (int64_t k = 0; k < c->nnz; ++k)
        d[c->row[k] * c->cols + c->col[k]] += c->val[k];
    return d;
}

/* The pattern on the host, with the row of each entry. */
typedef struct pattern {
    int64_t rows, cols, nnz;
    int64_t *row_ptr, *col, *row;
} pattern;

static pattern pattern_of(const dc_csr *a)
{
    pattern p = {dc_csr_rows(a), dc_csr_cols(a), dc_csr_nnz(a), NULL, NULL, NULL};
    p.row_ptr = malloc((size_t)(p.rows + 1) * sizeof(int64_t));
    p.col = malloc((size_t)(p.nnz + 1) * sizeof(int64_t));
    p.row = malloc((size_t)(p.nnz + 1) * sizeof(int64_t));
    TEST_OK(dc_csr_ctx(a), dc_csr_pattern_to_host(a, p.row_ptr, p.col));
    for (int64_t i = 0; i < p.rows; ++i)
        for (int64_t k = p.row_ptr[i]; k < p.row_ptr[i + 1]; ++k)
            p.row[k] = i;
    return p;
}

static void pattern_free(pattern *p)
{
    free(p->row_ptr);
    free(p->col);
    free(p->row);
}

static dc_tensor *random_tensor(dc_ctx *ctx, int ndim, int64_t d0, int64_t d1)
{
    const int64_t shape[2] = {d0, d1};
    return test_random(ctx, DC_F64, ndim, shape, -1.0, 1.0);
}

/* ---- building and validating ---- */

static void test_coo_sorts_and_sums(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const coo_case *c = &sparse_cases[0];
    sparse_set_index64(false);
    dc_csr *a = case_csr(ctx, DC_F64, c);
    assert_int_equal(dc_csr_rows(a), 5);
    assert_int_equal(dc_csr_cols(a), 7);
    assert_int_equal(dc_csr_nnz(a), 9); /* two duplicates merged */
    assert_int_equal(dc_csr_index_bits(a), 32);
    assert_int_equal(dc_csr_dtype(a), DC_F64);
    pattern p = pattern_of(a);
    const int64_t want_ptr[6] = {0, 3, 5, 5, 7, 9};
    const int64_t want_col[9] = {0, 2, 6, 1, 5, 0, 4, 1, 6};
    assert_memory_equal(p.row_ptr, want_ptr, sizeof want_ptr);
    assert_memory_equal(p.col, want_col, sizeof want_col);
    double *v = test_values(dc_csr_values(a));
    double *d = case_dense(c);
    for (int64_t k = 0; k < p.nnz; ++k)
        assert_true(v[k] == d[p.row[k] * c->cols + p.col[k]]);
    assert_true(v[4] == 0.75 + -2.0); /* (1, 5): both triplets, in input order */
    free(v);
    free(d);
    pattern_free(&p);
    dc_csr_free(a);

    /* a pattern matrix: values all 1, merged duplicates too */
    a = dc_csr_from_coo(ctx, DC_F32, c->rows, c->cols, c->nnz, c->row, c->col, NULL, DC_COO_SUM);
    TEST_NONNULL(ctx, a);
    v = test_values(dc_csr_values(a));
    for (int64_t k = 0; k < dc_csr_nnz(a); ++k)
        assert_true(v[k] == 1.0);
    free(v);
    dc_csr_free(a);

    sparse_set_index64(true);
    a = case_csr(ctx, DC_F64, c);
    assert_int_equal(dc_csr_index_bits(a), 64);
    p = pattern_of(a);
    assert_memory_equal(p.row_ptr, want_ptr, sizeof want_ptr);
    assert_memory_equal(p.col, want_col, sizeof want_col);
    pattern_free(&p);
    dc_csr_free(a);
    sparse_set_index64(false);
    dc_csr_free(NULL);
    dc_ctx_free(ctx);
}

static void expect_error(dc_ctx *ctx, const void *result, dc_status status, const char *fragment)
{
    if (result)
        fail_msg("expected an error containing \"%s\", got a result", fragment);
    assert_int_equal(dc_last_status(ctx), status);
    if (!strstr(dc_last_error(ctx), fragment))
        fail_msg("the message \"%s\" does not contain \"%s\"", dc_last_error(ctx), fragment);
    dc_clear_error(ctx);
}

static void test_coo_refusals(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const coo_case *c = &sparse_cases[0];
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 11, c->row, c->col, c->val, DC_COO_REFUSE), DC_ERR_ARG,
                 "dc_csr_from_coo: triplets 3 and 7 are both at (1, 5)");
    const int64_t bad_row[2] = {0, 5}, bad_col[2] = {1, -1}, ok[2] = {0, 1};
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 2, bad_row, ok, NULL, DC_COO_SUM), DC_ERR_ARG,
                 "triplet 1 at (5, 1) is outside the 5 x 7 matrix");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 2, ok, bad_col, NULL, DC_COO_SUM), DC_ERR_ARG,
                 "triplet 1 at (1, -1)");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, -1, 7, 0, NULL, NULL, NULL, DC_COO_SUM), DC_ERR_ARG,
                 "must not be negative");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 2, NULL, ok, NULL, DC_COO_SUM), DC_ERR_ARG,
                 "dc_csr_from_coo: row is NULL with nnz 2");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 2, ok, NULL, NULL, DC_COO_SUM), DC_ERR_ARG, "col is NULL");
    expect_error(ctx, dc_csr_from_coo(ctx, (dc_dtype)7, 5, 7, 0, NULL, NULL, NULL, DC_COO_SUM), DC_ERR_DTYPE,
                 "unknown dtype 7");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, 5, 7, 0, NULL, NULL, NULL, (dc_coo_duplicates)3), DC_ERR_ARG,
                 "unknown duplicates policy 3");
    expect_error(ctx, dc_csr_from_coo(ctx, DC_F64, INT64_MAX / 2, 7, 0, NULL, NULL, NULL, DC_COO_SUM), DC_ERR_ARG,
                 "too large");
    assert_null(dc_csr_from_coo(NULL, DC_F64, 1, 1, 0, NULL, NULL, NULL, DC_COO_SUM));
    dc_ctx_free(ctx);
}

static void test_csr_validation(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    /* 3 x 4: row 0 {1, 3}, row 1 empty, row 2 {0, 2} */
    const int64_t ptr[4] = {0, 2, 2, 4}, col[4] = {1, 3, 0, 2};
    const double val[4] = {1, 2, 3, 4};
    dc_csr *a = dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr, col, val);
    TEST_NONNULL(ctx, a);
    pattern p = pattern_of(a);
    assert_memory_equal(p.row_ptr, ptr, sizeof ptr);
    assert_memory_equal(p.col, col, sizeof col);
    pattern_free(&p);
    dc_csr_free(a);

    const int64_t ptr_start[4] = {1, 2, 2, 4}, ptr_down[4] = {0, 3, 2, 4}, ptr_past[4] = {0, 5, 5, 4},
                  ptr_end[4] = {0, 2, 2, 3};
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr_start, col, val), DC_ERR_ARG,
                 "dc_csr_from_csr: row_ptr[0] = 1, must be 0");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr_down, col, val), DC_ERR_ARG,
                 "row_ptr[2] = 2 is below row_ptr[1] = 3 (row pointers must not decrease)");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr_past, col, val), DC_ERR_ARG,
                 "row_ptr[1] = 5 is past nnz = 4");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr_end, col, val), DC_ERR_ARG,
                 "row_ptr[3] = 3, must be nnz = 4");
    const int64_t col_range[4] = {1, 4, 0, 2}, col_unsorted[4] = {3, 1, 0, 2}, col_dup[4] = {1, 3, 2, 2};
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr, col_range, val), DC_ERR_ARG,
                 "col_idx[1] = 4 in row 0 is outside 0..3");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr, col_unsorted, val), DC_ERR_ARG,
                 "col_idx[1] = 1 is not above col_idx[0] = 3 in row 0");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr, col_dup, val), DC_ERR_ARG,
                 "col_idx[3] = 2 is not above col_idx[2] = 2 in row 2");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, NULL, col, val), DC_ERR_ARG, "row_ptr is NULL");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F64, 3, 4, 4, ptr, NULL, val), DC_ERR_ARG, "col_idx is NULL");
    expect_error(ctx, dc_csr_from_csr(ctx, DC_F32, 3, -4, 4, ptr, col, val), DC_ERR_ARG, "must not be negative");
    assert_null(dc_csr_from_csr(NULL, DC_F64, 3, 4, 4, ptr, col, val));
    /* no rows: row_ptr is {0} */
    const int64_t zero[1] = {0};
    a = dc_csr_from_csr(ctx, DC_F32, 0, 5, 0, zero, NULL, NULL);
    TEST_NONNULL(ctx, a);
    assert_int_equal(dc_csr_nnz(a), 0);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

static void test_dense_round_trip(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double d[12] = {0, 1.5, 0, 0, NAN, 0, -2, 0, 0, 0, 0, 3};
    for (int dt = 0; dt < 2; ++dt) {
        const int64_t shape[2] = {4, 3};
        dc_tensor *t = test_tensor(ctx, (dc_dtype)dt, 2, shape, d);
        dc_csr *a = dc_csr_from_dense(t);
        TEST_NONNULL(ctx, a);
        assert_int_equal(dc_csr_nnz(a), 4); /* NaN is an entry */
        assert_int_equal(dc_csr_dtype(a), (dc_dtype)dt);
        assert_ptr_equal(dc_csr_ctx(a), ctx);
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *back = dc_op_csr_to_dense(tape, a, dc_csr_values(a));
        TEST_NONNULL(ctx, back);
        double *b = test_values(back);
        for (int k = 0; k < 12; ++k)
            assert_true(isnan(d[k]) ? isnan(b[k]) : b[k] == d[k]);
        free(b);
        /* a strided view reads the same */
        dc_tensor *tt = dc_op_transpose(tape, t, 0, 1);
        dc_csr *at = dc_csr_from_dense(tt);
        TEST_NONNULL(ctx, at);
        assert_int_equal(dc_csr_rows(at), 3);
        assert_int_equal(dc_csr_nnz(at), 4);
        dc_csr_free(at);
        dc_tape_free(tape);
        dc_csr_free(a);
        dc_tensor_free(t);
    }
    const int64_t s3[3] = {2, 2, 2};
    dc_tensor *t3 = dc_tensor_new(ctx, DC_F64, 3, s3);
    expect_error(ctx, dc_csr_from_dense(t3), DC_ERR_SHAPE, "dc_csr_from_dense: the tensor must be 2-D, got [2, 2, 2]");
    dc_tensor_free(t3);
    assert_null(dc_csr_from_dense(NULL));
    dc_ctx_free(ctx);
}

/* dc_csr_transpose against the dense transpose, and twice gives A back. */
static void test_transpose(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int f = 0; f < 2; ++f)
        for (int ci = 0; ci < sparse_n_cases; ++ci) {
            sparse_set_index64(f == 1);
            const coo_case *c = &sparse_cases[ci];
            dc_csr *a = case_csr(ctx, DC_F64, c);
            dc_csr *at = dc_csr_transpose(a);
            TEST_NONNULL(ctx, at);
            assert_int_equal(dc_csr_rows(at), c->cols);
            assert_int_equal(dc_csr_cols(at), c->rows);
            assert_int_equal(dc_csr_index_bits(at), f ? 64 : 32);
            double *d = case_dense(c);
            pattern p = pattern_of(at);
            double *v = test_values(dc_csr_values(at));
            for (int64_t k = 0; k < p.nnz; ++k) {
                assert_true(v[k] == d[p.col[k] * c->cols + p.row[k]]);
                assert_true(k == p.row_ptr[p.row[k]] || p.col[k] > p.col[k - 1]);
            }
            /* the values on the tape land in the same order */
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *tv = dc_op_csr_transpose_values(tape, a, dc_csr_values(a));
            TEST_NONNULL(ctx, tv);
            double *w = test_values(tv);
            for (int64_t k = 0; k < p.nnz; ++k)
                assert_true(w[k] == v[k]);
            dc_csr *att = dc_csr_transpose(at);
            TEST_NONNULL(ctx, att);
            pattern q = pattern_of(att), r = pattern_of(a);
            assert_memory_equal(q.row_ptr, r.row_ptr, (size_t)(r.rows + 1) * sizeof(int64_t));
            assert_memory_equal(q.col, r.col, (size_t)r.nnz * sizeof(int64_t));
            pattern_free(&q);
            pattern_free(&r);
            free(w);
            free(v);
            free(d);
            pattern_free(&p);
            dc_tape_free(tape);
            dc_csr_free(att);
            dc_csr_free(at);
            dc_csr_free(a);
        }
    sparse_set_index64(false);
    assert_null(dc_csr_transpose(NULL));
    dc_ctx_free(ctx);
}

/* ---- every op: forward against dense, adjoints against differences ---- */

typedef struct op_call {
    const dc_csr *a;
    op_kind op;
} op_call;

/* The op's operands for A: its values, or random dense ones. */
static int op_inputs(dc_ctx *ctx, dc_csr *a, op_kind op, dc_tensor **in)
{
    int ndim[3];
    int64_t shape[3][2];
    bool is_values[3];
    const int n = sparse_op_operands(a, op, ndim, shape, is_values);
    for (int m = 0; m < n; ++m)
        in[m] = is_values[m] ? dc_csr_values(a) : random_tensor(ctx, ndim[m], shape[m][0], shape[m][1]);
    return n;
}

/* Fixed weights of y's shape (the same at every call). */
static dc_tensor *weights(dc_tape *tape, const dc_tensor *y, double salt)
{
    const int64_t n = dc_tensor_numel(y);
    double *w = malloc((size_t)(n + 1) * sizeof *w);
    for (int64_t k = 0; k < n; ++k)
        w[k] = 0.5 + sin(1.7 * (double)k + salt);
    dc_tensor *t = dc_tape_tensor_new(tape, DC_F64, dc_tensor_ndim(y), dc_tensor_shape(y), w);
    free(w);
    return t;
}

/* Two calls of the op on the same inputs, so that every adjoint both
 * writes a gradient and adds to one. */
static dc_tensor *op_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const op_call *call = user;
    dc_tensor *y1 = sparse_op_apply(tape, call->a, call->op, in), *y2 = sparse_op_apply(tape, call->a, call->op, in);
    if (!y1 || !y2)
        return NULL;
    dc_tensor *l1 = dc_op_sum(tape, dc_op_mul(tape, y1, weights(tape, y1, 0.0)), 0, NULL, false);
    dc_tensor *l2 = dc_op_sum(tape, dc_op_mul(tape, y2, weights(tape, y2, 2.0)), 0, NULL, false);
    return dc_op_add(tape, l1, l2);
}

/* y from the dense definitions, for entry values v and inputs x. */
static double *reference(const op_call *call, const double *v, dc_tensor *const *in, int64_t *n_out)
{
    pattern p = pattern_of(call->a);
    const int64_t r = p.rows, c = p.cols;
    double *x0 = test_values(in[0]), *x1 = NULL, *x2 = NULL;
    if (call->op <= OP_SPMM_VIEW || call->op == OP_SDDMM || call->op == OP_BROADCAST)
        x1 = test_values(in[1]);
    if (call->op == OP_BROADCAST)
        x2 = test_values(in[2]);
    double *y = calloc((size_t)(r * c + r * 3 + c * 3 + p.nnz + 1), sizeof *y);
    int64_t n = 0;
    for (int64_t k = 0; k < p.nnz; ++k) {
        const int64_t i = p.row[k], j = p.col[k];
        switch (call->op) {
        case OP_SPMV:
            y[i] += v[k] * x1[j];
            break;
        case OP_SPMV_T:
            y[j] += v[k] * x1[i];
            break;
        case OP_SPMM:
            for (int l = 0; l < 3; ++l)
                y[i * 3 + l] += v[k] * x1[j * 3 + l];
            break;
        case OP_SPMM_T:
            for (int l = 0; l < 2; ++l)
                y[j * 2 + l] += v[k] * x1[i * 2 + l];
            break;
        case OP_SPMM_VIEW:
            for (int l = 0; l < 3; ++l)
                y[i * 3 + l] += v[k] * x1[l * c + j];
            break;
        case OP_SDDMM:
            for (int l = 0; l < 3; ++l)
                y[k] += x0[i * 3 + l] * x1[j * 3 + l];
            break;
        case OP_ROW_SUM:
            y[i] += v[k];
            break;
        case OP_COL_SUM:
            y[j] += v[k];
            break;
        case OP_TO_DENSE:
            y[i * c + j] = v[k];
            break;
        case OP_SAMPLE:
            y[k] = x0[i * c + j];
            break;
        case OP_TRANSPOSE_VALUES:
            break;
        case OP_BROADCAST:
            y[k] = v[k] > 0 ? v[k] * x1[i] * x2[j] : tanh(x1[i]) - x2[j] * v[k];
            break;
        case OP_COUNT:
            break;
        }
    }
    switch (call->op) {
    case OP_SPMV:
    case OP_ROW_SUM:
        n = r;
        break;
    case OP_SPMV_T:
    case OP_COL_SUM:
        n = c;
        break;
    case OP_SPMM:
    case OP_SPMM_VIEW:
        n = r * 3;
        break;
    case OP_SPMM_T:
        n = c * 2;
        break;
    case OP_TO_DENSE:
        n = r * c;
        break;
    case OP_TRANSPOSE_VALUES: {
        /* entries by column, rows ascending within one */
        for (int64_t j = 0; j < c; ++j)
            for (int64_t k = 0; k < p.nnz; ++k)
                if (p.col[k] == j)
                    y[n++] = v[k];
        break;
    }
    default:
        n = p.nnz;
        break;
    }
    *n_out = n;
    free(x0);
    free(x1);
    free(x2);
    pattern_free(&p);
    return y;
}

static void check_op(dc_ctx *ctx, dc_csr *a, op_kind op, const char *what)
{
    op_call call = {a, op};
    dc_tensor *in[3] = {NULL, NULL, NULL};
    const int n = op_inputs(ctx, a, op, in);
    int64_t want_checked = 0;
    for (int m = 0; m < n; ++m) {
        TEST_OK(ctx, dc_tensor_set_requires_grad(in[m], true));
        want_checked += dc_tensor_numel(in[m]);
    }
    /* the forward against the dense definition */
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = sparse_op_apply(tape, call.a, call.op, in);
    if (!y)
        fail_msg("%s %s: %s", what, sparse_op_names[op], dc_last_error(ctx));
    double *v = test_values(dc_csr_values(a));
    int64_t n_ref;
    double *ref = reference(&call, v, in, &n_ref);
    assert_int_equal(dc_tensor_numel(y), n_ref);
    double *got = test_values(y);
    char label[160];
    snprintf(label, sizeof label, "%s: %s", what, sparse_op_names[op]);
    test_assert_close(got, ref, n_ref, 1e-14, 1e-12, label);
    free(got);
    free(ref);
    free(v);
    dc_tape_free(tape);

    dc_gradcheck_report r;
    const dc_status st = dc_gradcheck(ctx, op_loss, &call, n, in, NULL, &r);
    if (st != DC_OK)
        fail_msg("%s: dc_gradcheck -> %s: %s", label, dc_status_name(st), dc_last_error(ctx));
    assert_int_equal(r.checked, want_checked);
    for (int m = 0; m < n; ++m) {
        TEST_OK(ctx, dc_tensor_set_requires_grad(in[m], false));
        if (in[m] != dc_csr_values(a))
            dc_tensor_free(in[m]);
    }
}

static void test_ops_against_dense_and_differences(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int wide = 0; wide < 2; ++wide) {
        sparse_set_index64(wide == 1);
        for (int ci = 0; ci < sparse_n_cases; ++ci) {
            dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[ci]);
            char what[128];
            snprintf(what, sizeof what, "%s (int%d)", sparse_cases[ci].name, wide ? 64 : 32);
            for (int op = 0; op < OP_COUNT; ++op)
                check_op(ctx, a, (op_kind)op, what);
            dc_csr_free(a);
        }
    }
    sparse_set_index64(false);
    dc_ctx_free(ctx);
}

/* Values computed on the tape flow through an op to their own inputs. */
static dc_tensor *tape_values_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const dc_csr *a = user;
    dc_tensor *vals = dc_op_tanh(tape, dc_op_sddmm(tape, a, in[0], in[1]));
    dc_tensor *h = dc_op_spmm(tape, a, vals, in[2], false);
    return dc_op_sum(tape, dc_op_mul(tape, h, h), 0, NULL, false);
}

/* Gradients written through strides: the operands are slices, whose
 * gradients are views into their bases' (columns 1..3 of a [7, 5] X, and
 * entries 2..10 of a longer values vector). */
static dc_tensor *sliced_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const dc_csr *a = user;
    dc_tensor *x = dc_op_slice(tape, in[0], 1, 1, 3), *vals = dc_op_slice(tape, in[1], 0, 2, 9);
    dc_tensor *y = dc_op_spmm(tape, a, vals, x, false);
    dc_tensor *s = dc_op_sddmm(tape, a, y, x);
    return dc_op_sum(tape, dc_op_mul(tape, s, s), 0, NULL, false);
}

static void test_gradients_into_views(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]);
    dc_tensor *in[2] = {random_tensor(ctx, 2, 7, 5), random_tensor(ctx, 1, 12, 0)};
    for (int m = 0; m < 2; ++m)
        TEST_OK(ctx, dc_tensor_set_requires_grad(in[m], true));
    dc_gradcheck_report r;
    TEST_OK(ctx, dc_gradcheck(ctx, sliced_loss, a, 2, in, NULL, &r));
    assert_int_equal(r.checked, 35 + 12);
    for (int m = 0; m < 2; ++m)
        dc_tensor_free(in[m]);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

static void test_values_from_the_tape(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]);
    dc_tensor *in[3] = {random_tensor(ctx, 2, 5, 2), random_tensor(ctx, 2, 7, 2), random_tensor(ctx, 2, 7, 4)};
    for (int m = 0; m < 3; ++m)
        TEST_OK(ctx, dc_tensor_set_requires_grad(in[m], true));
    dc_gradcheck_report r;
    TEST_OK(ctx, dc_gradcheck(ctx, tape_values_loss, a, 3, in, NULL, &r));
    assert_int_equal(r.checked, 10 + 14 + 28);
    for (int m = 0; m < 3; ++m)
        dc_tensor_free(in[m]);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

/* One vector as both the values and x of dc_op_spmv (nnz equal to the
 * side x runs along): both adjoints go into its one gradient, added. */
typedef struct values_as_x {
    const dc_csr *a;
    bool transpose;
} values_as_x;

static dc_tensor *values_as_x_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const values_as_x *c = user;
    dc_tensor *y = dc_op_spmv(tape, c->a, in[0], in[0], c->transpose);
    return dc_op_sum(tape, dc_op_mul(tape, y, dc_op_affine(tape, y, 0.5, 1.0)), 0, NULL, false);
}

static void test_values_as_x(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t row_ptr[4] = {0, 1, 2, 3}, col_idx[3] = {0, 2, 1};
    const double val[3] = {2, 3, 5};
    dc_csr *a = dc_csr_from_csr(ctx, DC_F64, 3, 3, 3, row_ptr, col_idx, val);
    TEST_NONNULL(ctx, a);
    dc_tensor *v = random_tensor(ctx, 1, 3, 0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(v, true));
    for (int t = 0; t < 2; ++t) {
        values_as_x c = {a, t == 1};
        dc_gradcheck_report r;
        TEST_OK(ctx, dc_gradcheck(ctx, values_as_x_loss, &c, 1, &v, NULL, &r));
        assert_int_equal(r.checked, 3);
    }
    dc_tensor_free(v);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

/* Products wider than the CPU kernel's column chunk (130 columns: three
 * chunks), forward and gradients, against the dense product through
 * dc_op_csr_to_dense and dc_op_matmul. */
static void test_wide_products_match_matmul(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]);
    dc_tensor *vals = dc_csr_values(a), *x = random_tensor(ctx, 2, 7, 130), *xt = random_tensor(ctx, 2, 5, 130);
    dc_tensor *params[3] = {vals, x, xt};
    double *grads[2][3], *outs[2][2];
    for (int dense = 0; dense < 2; ++dense) {
        for (int m = 0; m < 3; ++m) {
            TEST_OK(ctx, dc_tensor_set_requires_grad(params[m], true));
            dc_tensor_zero_grad(params[m]);
        }
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *y, *yt;
        if (dense) {
            dc_tensor *d = dc_op_csr_to_dense(tape, a, vals);
            y = dc_op_matmul(tape, d, x);
            yt = dc_op_matmul(tape, dc_op_transpose(tape, d, 0, 1), xt);
        } else {
            y = dc_op_spmm(tape, a, vals, x, false);
            yt = dc_op_spmm(tape, a, vals, xt, true);
        }
        dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y, weights(tape, y, 1.0)), 0, NULL, false),
                                    dc_op_sum(tape, dc_op_mul(tape, yt, weights(tape, yt, 3.0)), 0, NULL, false));
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        outs[dense][0] = test_values(y);
        outs[dense][1] = test_values(yt);
        for (int m = 0; m < 3; ++m)
            grads[dense][m] = test_values(dc_tensor_grad(params[m]));
        dc_tape_free(tape);
    }
    test_assert_close(outs[0][0], outs[1][0], 5 * 130, 1e-13, 1e-12, "A X, 130 columns");
    test_assert_close(outs[0][1], outs[1][1], 7 * 130, 1e-13, 1e-12, "A^T X, 130 columns");
    const int64_t sizes[3] = {9, 7 * 130, 5 * 130};
    for (int m = 0; m < 3; ++m)
        test_assert_close(grads[0][m], grads[1][m], sizes[m], 1e-12, 1e-12, "gradient, 130 columns");
    for (int d = 0; d < 2; ++d) {
        free(outs[d][0]);
        free(outs[d][1]);
        for (int m = 0; m < 3; ++m)
            free(grads[d][m]);
    }
    TEST_OK(ctx, dc_tensor_set_requires_grad(vals, false));
    dc_tensor_free(x);
    dc_tensor_free(xt);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

/* ---- the broadcast over entries ---- */

static dc_tensor *gated_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const dc_csr *a = user;
    dc_tensor *gate = dc_tape_tensor_new(tape, DC_F64, 1, (const int64_t[]){7}, (const double[]){0, 1, 0, 2, 0, 1, -1});
    dc_tensor *args[3] = {in[0], gate, in[1]};
    const dc_csr_operand kinds[3] = {DC_CSR_ENTRY, DC_CSR_COL, DC_CSR_ROW};
    dc_tensor *out = NULL;
    if (dc_op_csr_broadcast(tape, DC_BFN_REF(gated_scale), a, 3, args, kinds, 1, &out) != DC_OK)
        return NULL;
    return dc_op_sum(tape, dc_op_mul(tape, out, out), 0, NULL, false);
}

static void test_broadcast_over_entries(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]);
    dc_tensor *vals = dc_csr_values(a), *u = random_tensor(ctx, 1, 5, 0), *v = random_tensor(ctx, 1, 7, 0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(vals, true));
    TEST_OK(ctx, dc_tensor_set_requires_grad(u, true));
    TEST_OK(ctx, dc_tensor_set_requires_grad(v, true));
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *in[3] = {vals, u, v};
    const dc_csr_operand kinds[3] = {DC_CSR_ENTRY, DC_CSR_ROW, DC_CSR_COL};
    dc_tensor *out = NULL;
    TEST_OK(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, kinds, 1, &out));
    /* two gathers and ONE broadcast node */
    assert_int_equal(dc_tape_node_count(tape), 3);
    assert_int_equal(dc_tensor_numel(out), dc_csr_nnz(a));

    /* a scalar entry operand, and a control input gathered by column */
    dc_tensor *half = dc_tape_scalar(tape, DC_F64, 0.5);
    dc_tensor *in2[3] = {half, u, v};
    TEST_OK(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in2, kinds, 1, &out));
    double *o = test_values(out);
    for (int64_t k = 0; k < 9; ++k)
        assert_true(isfinite(o[k]));
    free(o);
    dc_tensor *gc_in[2] = {vals, u};
    TEST_OK(ctx, dc_tensor_set_requires_grad(v, false));
    dc_gradcheck_report r;
    TEST_OK(ctx, dc_gradcheck(ctx, gated_loss, a, 2, gc_in, NULL, &r));
    assert_int_equal(r.checked, 9 + 5);

    /* refusals */
    const dc_csr_operand bad_kind[3] = {DC_CSR_ENTRY, (dc_csr_operand)9, DC_CSR_COL};
    expect_error(ctx,
                 dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, bad_kind, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "dc_op_csr_broadcast: input 1 (u) has unknown kind 9");
    const dc_csr_operand swapped[3] = {DC_CSR_ENTRY, DC_CSR_COL, DC_CSR_ROW};
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, swapped, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_SHAPE, "input 1 (u) is [5], the matrix needs [7]");
    dc_tensor *wrong = dc_tape_tensor_new(tape, DC_F64, 1, (const int64_t[]){4}, NULL);
    dc_tensor *in3[3] = {wrong, u, v};
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in3, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_SHAPE, "input 0 (a) is [4], not [9] (the matrix's entries) or one value");
    dc_tensor *in4[3] = {half, half, half};
    const dc_csr_operand all_entries[3] = {DC_CSR_ENTRY, DC_CSR_ENTRY, DC_CSR_ENTRY};
    expect_error(ctx,
                 dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in4, all_entries, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_SHAPE, "no input runs along the matrix's entries");
    expect_error(ctx, dc_op_csr_broadcast(tape, NULL, a, 3, in, kinds, 1, &out) == DC_OK ? out : NULL, DC_ERR_ARG,
                 "the function is NULL");
    expect_error(ctx,
                 dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), NULL, 3, in, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "dc_op_csr_broadcast: the matrix is NULL");
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, NULL, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "the kinds array is NULL");
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 99, in, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "99 inputs");
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 2, in, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "expects 3 inputs");
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, kinds, 1, NULL) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "the outputs array is NULL");
    dc_tensor *in5[3] = {vals, NULL, v};
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in5, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "is NULL");
    dc_tensor *in6[3] = {NULL, u, v};
    expect_error(ctx, dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in6, kinds, 1, &out) == DC_OK ? out : NULL,
                 DC_ERR_ARG, "is NULL");
    assert_int_equal(dc_op_csr_broadcast(NULL, DC_BFN_REF(csr_edge), a, 3, in, kinds, 1, &out), DC_ERR_ARG);
    dc_tape_free(tape);
    TEST_OK(ctx, dc_tensor_set_requires_grad(vals, false));
    dc_tensor_free(u);
    dc_tensor_free(v);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

/* An inner size of 0: products with no columns, a sampled product of
 * empty rows (zeros), and their gradients (zeros). */
static void test_empty_inner_size(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]);
    dc_tensor *vals = dc_csr_values(a), *u = random_tensor(ctx, 2, 5, 0), *v = random_tensor(ctx, 2, 7, 0);
    dc_tensor *x = random_tensor(ctx, 2, 7, 0);
    dc_tensor *all[4] = {vals, u, v, x};
    for (int m = 0; m < 4; ++m)
        TEST_OK(ctx, dc_tensor_set_requires_grad(all[m], true));
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *s = dc_op_sddmm(tape, a, u, v), *y = dc_op_spmm(tape, a, vals, x, false);
    TEST_NONNULL(ctx, s);
    TEST_NONNULL(ctx, y);
    assert_int_equal(dc_tensor_dim(y, 0), 5);
    assert_int_equal(dc_tensor_dim(y, 1), 0);
    double *sv = test_values(s);
    for (int k = 0; k < 9; ++k)
        assert_true(sv[k] == 0.0);
    free(sv);
    dc_tensor *loss =
        dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, s, vals), 0, NULL, false), dc_op_sum(tape, y, 0, NULL, false));
    TEST_OK(ctx, dc_backward(tape, loss));
    double *g = test_values(dc_tensor_grad(vals));
    for (int k = 0; k < 9; ++k)
        assert_true(g[k] == 0.0); /* s is 0, and y has no elements */
    free(g);
    dc_tape_free(tape);
    for (int m = 0; m < 4; ++m)
        TEST_OK(ctx, dc_tensor_set_requires_grad(all[m], false));
    for (int m = 1; m < 4; ++m)
        dc_tensor_free(all[m]);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

/* ---- float32, threads, errors ---- */

static void test_f32_matches_f64(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_csr *a64 = case_csr(ctx, DC_F64, &sparse_cases[0]), *a32 = case_csr(ctx, DC_F32, &sparse_cases[0]);
    const int64_t shape[2] = {7, 3};
    dc_tensor *x64 = test_random(ctx, DC_F64, 2, shape, -1, 1);
    double *xv = test_values(x64);
    dc_tensor *x32 = test_tensor(ctx, DC_F32, 2, shape, xv);
    dc_tape *tape = dc_tape_new(ctx);
    double *y64 = test_values(dc_op_spmm(tape, a64, dc_csr_values(a64), x64, false));
    double *y32 = test_values(dc_op_spmm(tape, a32, dc_csr_values(a32), x32, false));
    test_assert_close(y32, y64, 15, 1e-6, 1e-5, "spmm f32 against f64");
    /* mixing them is refused */
    expect_error(ctx, dc_op_spmm(tape, a64, dc_csr_values(a64), x32, false), DC_ERR_DTYPE,
                 "dc_op_spmm: x is f32 but the values are f64");
    free(y64);
    free(y32);
    free(xv);
    dc_tape_free(tape);
    dc_tensor_free(x64);
    dc_tensor_free(x32);
    dc_csr_free(a64);
    dc_csr_free(a32);
    dc_ctx_free(ctx);
}

/* A random matrix big enough for a team of threads. */
static dc_csr *random_csr(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t nnz)
{
    int64_t *r = malloc((size_t)nnz * sizeof *r), *c = malloc((size_t)nnz * sizeof *c);
    double *v = malloc((size_t)nnz * sizeof *v);
    uint64_t s = 12345;
    for (int64_t k = 0; k < nnz; ++k) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[k] = (int64_t)((s >> 33) % (uint64_t)rows);
        c[k] = (int64_t)((s >> 13) % (uint64_t)cols);
        v[k] = (double)((s >> 40) & 0xffff) / 65536.0 - 0.5;
    }
    dc_csr *a = dc_csr_from_coo(ctx, dtype, rows, cols, nnz, r, c, v, DC_COO_SUM);
    free(r);
    free(c);
    free(v);
    return a;
}

/* Forward and gradients of spmm, spmm^T and sddmm on 1, 2 and 3 threads:
 * the same bits. */
static void test_same_bits_on_any_thread_count(void **state)
{
    (void)state;
    float *first[5] = {NULL};
    int64_t sizes[5] = {0};
    for (int threads = 1; threads <= 3; ++threads) {
        dc_ctx *ctx = test_cpu_ctx_threads(threads, 7);
        dc_csr *a = random_csr(ctx, DC_F32, 300, 200, 6000);
        TEST_NONNULL(ctx, a);
        const int64_t sx[2] = {200, 16}, st[2] = {300, 16}, su[2] = {300, 8}, sv[2] = {200, 8};
        dc_tensor *x = dc_tensor_new(ctx, DC_F32, 2, sx), *xt = dc_tensor_new(ctx, DC_F32, 2, st);
        dc_tensor *u = dc_tensor_new(ctx, DC_F32, 2, su), *v = dc_tensor_new(ctx, DC_F32, 2, sv);
        dc_tensor *vals = dc_csr_values(a);
        dc_tensor *all[5] = {vals, x, xt, u, v};
        for (int m = 0; m < 5; ++m) {
            if (m > 0)
                TEST_OK(ctx, dc_tensor_fill_uniform(all[m], -1, 1));
            TEST_OK(ctx, dc_tensor_set_requires_grad(all[m], true));
        }
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *y1 = dc_op_spmm(tape, a, vals, x, false), *y2 = dc_op_spmm(tape, a, vals, xt, true);
        dc_tensor *s = dc_op_sddmm(tape, a, u, v);
        dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y1, y1), 0, NULL, false),
                                    dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y2, y2), 0, NULL, false),
                                              dc_op_sum(tape, dc_op_mul(tape, s, s), 0, NULL, false)));
        TEST_OK(ctx, dc_backward(tape, loss));
        for (int m = 0; m < 5; ++m) {
            dc_tensor *g = dc_tensor_grad(all[m]);
            TEST_NONNULL(ctx, g);
            const int64_t n = dc_tensor_numel(g);
            float *f = malloc((size_t)n * sizeof *f);
            TEST_OK(ctx, dc_tensor_to_host(g, f, (size_t)n * sizeof *f));
            if (threads == 1) {
                first[m] = f;
                sizes[m] = n;
                continue;
            }
            assert_int_equal(n, sizes[m]);
            if (memcmp(f, first[m], (size_t)n * sizeof *f) != 0)
                fail_msg("gradient %d differs between 1 and %d threads", m, threads);
            free(f);
        }
        dc_tape_free(tape);
        for (int m = 1; m < 5; ++m)
            dc_tensor_free(all[m]);
        dc_csr_free(a);
        dc_ctx_free(ctx);
    }
    for (int m = 0; m < 5; ++m)
        free(first[m]);
}

/* A X with X's rows contiguous (its columns summed in registers, its rows
 * fetched ahead) and with X a transposed view (its columns strided): the
 * same bits, A and A^T, 130 columns (two full chunks and a part), on 1 and
 * 3 threads; the output assigned, then added to through a gradient. */
/* A product whose output passes 8 MiB is written past the caches
 * (non-temporal stores, csr_kernels.c): the same bits as the strided rows'
 * plain stores. */
static void test_large_product_streamed_same_bits(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx_threads(2, 5);
    const int64_t rows = 33000, cols = 500, n = 64, shape[2] = {cols, n}, shape_t[2] = {n, cols};
    dc_csr *a = random_csr(ctx, DC_F32, rows, cols, 3 * rows);
    TEST_NONNULL(ctx, a);
    float *h = malloc((size_t)(cols * n) * sizeof *h), *ht = malloc((size_t)(cols * n) * sizeof *ht);
    for (int64_t i = 0; i < cols * n; ++i)
        h[i] = (float)((i * 7919) % 2003) / 1001.0f - 1.0f;
    for (int64_t i = 0; i < cols; ++i)
        for (int64_t c = 0; c < n; ++c)
            ht[c * cols + i] = h[i * n + c];
    dc_tensor *x = dc_tensor_from_host(ctx, DC_F32, 2, shape, h);
    dc_tensor *xt = dc_tensor_from_host(ctx, DC_F32, 2, shape_t, ht);
    TEST_NONNULL(ctx, xt);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = dc_op_spmm(tape, a, dc_csr_values(a), x, false);
    dc_tensor *y_strided = dc_op_spmm(tape, a, dc_csr_values(a), dc_op_transpose(tape, xt, 0, 1), false);
    TEST_NONNULL(ctx, y_strided);
    double *out = test_values(y), *out_strided = test_values(y_strided);
    if (memcmp(out, out_strided, (size_t)(rows * n) * sizeof(double)) != 0)
        fail_msg("A X of %lld x %lld: the streamed rows differ from the strided rows' plain stores", (long long)rows,
                 (long long)n);
    free(out);
    free(out_strided);
    free(h);
    free(ht);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(xt);
    dc_csr_free(a);
    dc_ctx_free(ctx);
}

static void test_contiguous_and_strided_products_same_bits(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 3; threads += 2) {
        dc_ctx *ctx = test_cpu_ctx_threads(threads, 5);
        dc_csr *a = random_csr(ctx, DC_F64, 300, 200, 6000);
        TEST_NONNULL(ctx, a);
        for (int tr = 0; tr < 2; ++tr) {
            const int64_t rows = tr ? 300 : 200, n = 130, shape[2] = {rows, n}, shape_t[2] = {n, rows};
            double *h = malloc((size_t)(rows * n) * sizeof *h), *ht = malloc((size_t)(rows * n) * sizeof *ht);
            for (int64_t i = 0; i < rows * n; ++i)
                h[i] = (double)((i * 7919) % 2003) / 1001.0 - 1.0;
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t c = 0; c < n; ++c)
                    ht[c * rows + i] = h[i * n + c];
            dc_tensor *x = dc_tensor_from_host(ctx, DC_F64, 2, shape, h);
            dc_tensor *xt = dc_tensor_from_host(ctx, DC_F64, 2, shape_t, ht);
            TEST_NONNULL(ctx, xt);
            dc_tensor *src[2] = {x, xt};
            double *out[2], *grad[2];
            for (int strided = 0; strided < 2; ++strided) {
                TEST_OK(ctx, dc_tensor_set_requires_grad(src[strided], true));
                dc_tape *tape = dc_tape_new(ctx);
                dc_tensor *in = strided ? dc_op_transpose(tape, xt, 0, 1) : x;
                dc_tensor *y = dc_op_spmm(tape, a, dc_csr_values(a), in, tr);
                /* the gradient of x is A^T (or A) times the weights: a
                 * product into it, assigned then added to */
                dc_tensor *z = dc_op_spmm(tape, a, dc_csr_values(a), in, tr);
                dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y, weights(tape, y, 2.0)), 0, NULL, false),
                                            dc_op_sum(tape, z, 0, NULL, false));
                TEST_NONNULL(ctx, loss);
                TEST_OK(ctx, dc_backward(tape, loss));
                out[strided] = test_values(y);
                grad[strided] = test_values(dc_tensor_grad(src[strided]));
                dc_tape_free(tape);
                TEST_OK(ctx, dc_tensor_set_requires_grad(src[strided], false));
            }
            const int64_t n_out = (tr ? 200 : 300) * n;
            if (memcmp(out[0], out[1], (size_t)n_out * sizeof(double)) != 0)
                fail_msg("%s: the product differs between contiguous and strided rows (%d threads)", tr ? "A^T" : "A",
                         threads);
            /* the strided source's gradient is X^T's: compare element by element */
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t c = 0; c < n; ++c)
                    if (memcmp(&grad[0][i * n + c], &grad[1][c * rows + i], sizeof(double)) != 0)
                        fail_msg("%s: the gradient differs at [%lld, %lld] (%d threads)", tr ? "A^T" : "A",
                                 (long long)i, (long long)c, threads);
            for (int k = 0; k < 2; ++k) {
                free(out[k]);
                free(grad[k]);
            }
            free(h);
            free(ht);
            dc_tensor_free(x);
            dc_tensor_free(xt);
        }
        dc_csr_free(a);
        dc_ctx_free(ctx);
    }
}

/* The gradients of one spmm/spmv used twice (the second contribution adds)
 * with respect to whichever of vals and x require them, as host doubles. */
static void product_grads(dc_ctx *ctx, dc_csr *a, dc_tensor *vals, dc_tensor *x, bool transpose, bool vector,
                          double *gv, double *gx)
{
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = vector ? dc_op_spmv(tape, a, vals, x, transpose) : dc_op_spmm(tape, a, vals, x, transpose);
    dc_tensor *z = vector ? dc_op_spmv(tape, a, vals, x, transpose) : dc_op_spmm(tape, a, vals, x, transpose);
    dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y, y), 0, NULL, false),
                                dc_op_sum(tape, dc_op_tanh(tape, z), 0, NULL, false));
    TEST_OK(ctx, dc_backward(tape, loss));
    dc_tensor *t[2] = {vals, x};
    double *out[2] = {gv, gx};
    for (int m = 0; m < 2; ++m) {
        if (!dc_tensor_requires_grad(t[m]))
            continue;
        dc_tensor *g = dc_tensor_grad(t[m]);
        TEST_NONNULL(ctx, g);
        TEST_OK(ctx, dc_tensor_to_host(g, out[m], (size_t)dc_tensor_numel(g) * sizeof(double)));
        dc_tensor_zero_grad(t[m]);
    }
    dc_tape_free(tape);
}

/* The backward of a product that both adjoints are wanted from walks the
 * pattern once for both (its rows of the dense operand contiguous, n up to
 * 256): the same bits as the two adjoints wanted one at a time, A and A^T,
 * vectors and matrices of 1 to 300 columns, a row's entries past a block of
 * four, int32 and int64 indices, on 1 and 3 threads. For A, the walk of the
 * CSR side on one thread (A x, and A X up to 67 columns here) and the walk
 * of the CSC side on a team (256 columns), each assigning the adjoints and
 * then adding to them. */
static void test_fused_backward_same_bits(void **state)
{
    (void)state;
    const int64_t widths[] = {1, 3, 64, 67, 256, 300};
    for (int wide = 0; wide < 2; ++wide) {
        sparse_set_index64(wide == 1);
        for (int threads = 1; threads <= 3; threads += 2) {
            dc_ctx *ctx = test_cpu_ctx_threads(threads, 11);
            dc_csr *a = random_csr(ctx, DC_F64, 90, 70, 1500);
            TEST_NONNULL(ctx, a);
            assert_int_equal(dc_csr_index_bits(a), wide ? 64 : 32);
            const int64_t nnz = dc_csr_nnz(a);
            dc_tensor *vals = dc_csr_values(a);
            for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
                for (int tr = 0; tr < 2; ++tr)
                    for (int vector = 0; vector < (widths[w] == 1 ? 2 : 1); ++vector) {
                        const int64_t rows = tr ? 90 : 70, n = widths[w];
                        dc_tensor *x = random_tensor(ctx, vector ? 1 : 2, rows, vector ? 0 : n);
                        const size_t nx = (size_t)(rows * n);
                        double *both_v = malloc((size_t)nnz * sizeof(double)), *one_v = malloc((size_t)nnz * sizeof(double));
                        double *both_x = malloc(nx * sizeof(double)), *one_x = malloc(nx * sizeof(double));
                        TEST_OK(ctx, dc_tensor_set_requires_grad(vals, true));
                        TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
                        product_grads(ctx, a, vals, x, tr, vector, both_v, both_x);
                        TEST_OK(ctx, dc_tensor_set_requires_grad(x, false));
                        product_grads(ctx, a, vals, x, tr, vector, one_v, NULL);
                        TEST_OK(ctx, dc_tensor_set_requires_grad(vals, false));
                        TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
                        product_grads(ctx, a, vals, x, tr, vector, NULL, one_x);
                        if (memcmp(both_v, one_v, (size_t)nnz * sizeof(double)) != 0 ||
                            memcmp(both_x, one_x, nx * sizeof(double)) != 0)
                            fail_msg("n %d, %s, %s: the adjoints differ from those taken one at a time", (int)n,
                                     tr ? "A^T" : "A", wide ? "int64" : "int32");
                        free(both_v);
                        free(one_v);
                        free(both_x);
                        free(one_x);
                        dc_tensor_free(x);
                    }
            dc_csr_free(a);
            dc_ctx_free(ctx);
        }
    }
    sparse_set_index64(false);
}

static void test_op_errors(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx(), *other = test_cpu_ctx();
    dc_csr *a = case_csr(ctx, DC_F64, &sparse_cases[0]), *b = case_csr(other, DC_F64, &sparse_cases[0]);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *vals = dc_csr_values(a);
    dc_tensor *x7 = random_tensor(ctx, 1, 7, 0), *x5 = random_tensor(ctx, 1, 5, 0), *m = random_tensor(ctx, 2, 5, 3);
    expect_error(ctx, dc_op_spmv(tape, a, vals, x5, false), DC_ERR_SHAPE, "dc_op_spmv: x is [5], the matrix needs [7]");
    expect_error(ctx, dc_op_spmv(tape, a, vals, x7, true), DC_ERR_SHAPE, "x is [7], the matrix needs [5]");
    expect_error(ctx, dc_op_spmm(tape, a, vals, m, false), DC_ERR_SHAPE,
                 "dc_op_spmm: x is [5, 3], the matrix needs [7, n]");
    expect_error(ctx, dc_op_spmm(tape, a, vals, x7, false), DC_ERR_SHAPE, "x is [7], the matrix needs [7, n]");
    expect_error(ctx, dc_op_spmv(tape, a, x5, x7, false), DC_ERR_SHAPE,
                 "dc_op_spmv: values [5] do not match the matrix's 9 entries ([9])");
    expect_error(ctx, dc_op_spmv(tape, NULL, vals, x7, false), DC_ERR_ARG, "dc_op_spmv: the matrix is NULL");
    expect_error(ctx, dc_op_spmv(tape, b, vals, x7, false), DC_ERR_ARG, "the matrix belongs to another context");
    expect_error(ctx, dc_op_spmv(tape, a, NULL, x7, false), DC_ERR_ARG, "dc_op_spmv: input values is NULL");
    expect_error(ctx, dc_op_sddmm(tape, a, m, m), DC_ERR_SHAPE, "dc_op_sddmm: v is [5, 3], the matrix needs [7, 3]");
    expect_error(ctx, dc_op_sddmm(tape, a, x5, m), DC_ERR_SHAPE, "dc_op_sddmm: u is [5], the matrix needs [5, n]");
    dc_tensor *v72 = random_tensor(ctx, 2, 7, 2);
    expect_error(ctx, dc_op_sddmm(tape, a, m, v72), DC_ERR_SHAPE,
                 "dc_op_sddmm: u [5, 3] and v [7, 2]: their rows differ in length (3 and 2)");
    dc_tensor_free(v72);
    expect_error(ctx, dc_op_csr_sample(tape, a, m), DC_ERR_SHAPE,
                 "dc_op_csr_sample: dense is [5, 3], the matrix needs [5, 7]");
    expect_error(ctx, dc_op_csr_row_sum(tape, a, x7), DC_ERR_SHAPE, "dc_op_csr_row_sum: values [7]");
    expect_error(ctx, dc_op_csr_col_sum(tape, NULL, vals), DC_ERR_ARG, "dc_op_csr_col_sum: the matrix is NULL");
    expect_error(ctx, dc_op_csr_to_dense(tape, a, x5), DC_ERR_SHAPE, "dc_op_csr_to_dense: values [5]");
    expect_error(ctx, dc_op_csr_transpose_values(tape, a, m), DC_ERR_SHAPE,
                 "dc_op_csr_transpose_values: values [5, 3]");
    assert_null(dc_op_spmv(NULL, a, vals, x7, false));
    /* sizes and the pattern of a NULL matrix */
    assert_int_equal(dc_csr_rows(NULL), 0);
    assert_int_equal(dc_csr_cols(NULL), 0);
    assert_int_equal(dc_csr_nnz(NULL), 0);
    assert_null(dc_csr_values(NULL));
    assert_null(dc_csr_ctx(NULL));
    assert_int_equal(dc_csr_dtype(NULL), DC_F32);
    assert_int_equal(dc_csr_index_bits(NULL), 32);
    assert_int_equal(dc_csr_pattern_to_host(NULL, NULL, NULL), DC_ERR_ARG);
    dc_tape_free(tape);
    dc_tensor_free(x7);
    dc_tensor_free(x5);
    dc_tensor_free(m);
    dc_csr_free(a);
    dc_csr_free(b);
    dc_ctx_free(ctx);
    dc_ctx_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coo_sorts_and_sums),
        cmocka_unit_test(test_coo_refusals),
        cmocka_unit_test(test_csr_validation),
        cmocka_unit_test(test_dense_round_trip),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_ops_against_dense_and_differences),
        cmocka_unit_test(test_values_from_the_tape),
        cmocka_unit_test(test_values_as_x),
        cmocka_unit_test(test_gradients_into_views),
        cmocka_unit_test(test_wide_products_match_matmul),
        cmocka_unit_test(test_broadcast_over_entries),
        cmocka_unit_test(test_empty_inner_size),
        cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_same_bits_on_any_thread_count),
        cmocka_unit_test(test_fused_backward_same_bits),
        cmocka_unit_test(test_contiguous_and_strided_products_same_bits),
        cmocka_unit_test(test_large_product_streamed_same_bits),
        cmocka_unit_test(test_op_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
