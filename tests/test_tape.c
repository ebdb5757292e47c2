/* The tape: gradients of small graphs in both dtypes, accumulation (a tensor
 * used twice, two backward passes, zeroing), no-grad mode, seeds given to
 * dc_backward_with, reset and steady-state memory, gradients of
 * intermediates, and fused broadcast nodes: one node whatever the number of
 * inputs or outputs, control inputs without gradients, the recompute policy
 * against the store policy, and the same input passed twice; DC_POISON. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

/* ---- helpers ---- */

/* A persistent tensor of uniform random values that requires a gradient. */
static dc_tensor *param(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, double lo, double hi)
{
    dc_tensor *t = test_random(ctx, dtype, ndim, shape, lo, hi);
    TEST_OK(ctx, dc_tensor_set_requires_grad(t, true));
    return t;
}

/* The gradient of t as doubles (malloc'd), after checking that one flowed
 * and that it has t's shape and dtype. */
static double *grad_of(const dc_tensor *t, const char *what)
{
    const dc_tensor *g = dc_tensor_grad(t);
    if (!g)
        fail_msg("%s: expected a gradient, dc_tensor_grad returned NULL", what);
    if (dc_tensor_dtype(g) != dc_tensor_dtype(t))
        fail_msg("%s: gradient is %s, expected %s like the tensor", what, dc_dtype_name(dc_tensor_dtype(g)),
                 dc_dtype_name(dc_tensor_dtype(t)));
    char sg[64], st[64];
    dc_tensor_shape_str(g, sg, sizeof sg);
    dc_tensor_shape_str(t, st, sizeof st);
    if (strcmp(sg, st) != 0)
        fail_msg("%s: gradient has shape %s, expected %s like the tensor", what, sg, st);
    return test_values(g);
}

/* Fails unless grad(t) matches want (numel(t) values) within atol + rtol * |want|. */
static void check_grad(const dc_tensor *t, const double *want, double atol, double rtol, const char *what)
{
    double *got = grad_of(t, what);
    test_assert_close(got, want, dc_tensor_numel(t), atol, rtol, what);
    free(got);
}

/* Fails unless a and b agree to rtol relative to the larger magnitude of the
 * two arrays (so that sums which cancel to about zero are compared sensibly). */
static void assert_close_scaled(const double *a, const double *b, int64_t n, double rtol, const char *what)
{
    double scale = 0.0;
    for (int64_t i = 0; i < n; ++i)
        scale = fmax(scale, fmax(fabs(a[i]), fabs(b[i])));
    test_assert_close(a, b, n, rtol * 1e-3 * scale, rtol, what);
}

/* Relative tolerance of hand formulas against the library's math. */
static double hand_rtol(dc_dtype dtype) { return dtype == DC_F32 ? 2e-5 : 1e-12; }
static double hand_atol(dc_dtype dtype) { return dtype == DC_F32 ? 2e-6 : 1e-13; }

/* sum(x * w): the simplest loss with known gradients w and x. */
static dc_tensor *dot_loss(dc_tape *tape, dc_tensor *x, dc_tensor *w)
{
    return dc_op_sum(tape, dc_op_mul(tape, x, w), 0, NULL, false);
}

/* ---- dtypes ---- */

/* loss = sum(tanh(x) * w + exp(x)) in f32 and f64: dx = (1 - tanh^2 x) w + exp(x),
 * dw = tanh(x); the loss and the gradients keep the inputs' dtype. */
static void test_small_graph_both_dtypes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const dc_dtype dtypes[2] = {DC_F32, DC_F64};
    for (int k = 0; k < 2; ++k) {
        const dc_dtype dt = dtypes[k];
        const int64_t shape[2] = {3, 5};
        dc_tensor *x = param(ctx, dt, 2, shape, -1.5, 1.5), *w = param(ctx, dt, 2, shape, -1.0, 1.0);
        dc_tape *tape = dc_tape_new(ctx);
        TEST_NONNULL(ctx, tape);
        dc_tensor *y = dc_op_add(tape, dc_op_mul(tape, dc_op_tanh(tape, x), w), dc_op_exp(tape, x));
        dc_tensor *loss = dc_op_sum(tape, y, 0, NULL, false);
        TEST_NONNULL(ctx, loss);
        if (dc_tensor_dtype(loss) != dt || dc_tensor_ndim(loss) != 0)
            fail_msg("%s: loss is %s of rank %d, expected %s of rank 0", dc_dtype_name(dt),
                     dc_dtype_name(dc_tensor_dtype(loss)), dc_tensor_ndim(loss), dc_dtype_name(dt));
        assert_int_equal(dc_tape_node_count(tape), 5); /* tanh, mul, exp, add, sum */
        TEST_OK(ctx, dc_backward(tape, loss));

        double *xv = test_values(x), *wv = test_values(w);
        const int64_t n = dc_tensor_numel(x);
        double *gx = malloc((size_t)n * sizeof *gx), *gw = malloc((size_t)n * sizeof *gw);
        double want_loss = 0.0;
        for (int64_t e = 0; e < n; ++e) {
            const double t = tanh(xv[e]);
            gx[e] = (1.0 - t * t) * wv[e] + exp(xv[e]);
            gw[e] = t;
            want_loss += t * wv[e] + exp(xv[e]);
        }
        double got_loss;
        TEST_OK(ctx, dc_tensor_item(loss, &got_loss));
        test_assert_close(&got_loss, &want_loss, 1, hand_atol(dt), hand_rtol(dt), "loss");
        check_grad(x, gx, hand_atol(dt), hand_rtol(dt), dt == DC_F32 ? "f32 dx" : "f64 dx");
        check_grad(w, gw, hand_atol(dt), hand_rtol(dt), dt == DC_F32 ? "f32 dw" : "f64 dw");
        free(xv);
        free(wv);
        free(gx);
        free(gw);
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_tensor_free(w);
    }
    dc_ctx_free(ctx);
}

/* ---- accumulation ---- */

/* y = x * w + x: x reaches the loss along two paths, dx = w + 1, dw = x; and
 * x * x as the two operands of one node gives 2x. */
static void test_accumulate_within_graph(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {4, 3};
    dc_tensor *x = param(ctx, DC_F64, 2, shape, -2.0, 2.0), *w = param(ctx, DC_F64, 2, shape, -1.0, 1.0);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = dc_op_add(tape, dc_op_mul(tape, x, w), x);
    TEST_NONNULL(ctx, y);
    TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, y, 0, NULL, false)));
    double *xv = test_values(x), *wv = test_values(w), want[12];
    for (int e = 0; e < 12; ++e)
        want[e] = wv[e] + 1.0;
    check_grad(x, want, 0, 1e-15, "dx of x * w + x");
    check_grad(w, xv, 0, 1e-15, "dw of x * w + x");

    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, x)));
    for (int e = 0; e < 12; ++e)
        want[e] = 2.0 * xv[e];
    check_grad(x, want, 0, 1e-15, "dx of x * x");
    free(xv);
    free(wv);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* Two backward passes on two steps add up; dc_tensor_zero_grad makes the
 * gradient absent and the next backward overwrite it; a second tape adds
 * into the same parameters. */
static void test_accumulate_across_steps(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[1] = {7};
    dc_tensor *x = param(ctx, DC_F64, 1, shape, -2.0, 2.0), *w = param(ctx, DC_F64, 1, shape, -1.0, 1.0);
    double *xv = test_values(x), *wv = test_values(w), want_x[7], want_w[7];
    dc_tape *tape = dc_tape_new(ctx);

    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, w)));
    check_grad(x, wv, 0, 1e-15, "dx after one pass");
    dc_tape_reset(tape);
    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, w)));
    for (int e = 0; e < 7; ++e) {
        want_x[e] = 2.0 * wv[e];
        want_w[e] = 2.0 * xv[e];
    }
    check_grad(x, want_x, 0, 1e-15, "dx after two passes (should add up)");
    check_grad(w, want_w, 0, 1e-15, "dw after two passes (should add up)");

    /* A different loss on the next step adds its own gradient: x * x -> 2x. */
    dc_tape_reset(tape);
    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, x)));
    for (int e = 0; e < 7; ++e)
        want_x[e] = 2.0 * wv[e] + 2.0 * xv[e];
    check_grad(x, want_x, 0, 1e-14, "dx after a third pass of another loss");
    check_grad(w, want_w, 0, 1e-15, "dw untouched by a loss without w");

    dc_tensor_zero_grad(x);
    dc_tensor_zero_grad(w);
    if (dc_tensor_grad(x) || dc_tensor_grad(w))
        fail_msg("dc_tensor_grad after dc_tensor_zero_grad: expected NULL, got x %p w %p", (void *)dc_tensor_grad(x),
                 (void *)dc_tensor_grad(w));
    dc_tape_reset(tape);
    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, w)));
    check_grad(x, wv, 0, 1e-15, "dx after zeroing (should be overwritten, not added)");
    check_grad(w, xv, 0, 1e-15, "dw after zeroing (should be overwritten, not added)");

    /* Another tape adds into the same parameters. */
    dc_tape *tape2 = dc_tape_new(ctx);
    TEST_OK(ctx, dc_backward(tape2, dot_loss(tape2, x, w)));
    for (int e = 0; e < 7; ++e)
        want_x[e] = 2.0 * wv[e];
    check_grad(x, want_x, 0, 1e-15, "dx after a pass on a second tape");

    free(xv);
    free(wv);
    dc_tape_free(tape);
    dc_tape_free(tape2);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- no-grad mode and inputs without gradients ---- */

typedef struct small_graph {
    dc_tensor *y; /* the c-update output */
    dc_tensor *loss;
} small_graph;

/* loss = mean(relu(x @ w) * exp(x) + hmlstm_update_c(z, zb, x, w2, x, w2)). */
static small_graph build_small(dc_tape *tape, dc_tensor *x, dc_tensor *w, dc_tensor *w2, dc_tensor *z, dc_tensor *zb)
{
    small_graph g;
    dc_tensor *in[6] = {z, zb, x, w2, x, w2};
    g.y = dc_broadcast1(tape, DC_BFN_REF(hmlstm_update_c), 6, in);
    dc_tensor *h = dc_op_mul(tape, dc_op_relu(tape, dc_op_matmul(tape, x, w)), dc_op_exp(tape, x));
    g.loss = dc_op_mean(tape, dc_op_add(tape, h, g.y), 0, NULL, false);
    return g;
}

/* With recording off nothing is recorded, values are those of a recorded
 * run, and backward has nothing to walk (DC_ERR_STATE). */
static void test_no_grad_mode(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t sq[2] = {4, 4}, col[2] = {4, 1};
    const double zv[4] = {1, 0, 0, 1}, zbv[4] = {0, 0, 1, 1};
    dc_tensor *x = param(ctx, DC_F64, 2, sq, -1.0, 1.0), *w = param(ctx, DC_F64, 2, sq, -1.0, 1.0);
    dc_tensor *w2 = param(ctx, DC_F64, 2, sq, -1.0, 1.0);
    dc_tensor *z = test_tensor(ctx, DC_F64, 2, col, zv), *zb = test_tensor(ctx, DC_F64, 2, col, zbv);
    dc_tape *tape = dc_tape_new(ctx);
    assert_true(dc_tape_is_recording(tape));

    bool prev = dc_tape_set_recording(tape, false);
    if (!prev || dc_tape_is_recording(tape))
        fail_msg("dc_tape_set_recording(false) on a new tape: expected previous true and now off, got %d / %d", prev,
                 dc_tape_is_recording(tape));
    small_graph off = build_small(tape, x, w, w2, z, zb);
    TEST_NONNULL(ctx, off.loss);
    if (dc_tape_node_count(tape) != 0)
        fail_msg("no-grad mode recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    assert_false(dc_tensor_requires_grad(off.loss));
    double loss_off, *y_off = test_values(off.y);
    TEST_OK(ctx, dc_tensor_item(off.loss, &loss_off));
    dc_status st = dc_backward(tape, off.loss);
    if (st != DC_ERR_STATE)
        fail_msg("backward after no-grad ops: expected DC_ERR_STATE, got %s (%s)", dc_status_name(st),
                 dc_last_error(ctx));
    if (dc_tensor_grad(x) || dc_tensor_grad(w))
        fail_msg("a failed backward left gradients behind");
    /* Turning it off again reports that it was off. */
    prev = dc_tape_set_recording(tape, false);
    assert_false(prev);

    prev = dc_tape_set_recording(tape, true);
    if (prev || !dc_tape_is_recording(tape))
        fail_msg("dc_tape_set_recording(true): expected previous false and now on, got %d / %d", prev,
                 dc_tape_is_recording(tape));
    small_graph on = build_small(tape, x, w, w2, z, zb);
    TEST_NONNULL(ctx, on.loss);
    assert_int_equal(dc_tape_node_count(tape), 7); /* bfn, matmul, relu, exp, mul, add, mean */
    double loss_on, *y_on = test_values(on.y);
    TEST_OK(ctx, dc_tensor_item(on.loss, &loss_on));
    if (loss_on != loss_off)
        fail_msg("loss recorded %.17g, not recorded %.17g: expected equal values", loss_on, loss_off);
    test_assert_close(y_off, y_on, 16, 0, 1e-15, "broadcast output without vs with recording");
    TEST_OK(ctx, dc_backward(tape, on.loss));
    TEST_NONNULL(ctx, dc_tensor_grad(x));
    TEST_NONNULL(ctx, dc_tensor_grad(w2));
    free(y_off);
    free(y_on);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_tensor_free(w2);
    dc_tensor_free(z);
    dc_tensor_free(zb);
    dc_ctx_free(ctx);
}

/* Every kind of op on tensors that require no gradient records nothing; a
 * product with one parameter records exactly one node, and the constant
 * operand gets no gradient. */
static void test_no_grad_inputs_record_nothing(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6}, col[2] = {2, 1};
    dc_tensor *a = test_random(ctx, DC_F64, 2, s23, 0.5, 2.0), *b = test_random(ctx, DC_F64, 2, s23, 0.5, 2.0);
    dc_tensor *m = test_random(ctx, DC_F64, 2, s32, -1.0, 1.0);
    const double gv[2] = {0, 1};
    dc_tensor *gate = test_tensor(ctx, DC_F64, 2, col, gv);
    dc_tape *tape = dc_tape_new(ctx);
    const int axis1[1] = {1};
    dc_tensor *outs[12];
    int n = 0;
    outs[n++] = dc_op_add(tape, a, b);
    outs[n++] = dc_op_sub(tape, a, b);
    outs[n++] = dc_op_div(tape, dc_op_pow(tape, a, b), dc_op_mul(tape, a, b));
    outs[n++] = dc_op_affine(tape, dc_op_neg(tape, a), 2.0, 1.0);
    outs[n++] = dc_op_log(tape, dc_op_exp(tape, a));
    outs[n++] = dc_op_relu(tape, dc_op_sigmoid(tape, dc_op_tanh(tape, a)));
    outs[n++] = dc_op_select(tape, gate, a, b);
    outs[n++] = dc_op_mean(tape, dc_op_sum(tape, a, 1, axis1, true), 0, NULL, false);
    outs[n++] = dc_op_matmul(tape, a, m);
    outs[n++] = dc_op_reshape(tape, dc_op_transpose(tape, a, 0, 1), 1, s6);
    dc_tensor *gin[3] = {a, gate, b};
    outs[n++] = dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, gin);
    dc_tensor *pin[2] = {a, b}, *pout[2];
    TEST_OK(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, pin, 2, pout));
    outs[n++] = pout[1];
    for (int k = 0; k < n; ++k) {
        if (!outs[k])
            fail_msg("op %d on constants failed: %s", k, dc_last_error(ctx));
        if (dc_tensor_requires_grad(outs[k]))
            fail_msg("op %d on constants: its result requires a gradient, expected not", k);
    }
    if (dc_tape_node_count(tape) != 0)
        fail_msg("ops on inputs without gradients recorded %zu nodes, expected 0", dc_tape_node_count(tape));

    /* Only the control input requires a gradient: still nothing to record. */
    TEST_OK(ctx, dc_tensor_set_requires_grad(gate, true));
    TEST_NONNULL(ctx, dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, gin));
    if (dc_tape_node_count(tape) != 0)
        fail_msg("gated_scale with only its control input requiring a gradient recorded %zu nodes, expected 0",
                 dc_tape_node_count(tape));

    dc_tensor *x = param(ctx, DC_F64, 2, s23, -1.0, 1.0);
    dc_tensor *y = dc_op_mul(tape, a, x);
    TEST_NONNULL(ctx, y);
    assert_int_equal(dc_tape_node_count(tape), 1);
    assert_true(dc_tensor_requires_grad(y));
    TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, y, 0, NULL, false)));
    if (dc_tensor_grad(a))
        fail_msg("a constant operand received a gradient");
    double *av = test_values(a);
    check_grad(x, av, 0, 1e-15, "dx of sum(a * x)");
    free(av);
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_tensor_free(m);
    dc_tensor_free(gate);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* ---- seeds ---- */

/* dc_backward_with y = x * w and adjoints of shape [2, 3], [], [1, 3], [3]
 * and [2, 1]: dx = A * w, dw = A * x with A the adjoint broadcast, and y's
 * own gradient is A. dc_backward from sum(y) equals the seed 1. */
static void test_backward_with_adjoints(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {2, 3};
    dc_tensor *x = param(ctx, DC_F64, 2, shape, -2.0, 2.0), *w = param(ctx, DC_F64, 2, shape, -1.0, 1.0);
    double *xv = test_values(x), *wv = test_values(w);
    const double full[6] = {0.5, -1.0, 2.0, 3.0, -0.25, 1.5};
    const double scalar[1] = {2.5}, row[3] = {1.0, -2.0, 0.5}, column[2] = {-3.0, 0.75};
    const int64_t s_row2[2] = {1, 3}, s_row1[1] = {3}, s_col[2] = {2, 1};
    struct {
        const char *name;
        int ndim;
        const int64_t *shape;
        const double *values;
    } cases[5] = {
        {"full [2, 3]", 2, shape, full}, {"scalar []", 0, NULL, scalar},      {"row [1, 3]", 2, s_row2, row},
        {"row [3]", 1, s_row1, row},     {"column [2, 1]", 2, s_col, column},
    };
    dc_tape *tape = dc_tape_new(ctx);
    for (int c = 0; c < 5; ++c) {
        dc_tensor *adj = test_tensor(ctx, DC_F64, cases[c].ndim, cases[c].shape, cases[c].values);
        double a[6], gx[6], gw[6];
        for (int e = 0; e < 6; ++e) {
            const int r = e / 3, k = e % 3;
            a[e] = cases[c].ndim == 0        ? scalar[0]
                   : cases[c].shape == s_col ? column[r]
                   : cases[c].shape == shape ? full[e]
                                             : row[k];
            gx[e] = a[e] * wv[e];
            gw[e] = a[e] * xv[e];
        }
        dc_tape_reset(tape);
        dc_tensor_zero_grad(x);
        dc_tensor_zero_grad(w);
        dc_tensor *y = dc_op_mul(tape, x, w);
        TEST_NONNULL(ctx, y);
        dc_status st = dc_backward_with(tape, y, adj);
        if (st != DC_OK)
            fail_msg("dc_backward_with, adjoint %s: %s (%s)", cases[c].name, dc_status_name(st), dc_last_error(ctx));
        char what[96];
        snprintf(what, sizeof what, "dx, adjoint %s", cases[c].name);
        check_grad(x, gx, 0, 1e-15, what);
        snprintf(what, sizeof what, "dw, adjoint %s", cases[c].name);
        check_grad(w, gw, 0, 1e-15, what);
        snprintf(what, sizeof what, "dy (the seed), adjoint %s", cases[c].name);
        check_grad(y, a, 0, 0, what);
        dc_tape_reset(tape);
        dc_tensor_free(adj);
    }

    /* The scalar loss: dc_backward and dc_backward_with a seed of 1 agree. */
    dc_tensor_zero_grad(x);
    TEST_OK(ctx, dc_backward(tape, dot_loss(tape, x, w)));
    double *g1 = grad_of(x, "dx from dc_backward");
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    dc_tensor *one = dc_tape_scalar(tape, DC_F64, 1.0);
    TEST_OK(ctx, dc_backward_with(tape, dot_loss(tape, x, w), one));
    check_grad(x, g1, 0, 0, "dx from dc_backward_with a seed of 1 vs dc_backward");
    test_assert_close(g1, wv, 6, 0, 1e-15, "dx of sum(x * w)");
    free(g1);
    free(xv);
    free(wv);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* A seed that is itself a gradient (copied, not viewed) into a slice of a
 * tensor whose gradient holds values: added to them, as a plain seed is. */
static void test_gradient_seed_into_a_slice_adds(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s22[2] = {2, 2};
    dc_tensor *x = param(ctx, DC_F64, 2, s23, -1.0, 1.0), *p = param(ctx, DC_F64, 2, s22, -1.0, 1.0);
    dc_tape *tape = dc_tape_new(ctx);
    for (int gradient_seed = 0; gradient_seed < 2; ++gradient_seed) {
        dc_tensor_zero_grad(x);
        dc_tensor_zero_grad(p);
        dc_tape_reset(tape);
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, dc_op_affine(tape, p, 100.0, 0.0), 0, NULL, false)));
        dc_tape_reset(tape);
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, x, 0, NULL, false))); /* x's gradient: ones */
        dc_tape_reset(tape);
        const double hundreds[4] = {100, 100, 100, 100};
        dc_tensor *plain = test_tensor(ctx, DC_F64, 2, s22, hundreds);
        const dc_tensor *seed = gradient_seed ? dc_tensor_grad(p) : plain;
        TEST_NONNULL(ctx, seed);
        TEST_OK(ctx, dc_backward_with(tape, dc_op_slice(tape, x, 1, 1, 2), seed));
        const double want[6] = {1, 101, 101, 1, 101, 101};
        check_grad(x, want, 0, 0, gradient_seed ? "a gradient as the seed" : "a plain seed");
        dc_tensor_free(plain);
    }
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(p);
    dc_ctx_free(ctx);
}

/* A broadcast seed flows through every kind of op: a sum over one axis, a
 * matmul, a transpose, a reshape and a broadcast node, each seeded with a
 * scalar 2 or a row. */
static void test_broadcast_seed_through_ops(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s34[2] = {3, 4}, s45[2] = {4, 5};
    dc_tensor *x = param(ctx, DC_F64, 2, s34, -1.0, 1.0), *w = param(ctx, DC_F64, 2, s34, -1.0, 1.0);
    dc_tensor *m = param(ctx, DC_F64, 2, s45, -1.0, 1.0);
    double *xv = test_values(x), *wv = test_values(w), *mv = test_values(m);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *two = dc_tensor_new(ctx, DC_F64, 0, NULL);
    TEST_OK(ctx, dc_tensor_fill(two, 2.0));
    double want[20];

    /* sum over axis 1 of x * w, seeded with 2: dx = 2 w. */
    const int axis1[1] = {1};
    dc_tensor *s = dc_op_sum(tape, dc_op_mul(tape, x, w), 1, axis1, false);
    TEST_OK(ctx, dc_backward_with(tape, s, two));
    for (int e = 0; e < 12; ++e)
        want[e] = 2.0 * wv[e];
    check_grad(x, want, 0, 1e-15, "dx of sum(x * w, axis 1) seeded with 2");

    /* x @ m seeded with the row r: dx[i, k] = sum_j r[j] m[k, j]. */
    const double rv[5] = {1.0, -1.0, 0.5, 2.0, -0.5};
    const int64_t s5[1] = {5};
    dc_tensor *r = test_tensor(ctx, DC_F64, 1, s5, rv);
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    dc_tensor *y = dc_op_matmul(tape, x, m);
    TEST_OK(ctx, dc_backward_with(tape, y, r));
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 4; ++k) {
            want[i * 4 + k] = 0.0;
            for (int j = 0; j < 5; ++j)
                want[i * 4 + k] += rv[j] * mv[k * 5 + j];
        }
    check_grad(x, want, 1e-15, 1e-14, "dx of x @ m seeded with a row");
    for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 5; ++j)
            want[k * 5 + j] = (xv[k] + xv[4 + k] + xv[8 + k]) * rv[j];
    check_grad(m, want, 1e-15, 1e-14, "dm of x @ m seeded with a row");

    /* transpose then reshape of x * w, seeded with 2: dx = 2 w. */
    const int64_t s12[1] = {12};
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    dc_tensor *t = dc_op_reshape(tape, dc_op_transpose(tape, dc_op_mul(tape, x, w), 0, 1), 1, s12);
    TEST_OK(ctx, dc_backward_with(tape, t, two));
    for (int e = 0; e < 12; ++e)
        want[e] = 2.0 * wv[e];
    check_grad(x, want, 0, 1e-15, "dx of reshape(transpose(x * w)) seeded with 2");

    /* transpose(x * w) [4, 3] seeded with the row c [3]: dx[i, k] = c[i] w[i, k]. */
    const double cv[3] = {0.5, -2.0, 3.0};
    const int64_t s3[1] = {3};
    dc_tensor *c3 = test_tensor(ctx, DC_F64, 1, s3, cv);
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    TEST_OK(ctx, dc_backward_with(tape, dc_op_transpose(tape, dc_op_mul(tape, x, w), 0, 1), c3));
    for (int e = 0; e < 12; ++e)
        want[e] = cv[e / 4] * wv[e];
    check_grad(x, want, 0, 1e-15, "dx of transpose(x * w) seeded with a row");
    dc_tensor_free(c3);

    /* gated_scale(x, 1, w) = x * (1 + w), seeded with 2: dx = 2 (1 + w), dw = 2 x. */
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    dc_tensor_zero_grad(w);
    dc_tensor *gate = dc_tape_scalar(tape, DC_F64, 1.0);
    dc_tensor *gin[3] = {x, gate, w};
    dc_tensor *g = dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, gin);
    TEST_OK(ctx, dc_backward_with(tape, g, two));
    for (int e = 0; e < 12; ++e)
        want[e] = 2.0 * (1.0 + wv[e]);
    check_grad(x, want, 0, 1e-15, "dx of gated_scale seeded with 2");
    for (int e = 0; e < 12; ++e)
        want[e] = 2.0 * xv[e];
    check_grad(w, want, 0, 1e-15, "dw of gated_scale seeded with 2");

    free(xv);
    free(wv);
    free(mv);
    dc_tape_free(tape);
    dc_tensor_free(two);
    dc_tensor_free(r);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_tensor_free(m);
    dc_ctx_free(ctx);
}

/* ---- reset and memory ---- */

typedef struct mlp {
    dc_tensor *x, *w, *b, *z, *zb; /* data [M, K], weight [K, N], bias [1, N], controls [M, 1] */
    dc_tensor *c;                  /* cell state [M, N], a parameter */
} mlp;

/* loss = mean(hmlstm_update_c(z, zb, c, tanh(x @ w + b), x @ w, b) ^ 2). */
static dc_tensor *mlp_step(dc_tape *tape, const mlp *p)
{
    dc_tensor *pre = dc_op_matmul(tape, p->x, p->w);
    dc_tensor *h = dc_op_tanh(tape, dc_op_add(tape, pre, p->b));
    dc_tensor *in[6] = {p->z, p->zb, p->c, h, pre, p->b};
    dc_tensor *c_next = dc_broadcast1(tape, DC_BFN_REF(hmlstm_update_c), 6, in);
    return dc_op_mean(tape, dc_op_mul(tape, c_next, c_next), 0, NULL, false);
}

static void mlp_grads(const mlp *p, double **g)
{
    g[0] = grad_of(p->w, "dw");
    g[1] = grad_of(p->b, "db");
    g[2] = grad_of(p->c, "dc");
}

/* The same step, repeated after dc_tape_reset: identical gradients, no
 * memory reserved from the fifth step on (bounded by a small multiple of
 * the peak), a constant peak, nothing in use right after a reset,
 * parameters and their gradients untouched by it. */
static void check_steady_state(dc_ctx *ctx, int64_t M, int64_t K, int64_t N, size_t min_reserved)
{
    mlp p;
    const int64_t sx[2] = {M, K}, sw[2] = {K, N}, sb[2] = {1, N}, sz[2] = {M, 1}, sc[2] = {M, N};
    p.x = test_random(ctx, DC_F32, 2, sx, -1.0, 1.0);
    p.w = param(ctx, DC_F32, 2, sw, -0.3, 0.3);
    p.b = param(ctx, DC_F32, 2, sb, -0.1, 0.1);
    p.c = param(ctx, DC_F32, 2, sc, -1.0, 1.0);
    double *zv = malloc((size_t)M * sizeof *zv), *zbv = malloc((size_t)M * sizeof *zbv);
    for (int64_t r = 0; r < M; ++r) {
        zv[r] = r % 3 == 0;
        zbv[r] = r % 2;
    }
    p.z = test_tensor(ctx, DC_F32, 2, sz, zv);
    p.zb = test_tensor(ctx, DC_F32, 2, sz, zbv);
    free(zv);
    free(zbv);

    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    if (dc_tape_bytes_in_use(tape) != 0 || dc_tape_peak_bytes(tape) != 0)
        fail_msg("a new tape: %zu bytes in use, peak %zu; expected 0 and 0", dc_tape_bytes_in_use(tape),
                 dc_tape_peak_bytes(tape));
    double *w_before = test_values(p.w);
    double *g1[3], *g[3];
    /* The steady state begins by the fifth step: the tape's two header
     * arenas take turns, and an arena whose step needed several blocks puts
     * them into one at its next reset (the data arena at the first, each
     * header arena at its second). */
    const int steady = 4;
    size_t reserved1 = 0, peak1 = 0;
    for (int step = 0; step < 7; ++step) {
        dc_tensor_zero_grad(p.w);
        dc_tensor_zero_grad(p.b);
        dc_tensor_zero_grad(p.c);
        dc_tensor *loss = mlp_step(tape, &p);
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        if (dc_tape_bytes_in_use(tape) == 0)
            fail_msg("step %d: no tape bytes in use after a recorded step", step);
        mlp_grads(&p, step == 0 ? g1 : g);
        if (step == 0) {
            const size_t reserved0 = dc_tape_reserved_bytes(tape), peak0 = dc_tape_peak_bytes(tape);
            if (peak0 == 0 || reserved0 < peak0)
                fail_msg("after the first step: peak %zu, reserved %zu; expected 0 < peak <= reserved", peak0,
                         reserved0);
            if (reserved0 < min_reserved)
                fail_msg("after the first step: %zu bytes reserved, expected at least %zu (several arena blocks)",
                         reserved0, min_reserved);
        } else {
            const int64_t n[3] = {K * N, N, M * N};
            for (int k = 0; k < 3; ++k) {
                if (memcmp(g[k], g1[k], (size_t)n[k] * sizeof(double)) != 0)
                    test_assert_close(g[k], g1[k], n[k], 0, 0, "gradient of a repeated step vs the first");
                free(g[k]);
            }
        }
        if (step == steady) {
            reserved1 = dc_tape_reserved_bytes(tape);
            peak1 = dc_tape_peak_bytes(tape);
            /* bounded by the largest step (two header arenas, one data
             * block), the arenas' first blocks (16 MiB of data, 256 KiB of
             * headers each) aside */
            if (reserved1 > 3 * peak1 + (17u << 20))
                fail_msg("%lldx%lldx%lld: %zu bytes reserved for a peak of %zu", (long long)M, (long long)K,
                         (long long)N, reserved1, peak1);
        } else if (step > steady) {
            if (dc_tape_reserved_bytes(tape) != reserved1)
                fail_msg("%lldx%lldx%lld, step %d: %zu bytes reserved, expected %zu as after step %d "
                         "(no allocation in steady state)",
                         (long long)M, (long long)K, (long long)N, step, dc_tape_reserved_bytes(tape), reserved1,
                         steady);
            if (dc_tape_peak_bytes(tape) != peak1)
                fail_msg("%lldx%lldx%lld, step %d: peak %zu bytes, expected %zu as after step %d", (long long)M,
                         (long long)K, (long long)N, step, dc_tape_peak_bytes(tape), peak1, steady);
        }
        dc_tape_reset(tape);
        if (dc_tape_bytes_in_use(tape) != 0 || dc_tape_node_count(tape) != 0)
            fail_msg("right after dc_tape_reset: %zu bytes in use and %zu nodes, expected 0 and 0",
                     dc_tape_bytes_in_use(tape), dc_tape_node_count(tape));
        /* The parameters and their gradients outlive the reset. */
        mlp_grads(&p, g);
        const int64_t n[3] = {K * N, N, M * N};
        for (int k = 0; k < 3; ++k) {
            test_assert_close(g[k], g1[k], n[k], 0, 0, "gradient right after dc_tape_reset");
            free(g[k]);
        }
        double *w_now = test_values(p.w);
        test_assert_close(w_now, w_before, K * N, 0, 0, "parameter after dc_tape_reset");
        free(w_now);
    }
    for (int k = 0; k < 3; ++k)
        free(g1[k]);
    free(w_before);
    dc_tape_free(tape);
    dc_tensor_free(p.x);
    dc_tensor_free(p.w);
    dc_tensor_free(p.b);
    dc_tensor_free(p.c);
    dc_tensor_free(p.z);
    dc_tensor_free(p.zb);
}

static void test_reset_steady_state_small(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    check_steady_state(ctx, 6, 5, 7, 1);
    dc_ctx_free(ctx);
}

/* Step tensors of 8 MiB and of 16 MiB (above the arena's first block): the
 * arena spans several blocks, some larger than the default block size. */
static void test_reset_steady_state_multiblock(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    check_steady_state(ctx, 512, 16, 4096, (size_t)48 << 20);
    check_steady_state(ctx, 1024, 8, 4096 + 16, (size_t)96 << 20);
    dc_ctx_free(ctx);
}

/* Steps that grow a little each time: the tape holds a small multiple of
 * the largest step's memory, not a block for every step that outgrew the
 * others (40 such steps once held 851 MiB for a 26 MiB peak). */
static void test_growing_steps_keep_memory_bounded(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    size_t peak = 0;
    for (int step = 0; step < 40; ++step) {
        dc_tape_reset(tape);
        /* 2 MiB more of float64 each step, past the data arena's first block */
        const int64_t shape[1] = {(int64_t)(step + 1) << 18};
        TEST_NONNULL(ctx, dc_tape_tensor_new(tape, DC_F64, 1, shape, NULL));
        peak = dc_tape_peak_bytes(tape);
        const size_t reserved = dc_tape_reserved_bytes(tape);
        if (reserved > 3 * peak + (17u << 20))
            fail_msg("step %d: %zu bytes reserved for a peak of %zu", step, reserved, peak);
    }
    if (peak < (size_t)80 << 20)
        fail_msg("the last step's peak is %zu bytes; the test meant to pass 80 MiB", peak);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* A tape tensor used after dc_tape_reset is refused with DC_ERR_STATE, by
 * ops, reads, writes and backward alike: its memory may belong to another
 * tensor by then. */
static void test_tensor_after_reset_refused(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int64_t shape[2] = {3, 4};
    dc_tensor *w = test_random(ctx, DC_F32, 2, shape, -1, 1);
    TEST_OK(ctx, dc_tensor_set_requires_grad(w, true));
    dc_tensor *old = dc_op_tanh(tape, w);
    dc_tensor *loss = dc_op_sum(tape, old, 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    dc_tape_reset(tape);
    /* the next step records the same ops: new tensors where the old ones were */
    dc_tensor *now = dc_op_tanh(tape, w);
    TEST_NONNULL(ctx, dc_op_sum(tape, now, 0, NULL, false));
    double v;
    float host[12];
    struct {
        const char *what;
        dc_status st;
    } uses[] = {
        {"dc_op_exp", dc_op_exp(tape, old) ? DC_OK : dc_last_status(ctx)},
        {"dc_op_add", dc_op_add(tape, now, old) ? DC_OK : dc_last_status(ctx)},
        {"dc_tensor_get", dc_tensor_get(old, 0, &v)},
        {"dc_tensor_item", dc_tensor_item(loss, &v)},
        {"dc_tensor_set", dc_tensor_set(old, 0, 1.0)},
        {"dc_tensor_to_host", dc_tensor_to_host(old, host, sizeof host)},
        {"dc_tensor_fill", dc_tensor_fill(old, 0.0)},
        {"dc_tensor_copy", dc_tensor_copy(now, old)},
        {"dc_backward", dc_backward(tape, loss)},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; ++i) {
        if (uses[i].st != DC_ERR_STATE)
            fail_msg("%s on a tensor of the step before the reset: %s, want DC_ERR_STATE", uses[i].what,
                     dc_status_name(uses[i].st));
        if (!strstr(dc_last_error(ctx), "reset"))
            fail_msg("%s: the message \"%s\" does not say the tape was reset", uses[i].what, dc_last_error(ctx));
    }
    dc_tape_free(tape);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* An allocation on the tape that fails names the op it was for. */
static void test_out_of_memory_names_the_op(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    /* [2^21] + [2^21, 1]: 2^42 floats, 16 TiB, within the shape bound; more
     * than the machine has, refused also where the system overcommits */
    const int64_t row[1] = {(int64_t)1 << 21}, col[2] = {(int64_t)1 << 21, 1};
    dc_tensor *a = dc_tape_tensor_new(tape, DC_F32, 1, row, NULL), *b = dc_tape_tensor_new(tape, DC_F32, 2, col, NULL);
    TEST_NONNULL(ctx, a);
    TEST_NONNULL(ctx, b);
    if (dc_op_add(tape, a, b))
        fail_msg("16 TiB of tape memory were granted");
    if (dc_last_status(ctx) != DC_ERR_MEMORY || !strstr(dc_last_error(ctx), "dc_op_add") ||
        !strstr(dc_last_error(ctx), "memory"))
        fail_msg("%s: \"%s\"; want DC_ERR_MEMORY naming dc_op_add", dc_status_name(dc_last_status(ctx)),
                 dc_last_error(ctx));
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* ---- intermediates ---- */

/* h = x * w, y = tanh(h), loss = sum(y): dy = 1, dh = 1 - tanh^2(h); and an
 * output of a broadcast node gets its gradient too. */
static void test_intermediate_grads(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {3, 4};
    dc_tensor *x = param(ctx, DC_F64, 2, shape, -1.0, 1.0), *w = param(ctx, DC_F64, 2, shape, -1.0, 1.0);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *h = dc_op_mul(tape, x, w);
    dc_tensor *y = dc_op_tanh(tape, h);
    dc_tensor *pin[2] = {h, w}, *pout[2];
    TEST_OK(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, pin, 2, pout));
    dc_tensor *loss = dc_op_sum(tape, dc_op_add(tape, dc_op_mul(tape, pout[0], y), y), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    if (dc_tensor_grad(h) || dc_tensor_grad(y))
        fail_msg("intermediates have gradients before backward; expected NULL");
    TEST_OK(ctx, dc_backward(tape, loss));
    double *hv = test_values(h), *px = test_values(pout[0]), *yv = test_values(y);
    double dy[12], dpx[12];
    for (int e = 0; e < 12; ++e) {
        dy[e] = px[e] + 1.0;
        dpx[e] = yv[e];
    }
    check_grad(y, dy, 0, 1e-15, "gradient of the intermediate y");
    check_grad(pout[0], dpx, 0, 1e-15, "gradient of the broadcast output x");
    if (dc_tensor_grad(pout[1]))
        fail_msg("the unused output y of polar_pair has a gradient; expected NULL");
    /* dh = dy * (1 - tanh^2 h) + dpx * cos(w) where h >= 0 (else polar_pair is 0). */
    double *wv = test_values(w), dh[12];
    for (int e = 0; e < 12; ++e)
        dh[e] = dy[e] * (1.0 - yv[e] * yv[e]) + (hv[e] < 0 ? 0.0 : dpx[e] * cos(wv[e]));
    check_grad(h, dh, 1e-14, 1e-12, "gradient of the intermediate h");
    double *dhv = grad_of(h, "dh"), gx[12];
    for (int e = 0; e < 12; ++e)
        gx[e] = dhv[e] * wv[e];
    check_grad(x, gx, 0, 1e-15, "dx = dh * w");
    free(dhv);
    free(wv);
    free(hv);
    free(px);
    free(yv);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- broadcast nodes ---- */

/* A broadcast function is one node whatever its inputs (6 or 3) or outputs
 * (2), while the same c-update from primitives takes many. */
static void test_bfn_is_one_node(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {4, 6}, col[2] = {4, 1};
    const double zv[4] = {1, 0, 0, 0}, zbv[4] = {0, 0, 1, 1};
    dc_tensor *z = test_tensor(ctx, DC_F64, 2, col, zv), *zb = test_tensor(ctx, DC_F64, 2, col, zbv);
    dc_tensor *p[4];
    for (int k = 0; k < 4; ++k)
        p[k] = param(ctx, DC_F64, 2, shape, 0.1, 2.0);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *pre = dc_op_neg(tape, p[0]);
    const size_t before = dc_tape_node_count(tape);
    assert_int_equal(before, 1);

    dc_tensor *in6[6] = {z, zb, pre, p[1], p[2], p[3]}, *out1[1];
    TEST_OK(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out1));
    if (dc_tape_node_count(tape) != before + 1)
        fail_msg("hmlstm_update_c (6 inputs): node count went from %zu to %zu, expected +1", before,
                 dc_tape_node_count(tape));
    TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out1, DC_PARTIALS_RECOMPUTE));
    assert_int_equal(dc_tape_node_count(tape), before + 2);

    dc_tensor *in3[3] = {p[0], z, p[1]};
    TEST_NONNULL(ctx, dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, in3));
    assert_int_equal(dc_tape_node_count(tape), before + 3);

    dc_tensor *in2[2] = {p[2], p[3]}, *out2[2] = {NULL, NULL};
    TEST_OK(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, in2, 2, out2));
    if (dc_tape_node_count(tape) != before + 4)
        fail_msg("polar_pair (2 outputs): node count went from %zu to %zu, expected +1", before + 3,
                 dc_tape_node_count(tape));
    if (!out2[0] || !out2[1] || out2[0] == out2[1])
        fail_msg("polar_pair: expected two distinct outputs, got %p and %p", (void *)out2[0], (void *)out2[1]);
    double *r = test_values(p[2]), *t = test_values(p[3]), *ox = test_values(out2[0]), *oy = test_values(out2[1]);
    double wx[24], wy[24];
    for (int e = 0; e < 24; ++e) {
        wx[e] = r[e] * cos(t[e]);
        wy[e] = r[e] * sin(t[e]);
    }
    test_assert_close(ox, wx, 24, 1e-15, 1e-14, "polar_pair x");
    test_assert_close(oy, wy, 24, 1e-15, 1e-14, "polar_pair y");
    assert_true(dc_tensor_requires_grad(out2[0]) && dc_tensor_requires_grad(out2[1]));

    /* The c-update from primitives: many nodes for what is one above. */
    dc_tape_reset(tape);
    dc_tensor *flush = dc_op_mul(tape, dc_op_sigmoid(tape, p[2]), dc_op_tanh(tape, p[3]));
    dc_tensor *update = dc_op_add(tape, dc_op_mul(tape, dc_op_sigmoid(tape, p[1]), p[0]), flush);
    TEST_NONNULL(ctx, dc_op_select(tape, z, flush, dc_op_select(tape, zb, update, p[0])));
    assert_true(dc_tape_node_count(tape) > 1);
    free(r);
    free(t);
    free(ox);
    free(oy);
    dc_tape_free(tape);
    for (int k = 0; k < 4; ++k)
        dc_tensor_free(p[k]);
    dc_tensor_free(z);
    dc_tensor_free(zb);
    dc_ctx_free(ctx);
}

/* polar_pair with only x used downstream, only y, or both, under both
 * policies: the unused output's adjoint counts as zero. r < 0 takes the
 * branch returning (0, 0). */
static void test_multi_output_partial_use(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {5, 9};
    const int n = 45;
    dc_tensor *r = param(ctx, DC_F64, 2, shape, -0.5, 2.0), *t = param(ctx, DC_F64, 2, shape, -3.0, 3.0);
    dc_tensor *wx = test_random(ctx, DC_F64, 2, shape, -1.0, 1.0), *wy = test_random(ctx, DC_F64, 2, shape, -1.0, 1.0);
    double *rv = test_values(r), *tv = test_values(t), *wxv = test_values(wx), *wyv = test_values(wy);
    static const char *const uses[3] = {"x only", "y only", "x and y"};
    dc_tape *tape = dc_tape_new(ctx);
    for (int policy = 0; policy < 2; ++policy) {
        for (int use = 0; use < 3; ++use) {
            dc_tape_reset(tape);
            dc_tensor_zero_grad(r);
            dc_tensor_zero_grad(t);
            dc_tensor *in[2] = {r, t}, *out[2];
            TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, in, 2, out, (dc_partials_policy)policy));
            dc_tensor *lx = dc_op_sum(tape, dc_op_mul(tape, out[0], wx), 0, NULL, false);
            dc_tensor *ly = dc_op_sum(tape, dc_op_mul(tape, out[1], wy), 0, NULL, false);
            dc_tensor *loss = use == 0 ? lx : use == 1 ? ly : dc_op_add(tape, lx, ly);
            TEST_NONNULL(ctx, loss);
            TEST_OK(ctx, dc_backward(tape, loss));
            double dr[45], dt[45];
            const double ux = use != 1, uy = use != 0;
            for (int e = 0; e < n; ++e) {
                const double c = cos(tv[e]), s = sin(tv[e]);
                dr[e] = rv[e] < 0 ? 0.0 : ux * wxv[e] * c + uy * wyv[e] * s;
                dt[e] = rv[e] < 0 ? 0.0 : -ux * wxv[e] * rv[e] * s + uy * wyv[e] * rv[e] * c;
            }
            char what[96];
            snprintf(what, sizeof what, "dr, %s used, %s", uses[use], policy ? "recompute" : "store");
            check_grad(r, dr, 1e-15, 1e-13, what);
            snprintf(what, sizeof what, "dt, %s used, %s", uses[use], policy ? "recompute" : "store");
            check_grad(t, dt, 1e-15, 1e-13, what);
            if ((use == 0 && dc_tensor_grad(out[1])) || (use == 1 && dc_tensor_grad(out[0])))
                fail_msg("%s used: the unused output has a gradient, expected NULL", uses[use]);
        }
    }
    free(rv);
    free(tv);
    free(wxv);
    free(wyv);
    dc_tape_free(tape);
    dc_tensor_free(r);
    dc_tensor_free(t);
    dc_tensor_free(wx);
    dc_tensor_free(wy);
    dc_ctx_free(ctx);
}

/* ---- control inputs ---- */

typedef struct gated_case {
    dc_tensor *gate, *w;
    dc_partials_policy policy;
} gated_case;

static dc_tensor *gated_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const gated_case *k = user;
    dc_tensor *in[3] = {x[0], k->gate, x[1]}, *out[1];
    if (dc_broadcast_policy(tape, DC_BFN_REF(gated_scale), 3, in, 1, out, k->policy) != DC_OK)
        return NULL;
    return dc_op_sum(tape, dc_op_mul(tape, out[0], k->w), 0, NULL, false);
}

/* gated_scale(a [M, N], gate [M, 1], b [1, N]) with gate requiring a
 * gradient: gate gets none (nor what gate was computed from), a and b get
 * gate != 0: out = a (gate + b) -> da = w (gate + b), db = sum_rows w a;
 * gate == 0:  out = exp(a) - b  -> da = w exp(a),     db = -sum_rows w. */
static void test_control_input_gets_no_grad(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { M = 6, N = 11 };
    const int64_t sa[2] = {M, N}, sg[2] = {M, 1}, sb[2] = {1, N};
    const double gv[M] = {0.0, 0.5, -1.5, 0.0, 2.0, 0.0};
    dc_tensor *a = param(ctx, DC_F64, 2, sa, -1.0, 1.0), *b = param(ctx, DC_F64, 2, sb, -1.0, 1.0);
    dc_tensor *gp = test_tensor(ctx, DC_F64, 2, sg, gv);
    TEST_OK(ctx, dc_tensor_set_requires_grad(gp, true));
    dc_tensor *w = test_random(ctx, DC_F64, 2, sa, -1.0, 1.0);
    double *av = test_values(a), *bv = test_values(b), *wv = test_values(w);
    double da[M * N], db[N];
    for (int j = 0; j < N; ++j)
        db[j] = 0.0;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            const int e = i * N + j;
            da[e] = gv[i] != 0 ? wv[e] * (gv[i] + bv[j]) : wv[e] * exp(av[e]);
            db[j] += gv[i] != 0 ? wv[e] * av[e] : -wv[e];
        }
    dc_tape *tape = dc_tape_new(ctx);
    for (int policy = 0; policy < 2; ++policy) {
        for (int computed = 0; computed < 2; ++computed) {
            dc_tape_reset(tape);
            dc_tensor_zero_grad(a);
            dc_tensor_zero_grad(b);
            /* the gate itself, or the gate computed from a parameter */
            dc_tensor *gate = computed ? dc_op_affine(tape, gp, 1.0, 0.0) : gp;
            TEST_NONNULL(ctx, gate);
            assert_true(dc_tensor_requires_grad(gate));
            gated_case k = {gate, w, (dc_partials_policy)policy};
            dc_tensor *x[2] = {a, b};
            const size_t before = dc_tape_node_count(tape);
            dc_tensor *loss = gated_loss(tape, x, &k);
            TEST_NONNULL(ctx, loss);
            assert_int_equal(dc_tape_node_count(tape), before + 3);
            TEST_OK(ctx, dc_backward(tape, loss));
            if (dc_tensor_grad(gate) || dc_tensor_grad(gp))
                fail_msg("%s policy: the control input gate got a gradient; expected NULL",
                         policy ? "recompute" : "store");
            check_grad(a, da, 1e-14, 1e-12, policy ? "da (recompute)" : "da (store)");
            check_grad(b, db, 1e-14, 1e-12, policy ? "db (recompute)" : "db (store)");
        }
        /* central differences agree too (gate passed as a constant) */
        gated_case k = {gp, w, (dc_partials_policy)policy};
        dc_tensor *x[2] = {a, b};
        dc_gradcheck_report rep;
        TEST_OK(ctx, dc_gradcheck(ctx, gated_loss, &k, 2, x, NULL, &rep));
        assert_int_equal(rep.checked, M * N + N);
    }
    free(av);
    free(bv);
    free(wv);
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_tensor_free(gp);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- recompute vs store ---- */

enum { FN_CUPDATE, FN_POLAR, FN_GATED, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {"hmlstm_update_c", "polar_pair", "gated_scale"};

typedef struct policy_case {
    int fn;
    dc_tensor *ctrl[2]; /* control inputs */
    dc_tensor *p[4];    /* differentiable inputs, some broadcast */
    int n_p;
    dc_tensor *w[2]; /* output weights [M, N] */
} policy_case;

enum { PM = 48, PN = 203 };

static void policy_case_make(dc_ctx *ctx, dc_dtype dt, int fn, policy_case *k)
{
    memset(k, 0, sizeof *k);
    k->fn = fn;
    const int64_t full[2] = {PM, PN}, col[2] = {PM, 1}, row[2] = {1, PN};
    double zv[PM], zbv[PM], gv[PM];
    for (int i = 0; i < PM; ++i) {
        zv[i] = i % 3 == 0;
        zbv[i] = i % 2;
        gv[i] = i % 4 == 1 ? 0.0 : 0.25 * (i % 5) - 0.5;
    }
    for (int o = 0; o < 2; ++o)
        k->w[o] = test_random(ctx, dt, 2, full, -1.0, 1.0);
    switch (fn) {
    case FN_CUPDATE: /* z, zb [M, 1]; c [M, N], f [1, N], i [M, N], g [M, 1] */
        k->ctrl[0] = test_tensor(ctx, dt, 2, col, zv);
        k->ctrl[1] = test_tensor(ctx, dt, 2, col, zbv);
        k->n_p = 4;
        k->p[0] = param(ctx, dt, 2, full, -2.0, 2.0);
        k->p[1] = param(ctx, dt, 2, row, -2.0, 2.0);
        k->p[2] = param(ctx, dt, 2, full, -2.0, 2.0);
        k->p[3] = param(ctx, dt, 2, col, -2.0, 2.0);
        break;
    case FN_POLAR: /* r [M, 1] (some negative), t [1, N] */
        k->n_p = 2;
        k->p[0] = param(ctx, dt, 2, col, -0.5, 2.0);
        k->p[1] = param(ctx, dt, 2, row, -3.0, 3.0);
        break;
    default: /* a [M, N], gate [M, 1], b [1, N] */
        k->ctrl[0] = test_tensor(ctx, dt, 2, col, gv);
        k->n_p = 2;
        k->p[0] = param(ctx, dt, 2, full, -1.0, 1.0);
        k->p[1] = param(ctx, dt, 2, row, -1.0, 1.0);
        break;
    }
}

static void policy_case_free(policy_case *k)
{
    for (int i = 0; i < 2; ++i) {
        dc_tensor_free(k->ctrl[i]);
        dc_tensor_free(k->w[i]);
    }
    for (int i = 0; i < k->n_p; ++i)
        dc_tensor_free(k->p[i]);
}

/* One step on a fresh tape: gradients (malloc'd) and the tape's peak bytes. */
static size_t policy_case_run(dc_ctx *ctx, policy_case *k, dc_partials_policy policy, double **grads)
{
    dc_tape *tape = dc_tape_new(ctx);
    for (int i = 0; i < k->n_p; ++i)
        dc_tensor_zero_grad(k->p[i]);
    dc_tensor *in[6], *out[2];
    int n_in, n_out = 1;
    const dc_bfn *fn;
    switch (k->fn) {
    case FN_CUPDATE:
        fn = DC_BFN_REF(hmlstm_update_c);
        in[0] = k->ctrl[0];
        in[1] = k->ctrl[1];
        for (int i = 0; i < 4; ++i)
            in[2 + i] = k->p[i];
        n_in = 6;
        break;
    case FN_POLAR:
        fn = DC_BFN_REF(polar_pair);
        in[0] = k->p[0];
        in[1] = k->p[1];
        n_in = 2;
        n_out = 2;
        break;
    default:
        fn = DC_BFN_REF(gated_scale);
        in[0] = k->p[0];
        in[1] = k->ctrl[0];
        in[2] = k->p[1];
        n_in = 3;
        break;
    }
    TEST_OK(ctx, dc_broadcast_policy(tape, fn, n_in, in, n_out, out, policy));
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, out[0], k->w[0]), 0, NULL, false);
    if (n_out == 2)
        loss = dc_op_add(tape, loss, dc_op_sum(tape, dc_op_mul(tape, out[1], k->w[1]), 0, NULL, false));
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    for (int i = 0; i < k->n_p; ++i)
        grads[i] = grad_of(k->p[i], fn_names[k->fn]);
    const size_t peak = dc_tape_peak_bytes(tape);
    dc_tape_free(tape);
    return peak;
}

/* The recompute policy's gradients equal the store policy's (to 1e-6
 * relative in f32, 1e-12 in f64) with broadcast inputs, and its step peaks
 * lower by at least the partials the store policy keeps. */
static void test_recompute_matches_store(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const dc_dtype dtypes[2] = {DC_F32, DC_F64};
    for (int d = 0; d < 2; ++d) {
        const dc_dtype dt = dtypes[d];
        for (int fn = 0; fn < FN_COUNT; ++fn) {
            policy_case k;
            policy_case_make(ctx, dt, fn, &k);
            double *gs[4], *gr[4];
            const size_t peak_store = policy_case_run(ctx, &k, DC_PARTIALS_STORE, gs);
            const size_t peak_rec = policy_case_run(ctx, &k, DC_PARTIALS_RECOMPUTE, gr);
            for (int i = 0; i < k.n_p; ++i) {
                char what[96];
                snprintf(what, sizeof what, "%s %s input %d: recompute vs store", dc_dtype_name(dt), fn_names[fn], i);
                assert_close_scaled(gr[i], gs[i], dc_tensor_numel(k.p[i]), dt == DC_F32 ? 1e-6 : 1e-12, what);
                free(gs[i]);
                free(gr[i]);
            }
            const int n_out = fn == FN_POLAR ? 2 : 1;
            const size_t partials = (size_t)n_out * (size_t)k.n_p * PM * PN * dc_dtype_size(dt);
            if (!(peak_rec + partials <= peak_store))
                fail_msg("%s %s: peak tape bytes %zu with recompute, %zu with store; expected recompute lower by at "
                         "least the %zu bytes of partials",
                         dc_dtype_name(dt), fn_names[fn], peak_rec, peak_store, partials);
            policy_case_free(&k);
        }
    }
    dc_ctx_free(ctx);
}

/* ---- the same input twice ---- */

/* polar_pair(x, x) and gated_scale(x, gate, x) with x broadcast [1, N]
 * against gate [M, 1]: both contributions add up, under both policies.
 *   polar: dx = wx (cos x - x sin x) + wy (sin x + x cos x), 0 where x < 0
 *   gated: dx[j] = sum_i w[i, j] (gate[i] != 0 ? gate[i] + 2 x[j] : exp(x[j]) - 1) */
static void test_same_input_twice(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { M = 5, N = 13 };
    const int64_t sf[2] = {M, N}, sr[2] = {1, N}, sc[2] = {M, 1};
    const double gv[M] = {0.0, 1.5, -0.5, 0.0, 2.0};
    dc_tensor *x = param(ctx, DC_F64, 2, sf, -0.5, 2.0), *xr = param(ctx, DC_F64, 2, sr, -1.0, 1.0);
    dc_tensor *gate = test_tensor(ctx, DC_F64, 2, sc, gv);
    dc_tensor *wx = test_random(ctx, DC_F64, 2, sf, -1.0, 1.0), *wy = test_random(ctx, DC_F64, 2, sf, -1.0, 1.0);
    double *xv = test_values(x), *xrv = test_values(xr), *wxv = test_values(wx), *wyv = test_values(wy);
    double want_p[M * N], want_g[N];
    for (int e = 0; e < M * N; ++e) {
        const double v = xv[e], c = cos(v), s = sin(v);
        want_p[e] = v < 0 ? 0.0 : wxv[e] * (c - v * s) + wyv[e] * (s + v * c);
    }
    for (int j = 0; j < N; ++j) {
        want_g[j] = 0.0;
        for (int i = 0; i < M; ++i)
            want_g[j] += wxv[i * N + j] * (gv[i] != 0 ? gv[i] + 2.0 * xrv[j] : exp(xrv[j]) - 1.0);
    }
    dc_tape *tape = dc_tape_new(ctx);
    for (int policy = 0; policy < 2; ++policy) {
        const char *pname = policy ? "recompute" : "store";
        char what[96];
        dc_tape_reset(tape);
        dc_tensor_zero_grad(x);
        dc_tensor *pin[2] = {x, x}, *pout[2];
        TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, pin, 2, pout, (dc_partials_policy)policy));
        dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, pout[0], wx), 0, NULL, false),
                                    dc_op_sum(tape, dc_op_mul(tape, pout[1], wy), 0, NULL, false));
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        snprintf(what, sizeof what, "dx of polar_pair(x, x), %s", pname);
        check_grad(x, want_p, 1e-14, 1e-12, what);

        dc_tape_reset(tape);
        dc_tensor_zero_grad(xr);
        dc_tensor *gin[3] = {xr, gate, xr}, *gout[1];
        TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(gated_scale), 3, gin, 1, gout, (dc_partials_policy)policy));
        loss = dc_op_sum(tape, dc_op_mul(tape, gout[0], wx), 0, NULL, false);
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        snprintf(what, sizeof what, "dx of gated_scale(x [1, N], gate, x), %s", pname);
        check_grad(xr, want_g, 1e-14, 1e-12, what);

        /* x also used outside the node: its own path adds on top. */
        dc_tape_reset(tape);
        dc_tensor_zero_grad(x);
        TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, pin, 2, pout, (dc_partials_policy)policy));
        loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, pout[0], wx), 0, NULL, false),
                         dc_op_sum(tape, dc_op_mul(tape, pout[1], wy), 0, NULL, false));
        loss = dc_op_add(tape, loss, dc_op_sum(tape, x, 0, NULL, false));
        TEST_OK(ctx, dc_backward(tape, loss));
        double plus1[M * N];
        for (int e = 0; e < M * N; ++e)
            plus1[e] = want_p[e] + 1.0;
        snprintf(what, sizeof what, "dx of polar_pair(x, x) + sum(x), %s", pname);
        check_grad(x, plus1, 1e-14, 1e-12, what);
    }
    free(xv);
    free(xrv);
    free(wxv);
    free(wyv);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(xr);
    dc_tensor_free(gate);
    dc_tensor_free(wx);
    dc_tensor_free(wy);
    dc_ctx_free(ctx);
}

/* DC_POISON=1, read when a context is made: the gradient left behind by
 * dc_tensor_zero_grad holds NaN (a read before the next backward writes it
 * would show), and the next backward still gives the right gradient. */
static void test_poison_mode(void **state)
{
    (void)state;
    const char *before = getenv("DC_POISON");
    char *saved = before ? strdup(before) : NULL;
    setenv("DC_POISON", "1", 1);
    dc_ctx *ctx = test_cpu_ctx();
    if (saved)
        setenv("DC_POISON", saved, 1);
    else
        unsetenv("DC_POISON");
    free(saved);
    const int64_t shape[1] = {5};
    dc_tensor *x = test_random(ctx, DC_F64, 1, shape, -1, 1);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    for (int round = 0; round < 2; ++round) {
        dc_tape *tape = dc_tape_new(ctx);
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, dc_op_affine(tape, x, 3.0, 1.0), 0, NULL, false)));
        dc_tensor *g = dc_tensor_grad(x);
        TEST_NONNULL(ctx, g);
        for (int64_t i = 0; i < 5; ++i) {
            double v;
            TEST_OK(ctx, dc_tensor_get(g, i, &v));
            if (v != 3.0)
                fail_msg("round %d: gradient element %lld is %g, expected 3", round, (long long)i, v);
        }
        dc_tensor_zero_grad(x);
        for (int64_t i = 0; i < 5; ++i) {
            double v;
            TEST_OK(ctx, dc_tensor_get(g, i, &v));
            if (!isnan(v))
                fail_msg("round %d: after zero_grad, element %lld of the old gradient is %g, not NaN", round,
                         (long long)i, v);
        }
        dc_tape_free(tape);
    }
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_graph_both_dtypes),
        cmocka_unit_test(test_accumulate_within_graph),
        cmocka_unit_test(test_accumulate_across_steps),
        cmocka_unit_test(test_no_grad_mode),
        cmocka_unit_test(test_no_grad_inputs_record_nothing),
        cmocka_unit_test(test_backward_with_adjoints),
        cmocka_unit_test(test_gradient_seed_into_a_slice_adds),
        cmocka_unit_test(test_broadcast_seed_through_ops),
        cmocka_unit_test(test_reset_steady_state_small),
        cmocka_unit_test(test_reset_steady_state_multiblock),
        cmocka_unit_test(test_growing_steps_keep_memory_bounded),
        cmocka_unit_test(test_tensor_after_reset_refused),
        cmocka_unit_test(test_out_of_memory_names_the_op),
        cmocka_unit_test(test_intermediate_grads),
        cmocka_unit_test(test_bfn_is_one_node),
        cmocka_unit_test(test_multi_output_partial_use),
        cmocka_unit_test(test_control_input_gets_no_grad),
        cmocka_unit_test(test_recompute_matches_store),
        cmocka_unit_test(test_same_input_twice),
        cmocka_unit_test(test_poison_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
