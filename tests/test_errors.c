/* Bad input: every case returns the documented dc_status with a message that
 * names the function and the offending values, never crashes, and leaks
 * nothing (the sanitizer build runs this under LeakSanitizer). A failed call
 * also leaves the tape usable. */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

/* ---- helpers ---- */

/* Fails unless `msg` contains every word of the NULL-terminated list. */
static void expect_words(const char *what, const char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *)) {
        if (!msg || !strstr(msg, w)) {
            va_end(ap);
            fail_msg("%s: expected the message to contain \"%s\", got \"%s\"", what, w, msg ? msg : "(null)");
        }
    }
    va_end(ap);
}

/* Fails unless got == want. */
static void expect_status(const char *what, dc_status got, dc_status want, const char *msg)
{
    if (got != want)
        fail_msg("%s: expected %s, got %s (message \"%s\")", what, dc_status_name(want), dc_status_name(got),
                 msg ? msg : "");
}

/* An op that must have failed: NULL result, message with the given words. */
#define EXPECT_OP_FAILS(ctx, expr, ...)                                                                                \
    do {                                                                                                               \
        dc_clear_error(ctx);                                                                                           \
        const void *res_ = (expr);                                                                                     \
        if (res_)                                                                                                      \
            fail_msg("%s: expected NULL, got a result", #expr);                                                        \
        expect_words(#expr, dc_last_error(ctx), __VA_ARGS__, (const char *)NULL);                                      \
    } while (0)

/* A call that must return `want`, with the given words in the message. */
#define EXPECT_STATUS(ctx, expr, want, ...)                                                                            \
    do {                                                                                                               \
        dc_clear_error(ctx);                                                                                           \
        dc_status st_ = (expr);                                                                                        \
        expect_status(#expr, st_, (want), dc_last_error(ctx));                                                         \
        expect_words(#expr, dc_last_error(ctx), __VA_ARGS__, (const char *)NULL);                                      \
    } while (0)

/* After failures the tape still records and runs backward: d sum(x * x) = 2x. */
static void expect_tape_usable(dc_ctx *ctx, dc_tape *tape)
{
    dc_tape_reset(tape);
    const int64_t shape[1] = {3};
    const double v[3] = {1.0, -2.0, 0.5};
    dc_tensor *x = test_tensor(ctx, DC_F64, 1, shape, v);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, x, x), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    double *g = test_values(dc_tensor_grad(x));
    const double want[3] = {2.0, -4.0, 1.0};
    test_assert_close(g, want, 3, 0, 0, "gradient on the tape after failed calls");
    free(g);
    dc_tensor_free(x);
    dc_tape_reset(tape);
}

static dc_tensor *f64_tensor(dc_ctx *ctx, int ndim, const int64_t *shape)
{
    dc_tensor *t = test_random(ctx, DC_F64, ndim, shape, 0.5, 1.5);
    return t;
}

/* ---- shapes that do not broadcast ---- */

static void test_elementwise_shape_mismatch(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s21[2] = {2, 1}, s33[2] = {3, 3};
    dc_tensor *a = f64_tensor(ctx, 2, s23), *b = f64_tensor(ctx, 2, s45);
    dc_tensor *c = f64_tensor(ctx, 2, s21), *d = f64_tensor(ctx, 2, s33);
    TEST_OK(ctx, dc_tensor_set_requires_grad(a, true));
    dc_tape *tape = dc_tape_new(ctx);
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, a, b), "dc_op_add", "[2, 3]", "[4, 5]", "broadcast");
    EXPECT_OP_FAILS(ctx, dc_op_sub(tape, b, a), "dc_op_sub", "[4, 5]", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_mul(tape, a, b), "dc_op_mul", "[2, 3]", "[4, 5]");
    EXPECT_OP_FAILS(ctx, dc_op_div(tape, a, b), "dc_op_div", "[2, 3]", "[4, 5]");
    EXPECT_OP_FAILS(ctx, dc_op_pow(tape, a, b), "dc_op_pow", "[2, 3]", "[4, 5]");
    /* select: cond [2, 1] and b [3, 3] conflict on the first axis */
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, c, a, d), "dc_op_select", "[2, 1]", "[3, 3]");
    if (dc_tape_node_count(tape) != 0)
        fail_msg("failed ops recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_tensor_free(c);
    dc_tensor_free(d);
    dc_ctx_free(ctx);
}

static void test_broadcast_shape_mismatch(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s34[2] = {3, 4}, s35[2] = {3, 5}, s31[2] = {3, 1}, s23[2] = {2, 3}, s32[2] = {3, 2};
    dc_tensor *z = f64_tensor(ctx, 2, s31), *zb = f64_tensor(ctx, 2, s31);
    dc_tensor *c = f64_tensor(ctx, 2, s34), *f = f64_tensor(ctx, 2, s35);
    dc_tensor *r = f64_tensor(ctx, 2, s23), *t = f64_tensor(ctx, 2, s32);
    TEST_OK(ctx, dc_tensor_set_requires_grad(c, true));
    dc_tape *tape = dc_tape_new(ctx);
    for (int policy = 0; policy < 2; ++policy) {
        dc_tensor *in[6] = {z, zb, c, f, c, c}, *out[1] = {z};
        EXPECT_STATUS(ctx,
                      dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, out, (dc_partials_policy)policy),
                      DC_ERR_SHAPE, "dc_broadcast(hmlstm_update_c)", "[3, 4]", "[3, 5]", "c ", "f ");
        if (out[0])
            fail_msg("a failed dc_broadcast left a non-NULL output");
    }
    dc_tensor *pin[2] = {r, t}, *pout[2];
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, pin, 2, pout), DC_ERR_SHAPE,
                  "dc_broadcast(polar_pair)", "[2, 3]", "[3, 2]");
    dc_tensor *gin[3] = {c, z, r};
    EXPECT_OP_FAILS(ctx, dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, gin), "dc_broadcast(gated_scale)", "[3, 4]",
                    "[2, 3]");
    if (dc_tape_node_count(tape) != 0)
        fail_msg("failed broadcasts recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tensor_free(z);
    dc_tensor_free(zb);
    dc_tensor_free(c);
    dc_tensor_free(f);
    dc_tensor_free(r);
    dc_tensor_free(t);
    dc_ctx_free(ctx);
}

/* ---- wrong arity and other bad arguments to dc_broadcast ---- */

static void test_broadcast_arity(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s[2] = {2, 3};
    dc_tensor *x[7];
    for (int k = 0; k < 7; ++k)
        x[k] = f64_tensor(ctx, 2, s);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *out[2];
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 5, x, 1, out), DC_ERR_ARG,
                  "dc_broadcast(hmlstm_update_c)", "expects 6 inputs", "z (control), zb (control), c, f, i, g",
                  "got 5");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 7, x, 1, out), DC_ERR_ARG, "expects 6 inputs",
                  "got 7");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), -1, x, 1, out), DC_ERR_ARG, "expects 6 inputs",
                  "got -1");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(gated_scale), 2, x, 1, out), DC_ERR_ARG,
                  "dc_broadcast(gated_scale)", "expects 3 inputs", "a, gate (control), b");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, x, 2, out), DC_ERR_ARG,
                  "dc_broadcast(hmlstm_update_c)", "1 outputs", "2");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, x, 1, out), DC_ERR_ARG, "dc_broadcast(polar_pair)",
                  "2 outputs", "1");
    EXPECT_OP_FAILS(ctx, dc_broadcast1(tape, DC_BFN_REF(polar_pair), 2, x), "dc_broadcast1(polar_pair)", "2 outputs",
                    "dc_broadcast");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, NULL, 2, out), DC_ERR_ARG,
                  "dc_broadcast(polar_pair)", "inputs", "NULL");
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, x, 2, NULL), DC_ERR_ARG,
                  "dc_broadcast(polar_pair)", "outputs", "NULL");
    EXPECT_STATUS(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, x, 2, out, (dc_partials_policy)7),
                  DC_ERR_ARG, "dc_broadcast(polar_pair)", "policy", "7");
    if (dc_tape_node_count(tape) != 0)
        fail_msg("failed broadcasts recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    for (int k = 0; k < 7; ++k)
        dc_tensor_free(x[k]);
    dc_ctx_free(ctx);
}

/* ---- NULL arguments ---- */

/* Without a tape there is no context for a message: the status is enough. */
static void test_null_tape(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s[2] = {2, 2};
    dc_tensor *a = f64_tensor(ctx, 2, s), *b = f64_tensor(ctx, 2, s);
    TEST_OK(ctx, dc_tensor_set_requires_grad(a, true));
    const int axis[1] = {0};
    const int64_t s4[1] = {4};
    dc_tensor *got[20];
    int n = 0;
    got[n++] = dc_op_add(NULL, a, b);
    got[n++] = dc_op_sub(NULL, a, b);
    got[n++] = dc_op_mul(NULL, a, b);
    got[n++] = dc_op_div(NULL, a, b);
    got[n++] = dc_op_pow(NULL, a, b);
    got[n++] = dc_op_affine(NULL, a, 1.0, 0.0);
    got[n++] = dc_op_neg(NULL, a);
    got[n++] = dc_op_exp(NULL, a);
    got[n++] = dc_op_log(NULL, a);
    got[n++] = dc_op_tanh(NULL, a);
    got[n++] = dc_op_sigmoid(NULL, a);
    got[n++] = dc_op_relu(NULL, a);
    got[n++] = dc_op_select(NULL, b, a, b);
    got[n++] = dc_op_sum(NULL, a, 1, axis, false);
    got[n++] = dc_op_mean(NULL, a, 0, NULL, false);
    got[n++] = dc_op_matmul(NULL, a, b);
    got[n++] = dc_op_transpose(NULL, a, 0, 1);
    got[n++] = dc_op_reshape(NULL, a, 1, s4);
    dc_tensor *in[2] = {a, b}, *out[2] = {NULL, NULL};
    got[n++] = dc_broadcast1(NULL, DC_BFN_REF(gated_scale), 3, (dc_tensor *[3]){a, b, b});
    got[n++] = dc_tape_scalar(NULL, DC_F64, 1.0);
    for (int k = 0; k < n; ++k)
        if (got[k])
            fail_msg("call %d with a NULL tape: expected NULL, got a tensor", k);
    expect_status("dc_broadcast(NULL tape)", dc_broadcast(NULL, DC_BFN_REF(polar_pair), 2, in, 2, out), DC_ERR_ARG, "");
    expect_status("dc_broadcast_policy(NULL tape)",
                  dc_broadcast_policy(NULL, DC_BFN_REF(polar_pair), 2, in, 2, out, DC_PARTIALS_RECOMPUTE), DC_ERR_ARG,
                  "");
    expect_status("dc_backward(NULL tape)", dc_backward(NULL, a), DC_ERR_ARG, "");
    expect_status("dc_backward_with(NULL tape)", dc_backward_with(NULL, a, b), DC_ERR_ARG, "");
    if (dc_tape_new(NULL))
        fail_msg("dc_tape_new(NULL): expected NULL");
    if (dc_tape_tensor_new(NULL, DC_F64, 2, s, NULL))
        fail_msg("dc_tape_tensor_new(NULL, ...): expected NULL");
    dc_tape_reset(NULL);
    dc_tape_free(NULL);
    assert_false(dc_tape_set_recording(NULL, true));
    assert_false(dc_tape_is_recording(NULL));
    assert_int_equal(dc_tape_node_count(NULL), 0);
    assert_int_equal(dc_tape_bytes_in_use(NULL), 0);
    assert_int_equal(dc_tape_peak_bytes(NULL), 0);
    assert_int_equal(dc_tape_reserved_bytes(NULL), 0);
    assert_null(dc_tape_ctx(NULL));
    /* NULL tensors and contexts elsewhere */
    double v;
    expect_status("dc_tensor_set_requires_grad(NULL)", dc_tensor_set_requires_grad(NULL, true), DC_ERR_ARG, "");
    expect_status("dc_tensor_item(NULL)", dc_tensor_item(NULL, &v), DC_ERR_ARG, "");
    expect_status("dc_tensor_item(t, NULL)", dc_tensor_item(a, NULL), DC_ERR_ARG, "");
    expect_status("dc_tensor_fill(NULL)", dc_tensor_fill(NULL, 1.0), DC_ERR_ARG, "");
    expect_status("dc_tensor_copy(NULL, t)", dc_tensor_copy(NULL, a), DC_ERR_ARG, "");
    expect_status("dc_gradcheck(NULL ctx)", dc_gradcheck(NULL, NULL, NULL, 1, &a, NULL, NULL), DC_ERR_ARG, "");
    expect_status("dc_ctx_synchronize(NULL)", dc_ctx_synchronize(NULL), DC_ERR_ARG, "");
    assert_null(dc_tensor_grad(NULL));
    assert_null(dc_tensor_new(NULL, DC_F64, 2, s));
    dc_tensor_zero_grad(NULL);
    dc_tensor_set_name(NULL, "x");
    dc_tensor_free(NULL);
    dc_ctx_free(NULL);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_ctx_free(ctx);
}

/* A NULL input to every kind of op: NULL back, the message names the op and
 * the input (and, with no earlier error, nothing else). */
static void test_null_input_every_op(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s[2] = {2, 2}, s4[1] = {4}, col[2] = {2, 1};
    dc_tensor *a = f64_tensor(ctx, 2, s), *z = f64_tensor(ctx, 2, col);
    TEST_OK(ctx, dc_tensor_set_requires_grad(a, true));
    dc_tape *tape = dc_tape_new(ctx);
    const int axis[1] = {0};
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, NULL, a), "dc_op_add: input a is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, a, NULL), "dc_op_add: input b is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_sub(tape, a, NULL), "dc_op_sub: input b is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_mul(tape, NULL, a), "dc_op_mul: input a is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_div(tape, a, NULL), "dc_op_div: input b is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_pow(tape, NULL, a), "dc_op_pow: input a is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_affine(tape, NULL, 2.0, 1.0), "dc_op_affine: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_neg(tape, NULL), "dc_op_neg: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_exp(tape, NULL), "dc_op_exp: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_log(tape, NULL), "dc_op_log: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_tanh(tape, NULL), "dc_op_tanh: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_sigmoid(tape, NULL), "dc_op_sigmoid: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_relu(tape, NULL), "dc_op_relu: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, NULL, a, a), "dc_op_select: input cond is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, z, NULL, a), "dc_op_select: input a is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, z, a, NULL), "dc_op_select: input b is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_sum(tape, NULL, 1, axis, true), "dc_op_sum: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_mean(tape, NULL, 0, NULL, false), "dc_op_mean: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, NULL, a), "dc_op_matmul: input a is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, a, NULL), "dc_op_matmul: input b is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_transpose(tape, NULL, 0, 1), "dc_op_transpose: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, NULL, 1, s4), "dc_op_reshape: input x is NULL");
    dc_tensor *in6[6] = {z, z, a, NULL, a, a}, *out[2] = {a, a};
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out), DC_ERR_ARG,
                  "dc_broadcast(hmlstm_update_c): input f is NULL");
    if (out[0])
        fail_msg("dc_broadcast with a NULL input left a non-NULL output");
    dc_tensor *in3[3] = {a, NULL, a};
    EXPECT_STATUS(ctx, dc_broadcast_policy(tape, DC_BFN_REF(gated_scale), 3, in3, 1, out, DC_PARTIALS_RECOMPUTE),
                  DC_ERR_ARG, "dc_broadcast(gated_scale): input gate is NULL");
    dc_tensor *in2[2] = {NULL, a};
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, in2, 2, out), DC_ERR_ARG,
                  "dc_broadcast(polar_pair): input r is NULL");
    /* With no earlier error there is no "(after: ...)" part. */
    dc_clear_error(ctx);
    assert_null(dc_op_exp(tape, NULL));
    if (strstr(dc_last_error(ctx), "after"))
        fail_msg("a NULL input with no earlier error: expected no cause, got \"%s\"", dc_last_error(ctx));

    /* NULL function, NULL loss, NULL adjoint */
    dc_tensor *pin[2] = {a, a};
    EXPECT_STATUS(ctx, dc_broadcast(tape, NULL, 2, pin, 2, out), DC_ERR_ARG, "dc_broadcast", "function", "NULL");
    EXPECT_OP_FAILS(ctx, dc_broadcast1(tape, NULL, 2, pin), "dc_broadcast", "function", "NULL");
    EXPECT_STATUS(ctx, dc_backward(tape, NULL), DC_ERR_ARG, "dc_backward", "NULL");
    dc_tensor *y = dc_op_mul(tape, a, a);
    TEST_NONNULL(ctx, y);
    EXPECT_STATUS(ctx, dc_backward(tape, NULL), DC_ERR_ARG, "dc_backward", "NULL");
    EXPECT_STATUS(ctx, dc_backward_with(tape, NULL, a), DC_ERR_ARG, "dc_backward_with", "NULL");
    EXPECT_STATUS(ctx, dc_backward_with(tape, y, NULL), DC_ERR_ARG, "dc_backward_with", "adjoint", "NULL");
    if (dc_tensor_grad(a))
        fail_msg("failed backward calls left a gradient");
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(z);
    dc_ctx_free(ctx);
}

/* A NULL made by a failed op carries its cause down a chain of ops. */
static void test_null_from_failed_op_keeps_cause(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, col[2] = {2, 1};
    dc_tensor *a = f64_tensor(ctx, 2, s23), *b = f64_tensor(ctx, 2, s45), *z = f64_tensor(ctx, 2, col);
    TEST_OK(ctx, dc_tensor_set_requires_grad(a, true));
    dc_tape *tape = dc_tape_new(ctx);
    dc_clear_error(ctx);
    dc_tensor *y = dc_op_add(tape, a, b);
    assert_null(y);
    dc_tensor *e = dc_op_exp(tape, y);
    assert_null(e);
    expect_words("exp of a failed add", dc_last_error(ctx), "dc_op_exp: input x is NULL", "dc_op_add", "[2, 3]",
                 "[4, 5]", (const char *)NULL);
    /* and its status */
    expect_status("exp of a failed add", dc_last_status(ctx), DC_ERR_SHAPE, dc_last_error(ctx));
    dc_tensor *s = dc_op_sum(tape, dc_op_mul(tape, a, e), 0, NULL, false);
    assert_null(s);
    expect_words("sum(mul(a, exp(failed add)))", dc_last_error(ctx), "dc_op_sum", "dc_op_mul", "dc_op_exp", "dc_op_add",
                 "[4, 5]", (const char *)NULL);
    dc_tensor *in6[6] = {z, z, a, a, s, a}, *out[1];
    dc_clear_error(ctx);
    assert_null(dc_op_log(tape, dc_op_matmul(tape, a, a)));
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out), DC_ERR_ARG,
                  "dc_broadcast(hmlstm_update_c): input i is NULL");
    /* the broadcast keeps the cause as the ops do */
    dc_clear_error(ctx);
    assert_null(dc_op_add(tape, a, b));
    dc_status st = dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out);
    expect_status("dc_broadcast after a failed add", st, DC_ERR_SHAPE, dc_last_error(ctx));
    expect_words("dc_broadcast after a failed add", dc_last_error(ctx), "input i is NULL", "dc_op_add", "[4, 5]",
                 (const char *)NULL);
    /* and so does backward on the NULL end of a failed chain */
    dc_clear_error(ctx);
    st = dc_backward(tape, dc_op_add(tape, a, b));
    expect_status("dc_backward of a failed add", st, DC_ERR_SHAPE, dc_last_error(ctx));
    expect_words("dc_backward of a failed add", dc_last_error(ctx), "dc_backward: the output is NULL", "dc_op_add",
                 (const char *)NULL);
    if (dc_tape_node_count(tape) != 0)
        fail_msg("a failed chain recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_tensor_free(z);
    dc_ctx_free(ctx);
}

/* ---- backward out of order or on the wrong tensor ---- */

static void test_backward_state_errors(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3};
    dc_tensor *x = f64_tensor(ctx, 2, s23), *w = f64_tensor(ctx, 2, s23);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(ctx), *other = dc_tape_new(ctx);

    /* on a reset tape, with the old loss pointer */
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, x, w), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    dc_tape_reset(tape);
    EXPECT_STATUS(ctx, dc_backward(tape, loss), DC_ERR_STATE, "dc_backward", "reset");
    if (dc_tensor_grad(x))
        fail_msg("backward on a reset tape wrote a gradient");

    /* twice */
    loss = dc_op_sum(tape, dc_op_mul(tape, x, w), 0, NULL, false);
    TEST_OK(ctx, dc_backward(tape, loss));
    EXPECT_STATUS(ctx, dc_backward(tape, loss), DC_ERR_STATE, "dc_backward", "already", "dc_tape_reset");
    EXPECT_STATUS(ctx, dc_backward_with(tape, loss, loss), DC_ERR_STATE, "dc_backward_with", "already");
    double *g = test_values(dc_tensor_grad(x)), *wv = test_values(w);
    test_assert_close(g, wv, 6, 0, 0, "dx after a refused second backward (must not have added)");
    free(g);
    free(wv);
    dc_tensor_zero_grad(x);

    /* a loss with more than one element */
    dc_tape_reset(tape);
    dc_tensor *y = dc_op_mul(tape, x, w);
    TEST_NONNULL(ctx, y);
    EXPECT_STATUS(ctx, dc_backward(tape, y), DC_ERR_SHAPE, "dc_backward", "[2, 3]", "6 elements", "dc_backward_with");

    /* tensors not recorded on this tape */
    EXPECT_STATUS(ctx, dc_backward(tape, x), DC_ERR_ARG, "dc_backward", "not computed on this tape");
    dc_tensor *elsewhere = dc_op_sum(other, dc_op_mul(other, x, w), 0, NULL, false);
    TEST_NONNULL(ctx, elsewhere);
    EXPECT_STATUS(ctx, dc_backward(tape, elsewhere), DC_ERR_ARG, "dc_backward", "not computed on this tape");
    bool was = dc_tape_set_recording(tape, false);
    dc_tensor *unrecorded = dc_op_sum(tape, dc_op_mul(tape, x, w), 0, NULL, false);
    dc_tape_set_recording(tape, was);
    TEST_NONNULL(ctx, unrecorded);
    EXPECT_STATUS(ctx, dc_backward(tape, unrecorded), DC_ERR_ARG, "dc_backward", "not computed on this tape");
    if (dc_tensor_grad(x))
        fail_msg("refused backward calls wrote a gradient");

    /* adjoints that do not broadcast to the output's [2, 3] */
    const int64_t s4[1] = {4}, s33[2] = {3, 3}, s123[3] = {1, 2, 3}, s21[2] = {2, 1};
    dc_tensor *bad[3] = {f64_tensor(ctx, 1, s4), f64_tensor(ctx, 2, s33), f64_tensor(ctx, 3, s123)};
    const char *bad_str[3] = {"[4]", "[3, 3]", "[1, 2, 3]"};
    for (int k = 0; k < 3; ++k)
        EXPECT_STATUS(ctx, dc_backward_with(tape, y, bad[k]), DC_ERR_SHAPE, "dc_backward_with", bad_str[k], "[2, 3]");
    dc_tensor *f32adj = dc_tensor_new(ctx, DC_F32, 2, s23);
    EXPECT_STATUS(ctx, dc_backward_with(tape, y, f32adj), DC_ERR_DTYPE, "dc_backward_with", "f32", "f64");
    if (dc_tensor_grad(x))
        fail_msg("refused dc_backward_with calls wrote a gradient");
    /* the tape is still good for a correct seed after the refusals */
    const double col[2] = {2.0, -1.0};
    dc_tensor *ok = test_tensor(ctx, DC_F64, 2, s21, col);
    TEST_OK(ctx, dc_backward_with(tape, y, ok));
    double *gx = test_values(dc_tensor_grad(x));
    wv = test_values(w);
    for (int e = 0; e < 6; ++e)
        wv[e] *= col[e / 3];
    test_assert_close(gx, wv, 6, 0, 1e-15, "dx after refused seeds and a good one");
    free(gx);
    free(wv);

    for (int k = 0; k < 3; ++k)
        dc_tensor_free(bad[k]);
    dc_tensor_free(f32adj);
    dc_tensor_free(ok);
    dc_tape_free(tape);
    dc_tape_free(other);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- dtypes ---- */

static dc_tensor *sum_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    (void)user;
    return dc_op_sum(tape, dc_op_mul(tape, x[0], x[0]), 0, NULL, false);
}

/* sum(x + other) with other of a shape that does not broadcast with x's:
 * always (user->always) or only in the numeric evaluations (recording off);
 * silent: NULL without any error instead. */
typedef struct failing_case {
    dc_tensor *good, *bad;
    bool always, silent;
} failing_case;

static dc_tensor *failing_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const failing_case *k = user;
    if (k->silent)
        return NULL;
    dc_tensor *other = (k->always || !dc_tape_is_recording(tape)) ? k->bad : k->good;
    return dc_op_sum(tape, dc_op_add(tape, x[0], other), 0, NULL, false);
}

/* dc_gradcheck with a loss function that returns NULL, in its first
 * (recorded) evaluation or in a later numeric one: the status of the cause
 * (DC_ERR_SHAPE, the failed dc_op_add), whose message, with its shapes, is
 * kept; a function that returns NULL reporting nothing: DC_ERR_ARG, which
 * says so. The messages are copied and everything freed before checking
 * them. */
static void test_gradcheck_reports_failing_function(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5};
    dc_tensor *x = f64_tensor(ctx, 2, s23);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    failing_case k = {f64_tensor(ctx, 2, s23), f64_tensor(ctx, 2, s45), true, false};
    double before[6], after[6];
    TEST_OK(ctx, dc_tensor_to_host(x, before, sizeof before));
    dc_status st[3];
    char msg[3][1024];
    for (int c = 0; c < 3; ++c) {
        k.always = c == 0;
        k.silent = c == 2;
        dc_clear_error(ctx);
        st[c] = dc_gradcheck(ctx, failing_loss, &k, 1, &x, NULL, NULL);
        snprintf(msg[c], sizeof msg[c], "%s", dc_last_error(ctx));
    }
    TEST_OK(ctx, dc_tensor_to_host(x, after, sizeof after));
    dc_tensor_free(x);
    dc_tensor_free(k.good);
    dc_tensor_free(k.bad);
    dc_ctx_free(ctx);
    for (int c = 0; c < 2; ++c) {
        const char *what =
            c == 0 ? "dc_gradcheck, loss failing when recorded" : "dc_gradcheck, loss failing in a numeric evaluation";
        expect_status(what, st[c], DC_ERR_SHAPE, msg[c]);
        expect_words(what, msg[c], "dc_gradcheck: the function returned NULL", "dc_op_sum", "dc_op_add", "[2, 3]",
                     "[4, 5]", (const char *)NULL);
    }
    expect_status("dc_gradcheck, loss returning NULL silently", st[2], DC_ERR_ARG, msg[2]);
    expect_words("dc_gradcheck, loss returning NULL silently", msg[2], "dc_gradcheck: the function returned NULL",
                 "reported no error", (const char *)NULL);
    test_assert_close(after, before, 6, 0, 0, "input values after a failed dc_gradcheck (must be restored)");
}

/* sum(x^half), half a 0-d tensor of 0.5 */
static dc_tensor *sqrt_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    return dc_op_sum(tape, dc_op_pow(tape, x[0], user), 0, NULL, false);
}

static dc_tensor *infinite_slope_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    (void)user;
    return dc_op_sum(tape, dc_op_affine(tape, x[0], INFINITY, 0.0), 0, NULL, false);
}

/* dc_gradcheck's verdicts where a derivative is not finite: sum(sqrt x) at
 * x = (1, 0, 0) has backprop inf and a NaN central difference (the root of
 * -eps) at both zeros, and the report names the first; inf * x at x = 0
 * (one element: inf * 0 elsewhere would make every difference NaN) has
 * backprop inf and a central difference of inf, which agree. */
static void test_gradcheck_infinite_derivatives(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t three = 3;
    dc_tensor *x = dc_tensor_from_host(ctx, DC_F64, 1, &three, (const double[]){1.0, 0.0, 0.0});
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tensor *half = dc_tensor_from_host(ctx, DC_F64, 0, NULL, (const double[]){0.5});
    dc_gradcheck_report report;
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sqrt_loss, half, 1, &x, NULL, &report), DC_ERR_MISMATCH, "dc_gradcheck",
                  "element 1");
    if (report.worst_index != 1 || !isinf(report.worst_backprop) || !isnan(report.worst_numeric))
        fail_msg("the worst element: %lld, backprop %g, central difference %g (want 1, inf, nan)",
                 (long long)report.worst_index, report.worst_backprop, report.worst_numeric);
    const int64_t one = 1;
    dc_tensor *zero = dc_tensor_from_host(ctx, DC_F64, 1, &one, (const double[]){0.0});
    TEST_OK(ctx, dc_tensor_set_requires_grad(zero, true));
    TEST_OK(ctx, dc_gradcheck(ctx, infinite_slope_loss, NULL, 1, &zero, NULL, &report));
    if (report.checked != 1 || report.max_abs_err != 0.0)
        fail_msg("inf against inf: %lld checked, abs error %g (want 1, 0)", (long long)report.checked,
                 report.max_abs_err);
    dc_tensor_free(zero);
    dc_tensor_free(half);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

static void test_mixed_dtypes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, col[2] = {2, 1};
    dc_tensor *a32 = test_random(ctx, DC_F32, 2, s23, 0.5, 1.5), *b64 = f64_tensor(ctx, 2, s23);
    dc_tensor *m64 = f64_tensor(ctx, 2, s32), *c32 = test_random(ctx, DC_F32, 2, col, 0.0, 1.0);
    dc_tensor *a64 = f64_tensor(ctx, 2, s23);
    TEST_OK(ctx, dc_tensor_set_requires_grad(a32, true));
    TEST_OK(ctx, dc_tensor_set_requires_grad(a64, true));
    dc_tape *tape = dc_tape_new(ctx);
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, a32, b64), "dc_op_add", "f32", "f64");
    EXPECT_OP_FAILS(ctx, dc_op_mul(tape, b64, a32), "dc_op_mul", "f64", "f32");
    EXPECT_OP_FAILS(ctx, dc_op_pow(tape, a32, b64), "dc_op_pow", "f32", "f64");
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, c32, a64, b64), "dc_op_select", "f32", "f64");
    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, a32, m64), "dc_op_matmul", "f32", "f64");
    dc_tensor *in6[6] = {c32, c32, a32, a32, b64, a32}, *out[2];
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(hmlstm_update_c), 6, in6, 1, out), DC_ERR_DTYPE,
                  "dc_broadcast(hmlstm_update_c)", "z is f32", "i is f64");
    dc_tensor *pin[2] = {b64, a32};
    EXPECT_STATUS(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, pin, 2, out, DC_PARTIALS_RECOMPUTE),
                  DC_ERR_DTYPE, "dc_broadcast(polar_pair)", "r is f64", "t is f32");
    EXPECT_STATUS(ctx, dc_tensor_copy(a32, b64), DC_ERR_DTYPE, "dc_tensor_copy", "f32", "f64");
    if (dc_tape_node_count(tape) != 0)
        fail_msg("failed ops recorded %zu nodes, expected 0", dc_tape_node_count(tape));

    /* dc_gradcheck works in f64 only */
    dc_tensor *gin[1] = {a32};
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, gin, NULL, NULL), DC_ERR_DTYPE, "dc_gradcheck", "f32",
                  "f64");
    dc_tensor *mixed[2] = {a64, a32};
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 2, mixed, NULL, NULL), DC_ERR_DTYPE, "dc_gradcheck", "input 1",
                  "f32");
    dc_tensor *g64[1] = {a64};
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, NULL, NULL, 1, g64, NULL, NULL), DC_ERR_ARG, "dc_gradcheck");
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 0, g64, NULL, NULL), DC_ERR_ARG, "dc_gradcheck");
    /* a correct check still passes after the refusals */
    TEST_OK(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, g64, NULL, NULL));
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tensor_free(a32);
    dc_tensor_free(b64);
    dc_tensor_free(m64);
    dc_tensor_free(c32);
    dc_tensor_free(a64);
    dc_ctx_free(ctx);
}

/* ---- bad shapes, axes and sizes ---- */

static void test_bad_tensor_shapes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -3}, huge[2] = {INT64_MAX / 2, 4};
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F64, 9, nine), "dc_tensor_new", "rank 9");
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F32, -1, nine), "dc_tensor_new", "rank -1");
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F64, 2, neg), "dc_tensor_new", "dimension 1", "-3");
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F64, 2, NULL), "dc_tensor_new", "NULL");
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F64, 2, huge), "dc_tensor_new", "too large");
    /* no elements, but strides past INT64_MAX */
    const int64_t zero_huge[3] = {0, INT64_MAX, INT64_MAX};
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, DC_F64, 3, zero_huge), "dc_tensor_new", "too large");
    EXPECT_OP_FAILS(ctx, dc_tensor_new(ctx, (dc_dtype)5, 1, nine), "dc_tensor_new", "dtype");
    EXPECT_OP_FAILS(ctx, dc_tensor_from_host(ctx, DC_F64, 1, nine, NULL), "dc_tensor_from_host", "NULL");
    EXPECT_OP_FAILS(ctx, dc_tensor_from_host(ctx, DC_F64, 2, neg, nine), "dc_tensor_from_host", "-3");
    dc_tape *tape = dc_tape_new(ctx);
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, DC_F64, 9, nine, NULL), "dc_tape_tensor_new", "rank 9");
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, DC_F64, 2, neg, NULL), "dc_tape_tensor_new", "-3");
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, DC_F64, 3, zero_huge, NULL), "dc_tape_tensor_new", "too large");
    const int64_t s03[2] = {0, 3};
    dc_tensor *empty = f64_tensor(ctx, 2, s03);
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, empty, 3, zero_huge), "dc_op_reshape", "[0, 3]");
    dc_tensor_free(empty);
    /* Operands within the bound whose broadcast is past it: no elements, its
     * sizes multiplying to 2^64 (the product of its contiguous strides
     * overflowed) */
    const int64_t wide_empty[3] = {1, 0, (int64_t)1 << 58}, tall[3] = {64, 1, 1};
    dc_tensor *we = f64_tensor(ctx, 3, wide_empty), *tl = f64_tensor(ctx, 3, tall);
    dc_tensor *pair[2] = {we, tl}, *pair_out[2];
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, we, tl), "dc_op_add", "[64, 0, 288230376151711744]", "too large");
    EXPECT_OP_FAILS(ctx, dc_op_select(tape, tl, we, tl), "dc_op_select", "too large");
    for (int policy = 0; policy < 2; ++policy)
        EXPECT_STATUS(ctx,
                      dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, pair, 2, pair_out,
                                          (dc_partials_policy)policy),
                      DC_ERR_SHAPE, "dc_broadcast(polar_pair)", "[64, 0, 288230376151711744]", "too large");
    dc_tensor_free(we);
    dc_tensor_free(tl);

    /* element access out of range or with the wrong buffer size */
    const int64_t s23[2] = {2, 3};
    dc_tensor *t = f64_tensor(ctx, 2, s23);
    double v, buf[6];
    EXPECT_STATUS(ctx, dc_tensor_item(t, &v), DC_ERR_SHAPE, "dc_tensor_item", "[2, 3]", "6 elements");
    EXPECT_STATUS(ctx, dc_tensor_get(t, 6, &v), DC_ERR_ARG, "dc_tensor_get", "6", "0..5");
    EXPECT_STATUS(ctx, dc_tensor_set(t, -1, 0.0), DC_ERR_ARG, "dc_tensor_set", "-1");
    EXPECT_STATUS(ctx, dc_tensor_to_host(t, buf, 5 * sizeof(double)), DC_ERR_ARG, "dc_tensor_to_host", "40", "48");
    EXPECT_STATUS(ctx, dc_tensor_from_host_copy(t, buf, 7 * sizeof(double)), DC_ERR_ARG, "dc_tensor_from_host_copy",
                  "56");
    EXPECT_STATUS(ctx, dc_tensor_fill_uniform(t, 2.0, 1.0), DC_ERR_ARG, "dc_tensor_fill_uniform");
    EXPECT_STATUS(ctx, dc_tensor_fill_normal(t, 0.0, -1.0), DC_ERR_ARG, "dc_tensor_fill_normal");
    const int64_t s32[2] = {3, 2};
    dc_tensor *u = f64_tensor(ctx, 2, s32);
    EXPECT_STATUS(ctx, dc_tensor_copy(t, u), DC_ERR_SHAPE, "dc_tensor_copy", "[2, 3]", "[3, 2]");
    dc_tensor_free(u);
    dc_tape_free(tape);
    dc_tensor_free(t);
    dc_ctx_free(ctx);
}

static void test_bad_op_shapes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s3[1] = {3}, s223[3] = {2, 2, 3}, s334[3] = {3, 3, 4};
    dc_tensor *x = f64_tensor(ctx, 2, s23), *b = f64_tensor(ctx, 2, s45), *v = f64_tensor(ctx, 1, s3);
    dc_tensor *p = f64_tensor(ctx, 3, s223), *q = f64_tensor(ctx, 3, s334);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(ctx);

    const int64_t r42[2] = {4, 2}, r2m1[3] = {2, -1, -1}, rm14[2] = {-1, 4}, rneg[2] = {-2, 3};
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 2, r42), "dc_op_reshape", "[2, 3]", "6 elements", "[4, 2]");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 3, r2m1), "dc_op_reshape", "only one -1");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 2, rm14), "dc_op_reshape", "[2, 3]", "[-1, 4]");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 2, rneg), "dc_op_reshape", "-2");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 9, r42), "dc_op_reshape", "rank 9");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 2, NULL), "dc_op_reshape", "NULL");

    EXPECT_OP_FAILS(ctx, dc_op_transpose(tape, x, 0, 2), "dc_op_transpose", "2", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_transpose(tape, x, -3, 1), "dc_op_transpose", "-3", "[2, 3]");

    const int ax2[1] = {2}, ax_rep[2] = {1, -1}, ax_rep2[2] = {0, 0}, axm3[1] = {-3};
    EXPECT_OP_FAILS(ctx, dc_op_sum(tape, x, 1, ax2, false), "dc_op_sum", "axis 2", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_mean(tape, x, 1, axm3, true), "dc_op_mean", "axis -3", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_sum(tape, x, 2, ax_rep, false), "dc_op_sum", "twice");
    EXPECT_OP_FAILS(ctx, dc_op_mean(tape, x, 2, ax_rep2, false), "dc_op_mean", "axis 0", "twice");
    EXPECT_OP_FAILS(ctx, dc_op_sum(tape, x, 1, NULL, false), "dc_op_sum", "NULL");
    EXPECT_OP_FAILS(ctx, dc_op_sum(tape, x, -1, ax2, false), "dc_op_sum", "-1 axes");

    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, x, b), "dc_op_matmul", "[2, 3]", "[4, 5]", "inner sizes 3 and 4");
    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, v, x), "dc_op_matmul", "2 axes", "[3]");
    EXPECT_OP_FAILS(ctx, dc_op_matmul(tape, p, q), "dc_op_matmul", "batch", "[2, 2, 3]", "[3, 3, 4]");
    if (dc_tape_node_count(tape) != 0)
        fail_msg("failed ops recorded %zu nodes, expected 0", dc_tape_node_count(tape));
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(b);
    dc_tensor_free(v);
    dc_tensor_free(p);
    dc_tensor_free(q);
    dc_ctx_free(ctx);
}

/* ---- tensors from elsewhere, non-leaf tensors ---- */

static void test_foreign_tensors(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx(), *ctx2 = test_cpu_ctx();
    const int64_t s[2] = {2, 2};
    dc_tensor *a = f64_tensor(ctx, 2, s), *b2 = f64_tensor(ctx2, 2, s);
    dc_tape *tape = dc_tape_new(ctx), *other = dc_tape_new(ctx);
    dc_tensor *t_other = dc_tape_tensor_new(other, DC_F64, 2, s, NULL);
    TEST_NONNULL(ctx, t_other);
    dc_tensor_set_name(t_other, "foreign");
    EXPECT_OP_FAILS(ctx, dc_op_add(tape, a, t_other), "dc_op_add", "input b", "another tape");
    EXPECT_OP_FAILS(ctx, dc_op_mul(tape, a, b2), "dc_op_mul", "input b", "another context");
    dc_tensor *pin[2] = {t_other, a}, *out[2];
    EXPECT_STATUS(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, pin, 2, out), DC_ERR_ARG,
                  "dc_broadcast(polar_pair)", "input r", "another tape");
    dc_tape_free(tape);
    dc_tape_free(other);
    dc_tensor_free(a);
    dc_tensor_free(b2);
    dc_ctx_free(ctx);
    dc_ctx_free(ctx2);
}

static void test_requires_grad_on_non_leaf(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s[2] = {2, 3};
    dc_tensor *x = f64_tensor(ctx, 2, s), *w = f64_tensor(ctx, 2, s);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = dc_op_mul(tape, x, w);
    TEST_NONNULL(ctx, y);
    EXPECT_STATUS(ctx, dc_tensor_set_requires_grad(y, true), DC_ERR_ARG, "dc_tensor_set_requires_grad", "leaf");
    EXPECT_STATUS(ctx, dc_tensor_set_requires_grad(y, false), DC_ERR_ARG, "dc_tensor_set_requires_grad", "leaf");
    assert_true(dc_tensor_requires_grad(y));
    dc_tensor_set_name(y, "hidden");
    EXPECT_STATUS(ctx, dc_tensor_set_requires_grad(y, false), DC_ERR_ARG, "hidden", "leaf");
    dc_tensor *pin[2] = {x, w}, *out[2];
    TEST_OK(ctx, dc_broadcast(tape, DC_BFN_REF(polar_pair), 2, pin, 2, out));
    EXPECT_STATUS(ctx, dc_tensor_set_requires_grad(out[1], true), DC_ERR_ARG, "dc_tensor_set_requires_grad", "leaf");
    /* leaves, persistent or on the tape, can be marked */
    dc_tensor *leaf = dc_tape_tensor_new(tape, DC_F64, 2, s, NULL);
    TEST_OK(ctx, dc_tensor_set_requires_grad(leaf, true));
    TEST_OK(ctx, dc_tensor_set_requires_grad(w, true));
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- contexts ---- */

/* Sets DC_DEVICE (NULL: unsets it) for one dc_ctx_new, then restores it. */
static dc_ctx *ctx_with_env(const char *device, dc_backend backend, dc_status *st)
{
    const char *prev = getenv("DC_DEVICE");
    char *saved = prev ? strdup(prev) : NULL;
    if (device)
        setenv("DC_DEVICE", device, 1);
    else
        unsetenv("DC_DEVICE");
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = backend;
    o.quiet = true;
    dc_clear_error(NULL);
    dc_ctx *ctx = dc_ctx_new(&o, st);
    if (saved) {
        setenv("DC_DEVICE", saved, 1);
        free(saved);
    } else {
        unsetenv("DC_DEVICE");
    }
    return ctx;
}

/* An explicit CUDA request on a machine without a usable GPU (or a build
 * without CUDA) fails with DC_ERR_DEVICE and says why; so does DC_DEVICE=cuda
 * with AUTO. Where a GPU works the request succeeds and the test is skipped. */
static void test_ctx_cuda_unavailable(void **state)
{
    (void)state;
    for (int via_env = 0; via_env < 2; ++via_env) {
        dc_status st = DC_OK;
        dc_ctx *ctx = via_env ? ctx_with_env("cuda", DC_BACKEND_AUTO, &st) : ctx_with_env(NULL, DC_BACKEND_CUDA, &st);
        if (ctx) {
            const dc_backend got = dc_ctx_backend(ctx);
            dc_ctx_free(ctx);
            if (got != DC_BACKEND_CUDA)
                fail_msg("a CUDA request gave a %s context; expected CUDA or failure", dc_backend_name(got));
            print_message("a CUDA device works here; the no-GPU case cannot be tested\n");
            skip();
        }
        expect_status(via_env ? "DC_DEVICE=cuda" : "backend CUDA", st, DC_ERR_DEVICE, dc_last_error(NULL));
        expect_words("CUDA request", dc_last_error(NULL), "dc_ctx_new", "CUDA", "requested", "not usable",
                     (const char *)NULL);
    }
    /* without a status pointer */
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    assert_null(dc_ctx_new(&o, NULL));
}

static void test_ctx_device_env(void **state)
{
    (void)state;
    dc_status st = DC_ERR_ARG;
    dc_ctx *ctx = ctx_with_env("cpu", DC_BACKEND_AUTO, &st);
    if (!ctx)
        fail_msg("DC_DEVICE=cpu with AUTO: expected a context, got %s: %s", dc_status_name(st), dc_last_error(NULL));
    expect_status("DC_DEVICE=cpu", st, DC_OK, dc_last_error(NULL));
    if (dc_ctx_backend(ctx) != DC_BACKEND_CPU)
        fail_msg("DC_DEVICE=cpu: expected a CPU context, got %s", dc_backend_name(dc_ctx_backend(ctx)));
    expect_words("device name", dc_ctx_device_name(ctx), "CPU", (const char *)NULL);
    dc_ctx_free(ctx);

    ctx = ctx_with_env("bogus", DC_BACKEND_AUTO, &st);
    if (ctx) {
        dc_ctx_free(ctx);
        fail_msg("DC_DEVICE=bogus: expected no context, got one");
    }
    expect_status("DC_DEVICE=bogus", st, DC_ERR_ARG, dc_last_error(NULL));
    expect_words("DC_DEVICE=bogus", dc_last_error(NULL), "DC_DEVICE=bogus", "cpu", "cuda", (const char *)NULL);

    /* cuda:N wants a device number: decimal digits, within int */
    const char *bad_numbers[] = {"cuda:", "cuda:-1", "cuda:1x", "cuda: 1", "cuda:99999999999", "cuda:0x1", "cuda1"};
    for (size_t k = 0; k < sizeof bad_numbers / sizeof bad_numbers[0]; ++k) {
        ctx = ctx_with_env(bad_numbers[k], DC_BACKEND_AUTO, &st);
        if (ctx) {
            dc_ctx_free(ctx);
            fail_msg("DC_DEVICE=%s: expected no context, got one", bad_numbers[k]);
        }
        expect_status(bad_numbers[k], st, DC_ERR_ARG, dc_last_error(NULL));
        expect_words(bad_numbers[k], dc_last_error(NULL), bad_numbers[k], "cuda:N", (const char *)NULL);
    }
    /* a device number no machine has: CUDA was asked for and is not usable */
    ctx = ctx_with_env("cuda:4096", DC_BACKEND_AUTO, &st);
    if (ctx) {
        dc_ctx_free(ctx);
        fail_msg("DC_DEVICE=cuda:4096: expected no context, got one");
    }
    expect_status("DC_DEVICE=cuda:4096", st, DC_ERR_DEVICE, dc_last_error(NULL));

    /* AUTO, with or without a GPU: a new context holds no error, also when
     * it fell back to the CPU */
    ctx = ctx_with_env(NULL, DC_BACKEND_AUTO, &st);
    if (!ctx)
        fail_msg("AUTO: expected a context, got %s: %s", dc_status_name(st), dc_last_error(NULL));
    expect_status("a new AUTO context's last status", dc_last_status(ctx), DC_OK, dc_last_error(ctx));
    if (dc_last_error(ctx)[0])
        fail_msg("a new AUTO context's last error is \"%s\"", dc_last_error(ctx));
    dc_ctx_free(ctx);

    /* An explicit backend ignores DC_DEVICE. */
    ctx = ctx_with_env("bogus", DC_BACKEND_CPU, &st);
    if (!ctx)
        fail_msg("DC_DEVICE=bogus with backend CPU: expected a context, got %s: %s", dc_status_name(st),
                 dc_last_error(NULL));
    dc_ctx_free(ctx);

    /* Bad options */
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = (dc_backend)42;
    dc_clear_error(NULL);
    assert_null(dc_ctx_new(&o, &st));
    expect_status("backend 42", st, DC_ERR_ARG, dc_last_error(NULL));
    expect_words("backend 42", dc_last_error(NULL), "dc_ctx_new", "backend", "42", (const char *)NULL);
    o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.num_threads = -2;
    assert_null(dc_ctx_new(&o, &st));
    expect_status("num_threads -2", st, DC_ERR_ARG, dc_last_error(NULL));
    expect_words("num_threads -2", dc_last_error(NULL), "dc_ctx_new", "num_threads", "-2", (const char *)NULL);
    o.num_threads = DC_MAX_THREADS + 1;
    assert_null(dc_ctx_new(&o, &st));
    expect_status("num_threads past the bound", st, DC_ERR_ARG, dc_last_error(NULL));
    expect_words("num_threads past the bound", dc_last_error(NULL), "dc_ctx_new", "num_threads", "1025",
                 (const char *)NULL);
    o = dc_ctx_options_default();
    o.cuda_device = -1;
    assert_null(dc_ctx_new(&o, &st));
    expect_status("cuda_device -1", st, DC_ERR_ARG, dc_last_error(NULL));
    expect_words("cuda_device -1", dc_last_error(NULL), "dc_ctx_new", "cuda_device", "-1", (const char *)NULL);
    /* a CPU context runs on no CUDA device */
    o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.cuda_device = 3;
    ctx = dc_ctx_new(&o, &st);
    TEST_NONNULL(NULL, ctx);
    assert_int_equal(dc_ctx_cuda_device(ctx), -1);
    dc_ctx_free(ctx);
    assert_int_equal(dc_ctx_cuda_device(NULL), -1);
    if (strcmp(dc_status_name((dc_status)99), "DC_STATUS_UNKNOWN") != 0)
        fail_msg("dc_status_name(99): expected DC_STATUS_UNKNOWN, got %s", dc_status_name((dc_status)99));
}

/* ---- every public function, each bad argument ---- */

/* Every public function not exercised above, called with each kind of bad
 * argument: NULL handles and pointers, unknown enum values, counts, ranks,
 * axes, indices and sizes out of range, options out of range, tensors of
 * another context or of the wrong kind. Fallible calls return their status
 * with a message naming the function and the problem; getters return their
 * neutral value; nothing the refused calls were given changes. */
static void test_every_public_function_rejects_bad_arguments(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx(), *other_ctx = test_cpu_ctx();
    const int64_t s23[2] = {2, 3}, s1[1] = {1}, s2[1] = {2}, s3[1] = {3}, s4[1] = {4}, s42[2] = {4, 2};
    const int64_t rank8[DC_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    dc_tensor *x = f64_tensor(ctx, 2, s23), *w = f64_tensor(ctx, 2, s23), *foreign = f64_tensor(other_ctx, 2, s23);
    dc_tensor *one = f64_tensor(ctx, 1, s1), *table = f64_tensor(ctx, 2, s42), *flat = f64_tensor(ctx, 1, s4);
    dc_tensor *deep_ids = dc_tensor_new(ctx, DC_F64, DC_MAX_DIMS, rank8);
    const double ids_v[3] = {0.0, 4.0, 1.0}, nan_v[3] = {0.0, NAN, 1.0};
    const double targets_v[2] = {0.0, 3.0};
    dc_tensor *ids = test_tensor(ctx, DC_F64, 1, s3, ids_v), *nan_ids = test_tensor(ctx, DC_F64, 1, s3, nan_v);
    dc_tensor *targets = test_tensor(ctx, DC_F64, 1, s2, targets_v), *ids32 = dc_tensor_new(ctx, DC_F32, 1, s3);
    TEST_NONNULL(ctx, deep_ids);
    TEST_NONNULL(ctx, ids32);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(ctx), *other_tape = dc_tape_new(ctx);
    double v = 0.0, buf[6];
    char text[16];
    double *x_before = test_values(x);

    /* ---- NULL handles: no context to report through, the status says it ---- */
    dc_tensor *pair[2] = {x, w};
    const char *names1[1] = {"x"};
    const struct {
        const char *call;
        dc_status got;
    } no_handle[] = {
        {"dc_tensor_to_host(NULL)", dc_tensor_to_host(NULL, buf, sizeof buf)},
        {"dc_tensor_from_host_copy(NULL)", dc_tensor_from_host_copy(NULL, buf, sizeof buf)},
        {"dc_tensor_get(NULL)", dc_tensor_get(NULL, 0, &v)},
        {"dc_tensor_set(NULL)", dc_tensor_set(NULL, 0, 1.0)},
        {"dc_tensor_fill_uniform(NULL)", dc_tensor_fill_uniform(NULL, 0.0, 1.0)},
        {"dc_tensor_fill_normal(NULL)", dc_tensor_fill_normal(NULL, 0.0, 1.0)},
        {"dc_tensor_copy(NULL, NULL)", dc_tensor_copy(NULL, NULL)},
        {"dc_optimizer_step(NULL)", dc_optimizer_step(NULL)},
        {"dc_clip_grad_norm(NULL ctx)", dc_clip_grad_norm(NULL, 1, &x, 1.0, NULL)},
        {"dc_checkpoint_save(NULL ctx)", dc_checkpoint_save(NULL, "unused.ckpt", 1, &x, names1)},
        {"dc_checkpoint_load(NULL ctx)", dc_checkpoint_load(NULL, "unused.ckpt", 1, &x, names1)},
    };
    for (size_t k = 0; k < sizeof no_handle / sizeof no_handle[0]; ++k)
        expect_status(no_handle[k].call, no_handle[k].got, DC_ERR_ARG, "");
    const struct {
        const char *call;
        const void *got;
    } no_result[] = {
        {"dc_tensor_from_host(NULL ctx)", dc_tensor_from_host(NULL, DC_F64, 2, s23, buf)},
        {"dc_op_hard_sigmoid(NULL tape)", dc_op_hard_sigmoid(NULL, x, 1.0)},
        {"dc_op_step_st(NULL tape)", dc_op_step_st(NULL, x, 0.5)},
        {"dc_op_slice(NULL tape)", dc_op_slice(NULL, x, 0, 0, 1)},
        {"dc_op_concat(NULL tape)", dc_op_concat(NULL, 2, pair, 0)},
        {"dc_op_embedding(NULL tape)", dc_op_embedding(NULL, table, ids)},
        {"dc_op_cross_entropy(NULL tape)", dc_op_cross_entropy(NULL, x, targets)},
        {"dc_optimizer_adam(NULL ctx)", dc_optimizer_adam(NULL, 1, &x, NULL)},
        {"dc_optimizer_sgd(NULL ctx)", dc_optimizer_sgd(NULL, 1, &x, 0.1, 0.0)},
    };
    for (size_t k = 0; k < sizeof no_result / sizeof no_result[0]; ++k)
        if (no_result[k].got)
            fail_msg("%s: expected NULL, got a result", no_result[k].call);

    /* ---- getters: neutral values for NULL, unknown enums, absent axes ---- */
    assert_string_equal(dc_status_name((dc_status)-1), "DC_STATUS_UNKNOWN");
    assert_string_equal(dc_status_name(DC_STATUS_COUNT), "DC_STATUS_UNKNOWN");
    assert_string_equal(dc_backend_name((dc_backend)9), "unknown");
    assert_string_equal(dc_dtype_name((dc_dtype)7), "unknown");
    assert_int_equal(dc_dtype_size((dc_dtype)7), 0);
    assert_int_equal(dc_dtype_size((dc_dtype)-1), 0);
    assert_int_equal(dc_ctx_backend(NULL), DC_BACKEND_CPU);
    assert_int_equal(dc_ctx_num_threads(NULL), 1);
    assert_string_equal(dc_ctx_device_name(NULL), "");
    assert_null(dc_ctx_cuda_stream(NULL));
    const dc_device_memory_stats mem = dc_ctx_device_memory(NULL);
    assert_true(mem.bytes_reserved == 0 && mem.malloc_calls == 0 && mem.free_calls == 0);
    dc_ctx_seed(NULL, 7);
    dc_clear_error(NULL);
    assert_int_equal(dc_last_status(NULL), DC_OK);
    assert_string_equal(dc_last_error(NULL), "");
    dc_ctx_options bad_options = dc_ctx_options_default();
    bad_options.num_threads = -1;
    assert_null(dc_ctx_new(&bad_options, NULL));
    expect_status("dc_last_status(NULL) after a refused dc_ctx_new", dc_last_status(NULL), DC_ERR_ARG,
                  dc_last_error(NULL));
    expect_words("dc_ctx_new without a status pointer", dc_last_error(NULL), "dc_ctx_new", "num_threads", "-1",
                 (const char *)NULL);

    assert_string_equal(dc_tensor_name(NULL), "");
    assert_int_equal(dc_tensor_dtype(NULL), DC_F32);
    assert_int_equal(dc_tensor_ndim(NULL), 0);
    assert_null(dc_tensor_shape(NULL));
    assert_int_equal(dc_tensor_dim(NULL, 0), 0);
    assert_int_equal(dc_tensor_numel(NULL), 0);
    assert_null(dc_tensor_ctx(NULL));
    assert_false(dc_tensor_requires_grad(NULL));
    assert_null(dc_tensor_data(NULL));
    assert_null(dc_tensor_strides(NULL));
    assert_false(dc_tensor_is_contiguous(NULL));
    assert_string_equal(dc_tensor_shape_str(NULL, text, sizeof text), "(null)");
    assert_null(dc_tensor_shape_str(x, NULL, sizeof text));
    text[0] = 'k';
    assert_ptr_equal(dc_tensor_shape_str(x, text, 0), text);
    assert_int_equal(text[0], 'k'); /* size 0: nothing written */
    assert_string_equal(dc_tensor_shape_str(x, text, 4), "[2,");
    assert_int_equal(dc_tensor_dim(x, 2), 0);
    assert_int_equal(dc_tensor_dim(x, -3), 0);
    assert_int_equal(dc_tensor_dim(x, -1), 3);
    dc_tensor_set_name(one, "named");
    dc_tensor_set_name(one, NULL);
    assert_string_equal(dc_tensor_name(one), "");
    assert_int_equal(dc_tape_set_region(NULL, 1), 0);
    assert_true(dc_tape_region_seconds(NULL, 0) == 0.0);
    assert_true(dc_tape_region_seconds(tape, -1) == 0.0);
    assert_true(dc_tape_region_seconds(tape, DC_TAPE_REGIONS) == 0.0);
    assert_true(dc_optimizer_lr(NULL) == 0.0);
    dc_tape_set_timing(NULL, true);
    dc_tape_clear_timing(NULL);
    dc_optimizer_set_lr(NULL, 0.1);
    dc_optimizer_zero_grad(NULL);
    dc_optimizer_free(NULL);

    /* ---- tensors ---- */
    EXPECT_STATUS(ctx, dc_tensor_to_host(x, NULL, sizeof buf), DC_ERR_ARG, "dc_tensor_to_host", "NULL");
    EXPECT_STATUS(ctx, dc_tensor_from_host_copy(x, NULL, sizeof buf), DC_ERR_ARG, "dc_tensor_from_host_copy", "NULL");
    EXPECT_STATUS(ctx, dc_tensor_from_host_copy(x, buf, 0), DC_ERR_ARG, "dc_tensor_from_host_copy", "0 bytes", "48");
    EXPECT_STATUS(ctx, dc_tensor_get(x, 0, NULL), DC_ERR_ARG, "dc_tensor_get", "NULL");
    EXPECT_STATUS(ctx, dc_tensor_get(x, -1, &v), DC_ERR_ARG, "dc_tensor_get", "-1", "0..5");
    EXPECT_STATUS(ctx, dc_tensor_get(x, INT64_MAX, &v), DC_ERR_ARG, "dc_tensor_get", "0..5");
    EXPECT_STATUS(ctx, dc_tensor_item(one, NULL), DC_ERR_ARG, "dc_tensor_item", "NULL");
    EXPECT_STATUS(ctx, dc_tensor_set(x, 6, 0.0), DC_ERR_ARG, "dc_tensor_set", "6", "0..5");
    EXPECT_STATUS(ctx, dc_tensor_set(x, INT64_MIN, 0.0), DC_ERR_ARG, "dc_tensor_set", "0..5");
    EXPECT_STATUS(ctx, dc_tensor_fill_uniform(x, NAN, 1.0), DC_ERR_ARG, "dc_tensor_fill_uniform");
    EXPECT_STATUS(ctx, dc_tensor_fill_normal(x, 0.0, NAN), DC_ERR_ARG, "dc_tensor_fill_normal");
    EXPECT_STATUS(ctx, dc_tensor_copy(x, NULL), DC_ERR_ARG, "dc_tensor_copy", "source", "NULL");
    EXPECT_OP_FAILS(ctx, dc_tensor_from_host(ctx, (dc_dtype)7, 2, s23, buf), "dc_tensor_from_host", "dtype 7");
    EXPECT_OP_FAILS(ctx, dc_tensor_from_host(ctx, DC_F64, DC_MAX_DIMS + 1, rank8, buf), "dc_tensor_from_host", "rank 9");

    /* ---- tapes ---- */
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, (dc_dtype)7, 2, s23, NULL), "dc_tape_tensor_new", "dtype 7");
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, DC_F64, 2, NULL, NULL), "dc_tape_tensor_new", "NULL");
    EXPECT_OP_FAILS(ctx, dc_tape_tensor_new(tape, DC_F64, -1, s23, NULL), "dc_tape_tensor_new", "rank -1");
    EXPECT_OP_FAILS(ctx, dc_tape_scalar(tape, (dc_dtype)7, 1.0), "dc_tape_scalar", "dtype 7");
    assert_int_equal(dc_tape_set_region(tape, 3), 0);
    const int bad_regions[3] = {DC_TAPE_REGIONS, -1, INT32_MIN};
    for (int k = 0; k < 3; ++k) {
        dc_clear_error(ctx);
        if (dc_tape_set_region(tape, bad_regions[k]) != 3)
            fail_msg("dc_tape_set_region(tape, %d): expected the previous region 3", bad_regions[k]);
        expect_status("dc_tape_set_region with a bad region", dc_last_status(ctx), DC_ERR_ARG, dc_last_error(ctx));
        expect_words("dc_tape_set_region with a bad region", dc_last_error(ctx), "dc_tape_set_region", "0..7",
                     (const char *)NULL);
    }
    assert_int_equal(dc_tape_set_region(tape, 0), 3); /* the bad regions left region 3 in place */

    /* adjoints from elsewhere */
    dc_tensor *y = dc_op_mul(tape, x, w), *elsewhere = dc_tape_tensor_new(other_tape, DC_F64, 2, s23, NULL);
    TEST_NONNULL(ctx, y);
    TEST_NONNULL(ctx, elsewhere);
    EXPECT_STATUS(ctx, dc_backward_with(tape, y, foreign), DC_ERR_ARG, "dc_backward_with", "another context");
    EXPECT_STATUS(ctx, dc_backward_with(tape, y, elsewhere), DC_ERR_ARG, "dc_backward_with", "another tape");

    /* a gradient belongs to its tensor, a tape tensor to its tape: dc_tensor_free leaves both alone */
    dc_tape_reset(tape);
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, x, w), 0, NULL, false);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    dc_tensor_free(dc_tensor_grad(x));
    dc_tensor_free(loss);
    TEST_OK(ctx, dc_tensor_item(loss, &v));
    double *gx = test_values(dc_tensor_grad(x)), *wv = test_values(w);
    test_assert_close(gx, wv, 6, 0, 0, "x's gradient after dc_tensor_free was given it");
    free(wv);

    /* ---- ops ---- */
    const size_t nodes = dc_tape_node_count(tape);
    EXPECT_OP_FAILS(ctx, dc_op_hard_sigmoid(tape, NULL, 1.0), "dc_op_hard_sigmoid: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_step_st(tape, NULL, 0.5), "dc_op_step_st: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_hard_sigmoid(tape, foreign, 1.0), "dc_op_hard_sigmoid", "another context");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, NULL, 0, 0, 1), "dc_op_slice: input x is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 2, 0, 1), "dc_op_slice", "axis 2", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, -3, 0, 1), "dc_op_slice", "axis -3", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, -1, 1), "dc_op_slice", "-1", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 0, -1), "dc_op_slice", "-1", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 2, 2), "dc_op_slice", "2..3", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 4, 0), "dc_op_slice", "4", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 1, INT64_MAX), "dc_op_slice", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, INT64_MAX, 1), "dc_op_slice", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, INT64_MIN, 0), "dc_op_slice", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, (dc_tensor *[2]){x, NULL}, 0), "dc_op_concat: input xs[1] is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, NULL, 0), "dc_op_concat", "xs", "NULL");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, -1, pair, 0), "dc_op_concat", "-1");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, pair, 2), "dc_op_concat", "axis 2");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, pair, -3), "dc_op_concat", "axis -3");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, (dc_tensor *[2]){x, foreign}, 0), "dc_op_concat", "xs[1]",
                    "another context");
    const int64_t too_big[2] = {INT64_MAX, 2}, too_big_inferred[3] = {INT64_MAX / 2, 4, -1};
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 2, too_big), "dc_op_reshape", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, 3, too_big_inferred), "dc_op_reshape", "[2, 3]");
    EXPECT_OP_FAILS(ctx, dc_op_reshape(tape, x, -1, s23), "dc_op_reshape", "rank -1");
    const int nine_axes[DC_MAX_DIMS + 1] = {0};
    EXPECT_OP_FAILS(ctx, dc_op_mean(tape, x, DC_MAX_DIMS + 1, nine_axes, false), "dc_op_mean", "9 axes");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, NULL, ids), "dc_op_embedding: input table is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, NULL), "dc_op_embedding: input ids is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "dc_op_embedding", "ids[1]", "4", "0..3");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, nan_ids), "dc_op_embedding", "ids[1]", "0..3");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, flat, ids), "dc_op_embedding", "[4]");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, deep_ids), "dc_op_embedding", "rank 8");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids32), "dc_op_embedding", "f64", "f32");
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, foreign), "dc_op_embedding", "ids", "another context");
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, NULL, targets), "dc_op_cross_entropy: input logits is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, x, NULL), "dc_op_cross_entropy: input targets is NULL");
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, x, targets), "dc_op_cross_entropy", "targets[1]", "3", "0..2");
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, x, ids), "dc_op_cross_entropy", "[2, 3]", "[3]");
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, flat, targets), "dc_op_cross_entropy", "[4]", "[2]");
    if (dc_tape_node_count(tape) != nodes)
        fail_msg("refused ops recorded %zu nodes", dc_tape_node_count(tape) - nodes);

    /* ---- broadcast functions ---- */
    dc_bfn stale = *DC_BFN_REF(polar_pair);
    stale.abi_version = DC_BFN_ABI_VERSION + 1;
    dc_tensor *outputs[2] = {NULL, NULL};
    EXPECT_STATUS(ctx, dc_broadcast(tape, &stale, 2, pair, 2, outputs), DC_ERR_ARG, "dc_broadcast", "polar_pair",
                  "interface version", "rebuild");
    EXPECT_OP_FAILS(ctx, dc_broadcast1(tape, DC_BFN_REF(gated_scale), 3, NULL), "dc_broadcast(gated_scale)", "inputs",
                    "NULL");

    /* ---- gradient check ---- */
    dc_tensor *on_tape = dc_tape_tensor_new(tape, DC_F64, 2, s23, NULL);
    TEST_NONNULL(ctx, on_tape);
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, NULL, NULL, NULL), DC_ERR_ARG, "dc_gradcheck", "input");
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, -1, &x, NULL, NULL), DC_ERR_ARG, "dc_gradcheck", "input");
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, (dc_tensor *[1]){NULL}, NULL, NULL), DC_ERR_ARG,
                  "dc_gradcheck", "input 0 is NULL");
    EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, &on_tape, NULL, NULL), DC_ERR_ARG, "dc_gradcheck",
                  "tape tensor");
    const struct {
        const char *field;
        dc_gradcheck_options options;
    } bad_check[] = {
        {"eps", {0.0, 1e-8, 1e-6, 0}},
        {"eps", {NAN, 1e-8, 1e-6, 0}},
        {"eps", {-1e-6, 1e-8, 1e-6, 0}},
        {"eps", {INFINITY, 1e-8, 1e-6, 0}},
        {"atol", {1e-6, -1.0, 1e-6, 0}},
        {"rtol", {1e-6, 1e-8, NAN, 0}},
        {"max_per_input", {1e-6, 1e-8, 1e-6, -1}},
    };
    for (size_t k = 0; k < sizeof bad_check / sizeof bad_check[0]; ++k) {
        dc_gradcheck_report report = {.checked = -7};
        EXPECT_STATUS(ctx, dc_gradcheck(ctx, sum_loss, NULL, 1, &x, &bad_check[k].options, &report), DC_ERR_ARG,
                      "dc_gradcheck", bad_check[k].field);
        if (report.checked != -7)
            fail_msg("dc_gradcheck with a bad %s wrote the report", bad_check[k].field);
    }

    /* ---- optimizers and clipping ---- */
    dc_tensor *no_param[1] = {NULL};
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 0, &x, NULL), "dc_optimizer_adam", "parameter");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, -1, &x, NULL), "dc_optimizer_adam", "parameter");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, NULL, NULL), "dc_optimizer_adam", "parameter");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, no_param, NULL), "dc_optimizer_adam", "parameter 0 is NULL");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, &on_tape, NULL), "dc_optimizer_adam", "persistent");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, &foreign, NULL), "dc_optimizer_adam", "parameter 0",
                    "another context");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, no_param, 0.1, 0.0), "dc_optimizer_sgd", "parameter 0 is NULL");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &foreign, 0.1, 0.0), "dc_optimizer_sgd", "another context");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &x, 0.1, -0.5), "dc_optimizer_sgd", "momentum");
    const dc_adam_options good = dc_adam_options_default();
    dc_adam_options bad_adam[5] = {good, good, good, good, good};
    bad_adam[0].lr = -1.0;
    bad_adam[1].beta1 = 1.0;
    bad_adam[2].beta2 = NAN;
    bad_adam[3].eps = 0.0;
    bad_adam[4].weight_decay = -0.1;
    for (int k = 0; k < 5; ++k)
        EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, &x, &bad_adam[k]), "dc_optimizer_adam", "out of range");
    dc_optimizer *opt = dc_optimizer_sgd(ctx, 1, &x, 0.25, 0.0);
    TEST_NONNULL(ctx, opt);
    const double bad_lr[3] = {-1.0, NAN, -INFINITY};
    for (int k = 0; k < 3; ++k) {
        dc_clear_error(ctx);
        dc_optimizer_set_lr(opt, bad_lr[k]);
        if (dc_optimizer_lr(opt) != 0.25)
            fail_msg("dc_optimizer_set_lr(opt, %g) changed the learning rate to %g", bad_lr[k], dc_optimizer_lr(opt));
        expect_status("dc_optimizer_set_lr with a bad rate", dc_last_status(ctx), DC_ERR_ARG, dc_last_error(ctx));
        expect_words("dc_optimizer_set_lr with a bad rate", dc_last_error(ctx), "dc_optimizer_set_lr", "learning rate",
                     (const char *)NULL);
    }
    dc_optimizer_free(opt);
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, -1, &x, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "-1");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, NULL, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "NULL");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, no_param, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "tensor 0",
                  "NULL");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, &x, NAN, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "max_norm");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, &x, 0.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "max_norm");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, &foreign, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "tensor 0",
                  "another context");

    /* ---- checkpoints ---- */
    const char *path = "test_errors_refused.ckpt", *no_dir = "/nonexistent-dualcast-dir/x.ckpt";
    const char *no_name[1] = {NULL};
    remove(path);
    /* save and load check their shared arguments alike */
    typedef dc_status (*checkpoint_fn)(dc_ctx *, const char *, int, dc_tensor *const *, const char *const *);
    const struct {
        const char *name;
        checkpoint_fn fn;
    } checkpoint_fns[2] = {{"dc_checkpoint_save", dc_checkpoint_save}, {"dc_checkpoint_load", dc_checkpoint_load}};
    for (int f = 0; f < 2; ++f) {
        const char *name = checkpoint_fns[f].name;
        const checkpoint_fn fn = checkpoint_fns[f].fn;
        EXPECT_STATUS(ctx, fn(ctx, NULL, 1, &x, names1), DC_ERR_ARG, name, "path");
        EXPECT_STATUS(ctx, fn(ctx, path, -1, &x, names1), DC_ERR_ARG, name, "-1");
        EXPECT_STATUS(ctx, fn(ctx, path, 1, NULL, names1), DC_ERR_ARG, name, "tensors", "NULL");
        EXPECT_STATUS(ctx, fn(ctx, path, 1, &x, NULL), DC_ERR_ARG, name, "names", "NULL");
        EXPECT_STATUS(ctx, fn(ctx, path, 1, no_param, names1), DC_ERR_ARG, name, "0", "NULL");
        EXPECT_STATUS(ctx, fn(ctx, path, 1, &x, no_name), DC_ERR_ARG, name, "0", "NULL");
        EXPECT_STATUS(ctx, fn(ctx, path, 1, &foreign, names1), DC_ERR_ARG, name, "tensor 0", "another context");
    }
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, no_dir, 1, &x, names1), DC_ERR_IO, "dc_checkpoint_save", no_dir);
    FILE *written = fopen(path, "rb");
    if (written) {
        fclose(written);
        remove(path);
        fail_msg("refused saves wrote %s", path);
    }
    EXPECT_STATUS(ctx, dc_checkpoint_load(ctx, no_dir, 1, &x, names1), DC_ERR_IO, "dc_checkpoint_load", no_dir);

    /* nothing refused changed the values or the gradient */
    double *x_after = test_values(x), *gx_after = test_values(dc_tensor_grad(x));
    test_assert_close(x_after, x_before, 6, 0, 0, "x after the refused calls");
    test_assert_close(gx_after, gx, 6, 0, 0, "x's gradient after the refused calls");
    free(x_before);
    free(x_after);
    free(gx);
    free(gx_after);
    expect_tape_usable(ctx, tape);
    dc_tape_free(tape);
    dc_tape_free(other_tape);
    dc_tensor *owned[] = {x, w, foreign, one, table, flat, deep_ids, ids, nan_ids, targets, ids32};
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; ++k)
        dc_tensor_free(owned[k]);
    dc_ctx_free(ctx);
    dc_ctx_free(other_ctx);
}

/* Threads that cannot be started (here: an address space too small for
 * their stacks) fail dc_ctx_new with a status; OpenMP would end the process
 * from inside the first parallel region. In a child process, whose limit
 * the test lowers. */
static void test_ctx_threads_that_cannot_start(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    print_message("skipped: a sanitizer's shadow memory needs more address space than the limit leaves\n");
    skip();
#else
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        /* room for what the process maps now, not for 64 more 8 MiB stacks */
        struct rlimit lim = {(rlim_t)256 << 20, (rlim_t)256 << 20};
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(3);
        dc_ctx_options o = dc_ctx_options_default();
        o.backend = DC_BACKEND_CPU;
        o.num_threads = 64;
        dc_status st = DC_OK;
        dc_ctx *ctx = dc_ctx_new(&o, &st);
        if (ctx) {
            /* a loop split over the threads: OpenMP starts them here, or ends the process */
            const int64_t shape[1] = {1 << 20};
            dc_tensor *x = dc_tensor_new(ctx, DC_F32, 1, shape), *y = dc_tensor_new(ctx, DC_F32, 1, shape);
            dc_tape *tape = dc_tape_new(ctx);
            if (x && y && tape && dc_op_add(tape, x, y))
                _exit(4); /* the threads could start after all: nothing tested */
            _exit(6);
        }
        _exit(st == DC_ERR_MEMORY && strstr(dc_last_error(NULL), "threads") ? 0 : 5);
    }
    int wstatus = 0;
    assert_int_equal(waitpid(child, &wstatus, 0), child);
    if (!WIFEXITED(wstatus))
        fail_msg("the child ended by signal %d: dc_ctx_new did not return a status", WTERMSIG(wstatus));
    const int code = WEXITSTATUS(wstatus);
    if (code == 4 || code == 3) {
        print_message("skipped: %s\n", code == 3 ? "cannot lower the address-space limit here"
                                                 : "64 threads started within 256 MiB of address space here");
        skip();
    }
    if (code != 0)
        fail_msg("dc_ctx_new with 64 threads that cannot start: child exit %d (want a DC_ERR_MEMORY naming threads)",
                 code);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_shape_mismatch),
        cmocka_unit_test(test_broadcast_shape_mismatch),
        cmocka_unit_test(test_broadcast_arity),
        cmocka_unit_test(test_null_tape),
        cmocka_unit_test(test_null_input_every_op),
        cmocka_unit_test(test_null_from_failed_op_keeps_cause),
        cmocka_unit_test(test_backward_state_errors),
        cmocka_unit_test(test_mixed_dtypes),
        cmocka_unit_test(test_gradcheck_reports_failing_function),
        cmocka_unit_test(test_gradcheck_infinite_derivatives),
        cmocka_unit_test(test_bad_tensor_shapes),
        cmocka_unit_test(test_bad_op_shapes),
        cmocka_unit_test(test_foreign_tensors),
        cmocka_unit_test(test_requires_grad_on_non_leaf),
        cmocka_unit_test(test_ctx_cuda_unavailable),
        cmocka_unit_test(test_ctx_device_env),
        cmocka_unit_test(test_every_public_function_rejects_bad_arguments),
        cmocka_unit_test(test_ctx_threads_that_cannot_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
