/* User broadcast functions: the paper's hmlstm_update_c (all three branches),
 * a multi-output function, control inputs, one to ten differentiable inputs,
 * both partials policies, gradients against central differences, against
 * the product rule and against pure reverse mode. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/kernels/prod_sign_fns.h"
#include "support/test_support.h"

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

/* ---- the c-update, mixed mode and pure reverse mode ---- */

typedef struct cupdate_case {
    dc_tensor *z, *zb, *w; /* control inputs and a weight making the adjoint non-uniform */
    dc_partials_policy policy;
    bool pure;             /* build it from primitives and select instead */
} cupdate_case;

/* FLUSH if z, else COPY if !zb, else UPDATE, from primitive ops. */
static dc_tensor *cupdate_pure(dc_tape *tape, dc_tensor *z, dc_tensor *zb, dc_tensor *c, dc_tensor *f, dc_tensor *i,
                               dc_tensor *g)
{
    dc_tensor *flush = dc_op_mul(tape, dc_op_sigmoid(tape, i), dc_op_tanh(tape, g));
    dc_tensor *update = dc_op_add(tape, dc_op_mul(tape, dc_op_sigmoid(tape, f), c), flush);
    return dc_op_select(tape, z, flush, dc_op_select(tape, zb, update, c));
}

static dc_tensor *cupdate_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const cupdate_case *k = user;
    dc_tensor *out;
    if (k->pure) {
        out = cupdate_pure(tape, k->z, k->zb, x[0], x[1], x[2], x[3]);
    } else {
        dc_tensor *in[6] = {k->z, k->zb, x[0], x[1], x[2], x[3]};
        dc_tensor *outs[1] = {NULL};
        if (dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, outs, k->policy) != DC_OK)
            return NULL;
        out = outs[0];
    }
    return dc_op_sum(tape, dc_op_mul(tape, out, k->w), 0, NULL, false);
}

/* Control per row (z of shape [R, 1]) or per column ([1, C]); rows/columns
 * 0, 1, 2 forced to FLUSH, COPY, UPDATE, the rest random. */
static void make_control(dc_ctx *ctx, dc_dtype dtype, bool per_row, int64_t n, dc_tensor **z, dc_tensor **zb)
{
    double *vz = malloc((size_t)n * sizeof *vz), *vzb = malloc((size_t)n * sizeof *vzb);
    for (int64_t r = 0; r < n; ++r) {
        vz[r] = r == 0 ? 1 : r < 3 ? 0 : (double)(rand() % 2);
        vzb[r] = r == 1 ? 0 : r == 2 ? 1 : (double)(rand() % 2);
    }
    int64_t shape[2] = {per_row ? n : 1, per_row ? 1 : n};
    *z = test_tensor(ctx, dtype, 2, shape, vz);
    *zb = test_tensor(ctx, dtype, 2, shape, vzb);
    free(vz);
    free(vzb);
}

static void cupdate_inputs(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, dc_tensor **x)
{
    int64_t shape[2] = {rows, cols};
    for (int k = 0; k < 4; ++k) {
        x[k] = test_random(ctx, dtype, 2, shape, -2.0, 2.0);
        dc_tensor_set_requires_grad(x[k], true);
    }
}

static void test_cupdate_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int layout = 0; layout < 2; ++layout) {
        for (int policy = 0; policy < 2; ++policy) {
            dc_tensor *x[4];
            cupdate_case k = {0};
            const int64_t rows = 7, cols = 5;
            make_control(ctx, DC_F64, layout == 0, layout == 0 ? rows : cols, &k.z, &k.zb);
            int64_t shape[2] = {rows, cols};
            k.w = test_random(ctx, DC_F64, 2, shape, -1.0, 1.0);
            k.policy = (dc_partials_policy)policy;
            cupdate_inputs(ctx, DC_F64, rows, cols, x);
            dc_gradcheck_report r;
            TEST_OK(ctx, dc_gradcheck(ctx, cupdate_loss, &k, 4, x, NULL, &r));
            assert_int_equal(r.checked, 4 * rows * cols);
            for (int i = 0; i < 4; ++i)
                dc_tensor_free(x[i]);
            dc_tensor_free(k.z);
            dc_tensor_free(k.zb);
            dc_tensor_free(k.w);
        }
    }
    dc_ctx_free(ctx);
}

/* Gradients of one loss evaluation, per input (malloc'd). */
static void cupdate_grads(dc_ctx *ctx, cupdate_case *k, dc_tensor **x, double **grads, double **out_loss)
{
    dc_tape *tape = dc_tape_new(ctx);
    for (int i = 0; i < 4; ++i)
        dc_tensor_zero_grad(x[i]);
    dc_tensor *loss = cupdate_loss(tape, x, k);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    for (int i = 0; i < 4; ++i) {
        TEST_NONNULL(ctx, dc_tensor_grad(x[i]));
        grads[i] = test_values(dc_tensor_grad(x[i]));
    }
    if (out_loss)
        *out_loss = test_values(loss);
    dc_tape_free(tape);
}

/* Mixed mode (both policies) and pure reverse mode give the same gradients
 * to 1e-6 relative in float64, for both control layouts, on odd sizes
 * (partial SIMD tails) with rows short and long: a row of 700 makes a chunk
 * of its own, where the control row is read in place. */
static void test_cupdate_matches_pure_reverse(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int run = 0; run < 4; ++run) {
        const int layout = run & 1;
        const int64_t rows = run < 2 ? 33 : 9, cols = run < 2 ? 70 : 700;
        cupdate_case k = {0};
        make_control(ctx, DC_F64, layout == 0, layout == 0 ? rows : cols, &k.z, &k.zb);
        int64_t shape[2] = {rows, cols};
        k.w = test_random(ctx, DC_F64, 2, shape, -1.0, 1.0);
        dc_tensor *x[4];
        cupdate_inputs(ctx, DC_F64, rows, cols, x);
        double *pure[4], *mixed[4], *lp, *lm;
        k.pure = true;
        cupdate_grads(ctx, &k, x, pure, &lp);
        for (int policy = 0; policy < 2; ++policy) {
            k.pure = false;
            k.policy = (dc_partials_policy)policy;
            cupdate_grads(ctx, &k, x, mixed, &lm);
            test_assert_close(lm, lp, 1, 0, 1e-12, "loss");
            for (int i = 0; i < 4; ++i) {
                test_assert_close(mixed[i], pure[i], rows * cols, 1e-12, 1e-6, "gradient");
                free(mixed[i]);
            }
            free(lm);
        }
        for (int i = 0; i < 4; ++i) {
            free(pure[i]);
            dc_tensor_free(x[i]);
        }
        free(lp);
        dc_tensor_free(k.z);
        dc_tensor_free(k.zb);
        dc_tensor_free(k.w);
    }
    dc_ctx_free(ctx);
}

/* Each branch computes what the paper says, element by element, in float32. */
static void test_cupdate_branches_f32(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t rows = 3, cols = 37;
    dc_tensor *z, *zb, *x[4];
    double vz[3] = {1, 0, 0}, vzb[3] = {1, 0, 1};
    int64_t cshape[2] = {rows, 1};
    z = test_tensor(ctx, DC_F32, 2, cshape, vz);
    zb = test_tensor(ctx, DC_F32, 2, cshape, vzb);
    cupdate_inputs(ctx, DC_F32, rows, cols, x);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *in[6] = {z, zb, x[0], x[1], x[2], x[3]};
    dc_tensor *c_next = dc_broadcast1(tape, DC_BFN_REF(hmlstm_update_c), 6, in);
    TEST_NONNULL(ctx, c_next);
    double *got = test_values(c_next), *c = test_values(x[0]), *f = test_values(x[1]), *i = test_values(x[2]),
           *g = test_values(x[3]);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t e = r * cols; e < (r + 1) * cols; ++e) {
            double si = 1 / (1 + exp(-i[e])), sf = 1 / (1 + exp(-f[e])), tg = tanh(g[e]);
            double want = r == 0 ? si * tg : r == 1 ? c[e] : sf * c[e] + si * tg;
            if (fabs(got[e] - want) > 2e-6)
                fail_msg("row %lld element %lld: %.9g, want %.9g", (long long)r, (long long)e, got[e], want);
        }
    free(got);
    free(c);
    free(f);
    free(i);
    free(g);
    dc_tape_free(tape);
    for (int k = 0; k < 4; ++k)
        dc_tensor_free(x[k]);
    dc_tensor_free(z);
    dc_tensor_free(zb);
    dc_ctx_free(ctx);
}

/* A context with a given number of CPU threads. */
static dc_ctx *ctx_with_threads(int threads) { return test_cpu_ctx_threads(threads, 0); }

/* The loss, its gradients and the output on a context with `threads`
 * threads, over rows x 300: c per column, f full, i per row, g a scalar, so
 * that three of the four gradients are sums over broadcast axes. */
static void cupdate_on_threads(int threads, dc_partials_policy policy, int64_t rows, double **grads, double **out)
{
    dc_ctx *ctx = ctx_with_threads(threads);
    srand(11);
    const int64_t cols = 300;
    cupdate_case k = {0};
    make_control(ctx, DC_F64, true, rows, &k.z, &k.zb);
    const int64_t full[2] = {rows, cols}, col[2] = {1, cols}, row[2] = {rows, 1};
    k.w = test_random(ctx, DC_F64, 2, full, -1.0, 1.0);
    k.policy = policy;
    dc_tensor *x[4] = {test_random(ctx, DC_F64, 2, col, -2.0, 2.0), test_random(ctx, DC_F64, 2, full, -2.0, 2.0),
                       test_random(ctx, DC_F64, 2, row, -2.0, 2.0), test_random(ctx, DC_F64, 0, NULL, -2.0, 2.0)};
    for (int i = 0; i < 4; ++i)
        dc_tensor_set_requires_grad(x[i], true);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *in[6] = {k.z, k.zb, x[0], x[1], x[2], x[3]};
    dc_tensor *c_next = NULL;
    TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &c_next, policy));
    *out = test_values(c_next);
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, c_next, k.w), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    for (int i = 0; i < 4; ++i) {
        TEST_NONNULL(ctx, dc_tensor_grad(x[i]));
        grads[i] = test_values(dc_tensor_grad(x[i]));
        dc_tensor_free(x[i]);
    }
    dc_tape_free(tape);
    dc_tensor_free(k.z);
    dc_tensor_free(k.zb);
    dc_tensor_free(k.w);
    dc_ctx_free(ctx);
}

/* A broadcast function's loops are split over the threads from two chunks
 * on (a chunk is at most 2048 elements). Four threads give the outputs of
 * one, and the gradients up to the order of the per-thread sums. 9 x 300
 * (two chunks, under 256 KiB per loop) is split only because the loops are
 * a broadcast function's; 37 x 300 (seven chunks) would be anyway. */
static void test_cupdate_threads_agree(void **state)
{
    (void)state;
    const int64_t all_rows[2] = {9, 37};
    for (int r = 0; r < 2; ++r) {
        const int64_t rows = all_rows[r];
        const int64_t n[4] = {300, rows * 300, rows, 1};
        for (int policy = 0; policy < 2; ++policy) {
            double *g1[4], *g4[4], *o1, *o4;
            cupdate_on_threads(1, (dc_partials_policy)policy, rows, g1, &o1);
            cupdate_on_threads(4, (dc_partials_policy)policy, rows, g4, &o4);
            if (memcmp(o1, o4, (size_t)(rows * 300) * sizeof *o1) != 0)
                fail_msg("%lld rows, %s policy: the output differs between 1 and 4 threads", (long long)rows,
                         policy ? "recompute" : "store");
            for (int i = 0; i < 4; ++i) {
                test_assert_close(g4[i], g1[i], n[i], 1e-12, 1e-12, "gradient, 4 threads against 1");
                free(g1[i]);
                free(g4[i]);
            }
            free(o1);
            free(o4);
        }
    }
}

/* prod_j (x_j > 0.5 ? x_j : -x_j) with 1 to 10 differentiable inputs, both
 * policies, against the product rule in float64: one output and every
 * count of gradients, each with its own kernel in the store policy's
 * backward up to eight and the general one beyond. Some inputs are
 * broadcast, so that their gradients are sums. */
static void test_gradient_counts(void **state)
{
    (void)state;
    const dc_bfn *const fns[PROD_SIGN_FN_MAX_ARITY + 1] = PROD_SIGN_FNS;
    dc_ctx *ctx = test_cpu_ctx();
    srand(3);
    enum { R = 37, C = 70 };
    const int64_t full[2] = {R, C}, col[2] = {1, C};
    dc_tensor *w = test_random(ctx, DC_F64, 2, full, -1.0, 1.0);
    double *wv = test_values(w);
    for (int arity = 1; arity <= PROD_SIGN_FN_MAX_ARITY; ++arity) {
        dc_tensor *x[PROD_SIGN_FN_MAX_ARITY];
        double *xv[PROD_SIGN_FN_MAX_ARITY];
        for (int j = 0; j < arity; ++j) {
            /* every third input a row broadcast over the rows */
            x[j] = test_random(ctx, DC_F64, 2, j % 3 == 2 ? col : full, -1.0, 1.5);
            dc_tensor_set_requires_grad(x[j], true);
            xv[j] = test_values(x[j]);
        }
        /* the reference: dL/dx_j = sum over broadcast rows of w s_j prod_{i != j} s_i x_i */
        double *want[PROD_SIGN_FN_MAX_ARITY];
        for (int j = 0; j < arity; ++j)
            want[j] = calloc((size_t)dc_tensor_numel(x[j]), sizeof(double));
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) {
                double f[PROD_SIGN_FN_MAX_ARITY];
                for (int j = 0; j < arity; ++j) {
                    const double v = xv[j][j % 3 == 2 ? c : r * C + c];
                    f[j] = v > 0.5 ? v : -v;
                }
                for (int j = 0; j < arity; ++j) {
                    double d = wv[r * C + c] * (xv[j][j % 3 == 2 ? c : r * C + c] > 0.5 ? 1.0 : -1.0);
                    for (int i = 0; i < arity; ++i)
                        if (i != j)
                            d *= f[i];
                    want[j][j % 3 == 2 ? c : r * C + c] += d;
                }
            }
        for (int policy = 0; policy < 2; ++policy) {
            dc_tape *tape = dc_tape_new(ctx);
            for (int j = 0; j < arity; ++j)
                dc_tensor_zero_grad(x[j]);
            dc_tensor *y = NULL;
            TEST_OK(ctx, dc_broadcast_policy(tape, fns[arity], arity, x, 1, &y, (dc_partials_policy)policy));
            TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, dc_op_mul(tape, y, w), 0, NULL, false)));
            for (int j = 0; j < arity; ++j) {
                double *got = test_values(dc_tensor_grad(x[j]));
                char what[96];
                snprintf(what, sizeof what, "prod_sign_%d (%s policy): gradient of x%d", arity,
                         policy ? "recompute" : "store", j + 1);
                test_assert_close(got, want[j], dc_tensor_numel(x[j]), 1e-13, 1e-12, what);
                free(got);
            }
            dc_tape_free(tape);
        }
        for (int j = 0; j < arity; ++j) {
            free(want[j]);
            free(xv[j]);
            dc_tensor_free(x[j]);
        }
    }
    free(wv);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* How two slices c and f of x lie in test_overlapping_gradients_threads. */
typedef enum slice_layout {
    SHIFTED_1D,      /* x 1-D, c = x[n/2 : 3n/2], f = x[0 : n], n = 16384 */
    SHARED_ROWS,     /* x [96, 512], c its rows 32..95, f its rows 0..63 */
    DISJOINT_COLUMNS /* x [64, 512], c its columns 0..255, f its columns 256..511 */
} slice_layout;

/* The gradient of x through two slices of it, c and f, at least eight chunks
 * each: both gradients are views into x's. Where c and f share elements,
 * with two threads some element of x would be added to by both threads at
 * the same moment of their halves, through c in the one and through f in
 * the other; the engine must see it and use one thread. Column blocks share
 * none (though their spans of memory interleave), and are split. Either way
 * two threads must give what one gives. */
static void overlap_grad(int threads, dc_partials_policy policy, slice_layout layout, double **grad, int64_t *numel)
{
    dc_ctx *ctx = ctx_with_threads(threads);
    srand(5);
    const int64_t n = 16384;
    const int64_t xn[2] = {layout == SHIFTED_1D ? n + n / 2 : layout == SHARED_ROWS ? 96 : 64, 512};
    const int64_t en[2] = {layout == SHIFTED_1D ? n : 64, layout == DISJOINT_COLUMNS ? 256 : 512};
    const int nd = layout == SHIFTED_1D ? 1 : 2;
    dc_tensor *x = test_random(ctx, DC_F64, nd, xn, -2.0, 2.0);
    dc_tensor *i = test_random(ctx, DC_F64, nd, en, -2.0, 2.0), *g = test_random(ctx, DC_F64, nd, en, -2.0, 2.0);
    dc_tensor *w = test_random(ctx, DC_F64, nd, en, -1.0, 1.0);
    const double zero = 0.0, one = 1.0;
    dc_tensor *z = test_tensor(ctx, DC_F64, 0, NULL, &zero), *zb = test_tensor(ctx, DC_F64, 0, NULL, &one);
    dc_tensor_set_requires_grad(x, true);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *c, *f;
    if (layout == SHIFTED_1D) {
        c = dc_op_slice(tape, x, 0, n / 2, n);
        f = dc_op_slice(tape, x, 0, 0, n);
    } else if (layout == SHARED_ROWS) {
        c = dc_op_slice(tape, x, 0, 32, 64);
        f = dc_op_slice(tape, x, 0, 0, 64);
    } else {
        c = dc_op_slice(tape, x, 1, 0, 256);
        f = dc_op_slice(tape, x, 1, 256, 256);
    }
    dc_tensor *in[6] = {z, zb, c, f, i, g};
    dc_tensor *c_next = NULL;
    TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &c_next, policy));
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, c_next, w), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    TEST_NONNULL(ctx, dc_tensor_grad(x));
    *grad = test_values(dc_tensor_grad(x));
    *numel = dc_tensor_numel(x);
    dc_tape_free(tape);
    dc_tensor *own[6] = {x, i, g, w, z, zb};
    for (int k = 0; k < 6; ++k)
        dc_tensor_free(own[k]);
    dc_ctx_free(ctx);
}

static void test_overlapping_gradients_threads(void **state)
{
    (void)state;
    const char *what[3] = {"gradient through overlapping slices, 2 threads against 1",
                           "gradient through 2-D slices sharing rows, 2 threads against 1",
                           "gradient through disjoint column blocks, 2 threads against 1"};
    for (int layout = SHIFTED_1D; layout <= DISJOINT_COLUMNS; ++layout) {
        for (int policy = 0; policy < 2; ++policy) {
            for (int round = 0; round < 20; ++round) {
                double *g1, *g2;
                int64_t n;
                overlap_grad(1, (dc_partials_policy)policy, (slice_layout)layout, &g1, &n);
                overlap_grad(2, (dc_partials_policy)policy, (slice_layout)layout, &g2, &n);
                test_assert_close(g2, g1, n, 0, 0, what[layout]);
                free(g1);
                free(g2);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cupdate_gradcheck),
        cmocka_unit_test(test_cupdate_matches_pure_reverse),
        cmocka_unit_test(test_cupdate_branches_f32),
        cmocka_unit_test(test_cupdate_threads_agree),
        cmocka_unit_test(test_overlapping_gradients_threads),
        cmocka_unit_test(test_gradient_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
