/* Every op of include/dualcast/ops.h from one table of cases: the forward
 * values against a reference computed here in double, float32 against
 * float64, the gradient against central differences (dc_gradcheck), recording
 * off, gradients written over stale buffers and accumulated over two passes,
 * and dc_backward_with seeded with strided and broadcast adjoints. Then what
 * the table cannot express: sums and means over an empty axis, select keeping
 * infinities and NaN of the side not taken out of the gradient, one tensor
 * used twice, and one tensor used by several ops. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/op_cases.h"
#include "support/test_support.h"

/* ---- checks ---- */

static const char *dtype_str(dc_dtype dt) { return dc_dtype_name(dt); }

/* The op's output for case c in dtype, on `tape`, checked for NULL and shape. */
static dc_tensor *run_case(dc_ctx *ctx, dc_tape *tape, int c, const case_inputs *in, const shp *want, dc_dtype dt)
{
    const op_case *k = &cases[c];
    dc_tensor *y = k->build(tape, in->t, &k->arg);
    if (!y)
        fail_msg("case %d (%s), %s: the op returned NULL: %s", c, k->name, dtype_str(dt), dc_last_error(ctx));
    const shp got = tensor_shp(y);
    if (!shp_equal(&got, want)) {
        char a[128], b[128];
        fail_msg("case %d (%s), %s: output shape %s, want %s", c, k->name, dtype_str(dt), shp_str(&got, a, sizeof a),
                 shp_str(want, b, sizeof b));
    }
    if (dc_tensor_dtype(y) != dt)
        fail_msg("case %d (%s): output is %s, want %s", c, k->name, dtype_str(dc_tensor_dtype(y)), dtype_str(dt));
    return y;
}

static void compare_to(int c, const char *what, const double *got, const double *want, const double *mag, int64_t n,
                       double rtol, double atol)
{
    for (int64_t e = 0; e < n; ++e) {
        const double tol = rtol * mag[e] + atol;
        if (!(fabs(got[e] - want[e]) <= tol))
            fail_msg("case %d (%s): %s: output element %lld: %.17g, want %.17g (tolerance %.3g)", c, cases[c].name,
                     what, (long long)e, got[e], want[e], tol);
    }
}

/* Every op of ops.h has a row in the table. */
static void assert_table_covers_every_op(void)
{
    const char *missing = op_cases_missing_op();
    if (missing)
        fail_msg("op %s of ops.h has no row in the table", missing);
}

/* Forward in float64 against the reference, and float32 against float64. */
static void test_forward_values(void **state)
{
    (void)state;
    assert_table_covers_every_op();
    dc_ctx *ctx = test_cpu_ctx();
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        case_inputs in64, in32;
        make_inputs(ctx, c, DC_F64, false, &in64);
        make_inputs(ctx, c, DC_F32, false, &in32);
        reference r;
        compute_reference(k, in64.v, &r);
        const int64_t n = shp_numel(&r.shape);

        dc_tape *tape = dc_tape_new(ctx);
        if (k->build == build_reshape && k->arg.pre_transpose) {
            /* Only meaningful if the reshaped input really is strided. */
            dc_tensor *v = dc_op_transpose(tape, in64.t[0], k->arg.ax0, k->arg.ax1);
            TEST_NONNULL(ctx, v);
            if (dc_tensor_is_contiguous(v))
                fail_msg("case %d (%s): the transposed input is contiguous; the case tests nothing", c, k->name);
        }
        for (int i = 0; i < 2 && k->build == build_matmul; ++i) {
            if (!k->arg.swap02[i])
                continue;
            /* Only meaningful if BLAS cannot read the operand as it is. */
            dc_tensor *v = dc_op_transpose(tape, in64.t[i], 0, 2);
            TEST_NONNULL(ctx, v);
            const int64_t *st = dc_tensor_strides(v);
            if (st[1] == 1 || st[2] == 1)
                fail_msg("case %d (%s): operand %d has a unit stride; the case tests nothing", c, k->name, i);
        }
        dc_tensor *y64 = run_case(ctx, tape, c, &in64, &r.shape, DC_F64);
        dc_tensor *y32 = run_case(ctx, tape, c, &in32, &r.shape, DC_F32);
        double *v64 = test_values(y64), *v32 = test_values(y32);
        if (!r.from_library)
            compare_to(c, "f64 against the reference", v64, r.y, r.mag, n, 1e-12, 1e-300);
        /* f32 against f64: relative to the magnitude of the terms, and
         * to the largest output for outputs that cancel to near zero. */
        compare_to(c, "f32 against f64", v32, v64, r.mag, n, 1e-5, 1e-300);
        free(v64);
        free(v32);
        dc_tape_free(tape);
        free_reference(&r);
        free_inputs(&in64);
        free_inputs(&in32);
    }
    dc_ctx_free(ctx);
}

/* loss = sum(op(inputs) * w) */
typedef struct loss_user {
    const op_case *k;
    dc_tensor *w;
} loss_user;

static dc_tensor *case_loss(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    const loss_user *u = user;
    return dc_op_sum(tape, dc_op_mul(tape, u->k->build(tape, inputs, &u->k->arg), u->w), 0, NULL, false);
}

static void test_gradcheck_table(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        if (k->large)
            continue; /* too large for central differences; test_cuda compares it across backends */
        case_inputs in;
        make_inputs(ctx, c, DC_F64, true, &in);
        reference r;
        compute_reference(k, in.v, &r);
        /* A weight of the output's shape makes the adjoint non-uniform. */
        dc_tensor *w = test_random(ctx, DC_F64, r.shape.nd, r.shape.d, -1.0, 1.0);
        loss_user u = {k, w};
        if (k->arg.straight_through) {
            /* By definition the gradient passes as through the identity:
             * exactly w, where central differences would see 0. */
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *loss = case_loss(tape, in.t, &u);
            TEST_NONNULL(ctx, loss);
            TEST_OK(ctx, dc_backward(tape, loss));
            double *wv = test_values(w);
            for (int i = 0; i < k->n_in; ++i) {
                const dc_tensor *g = dc_tensor_grad(in.t[i]);
                if (!g)
                    fail_msg("case %d (%s): input %d has no gradient", c, k->name, i);
                double *gv = test_values(g);
                for (int64_t e = 0; e < dc_tensor_numel(g); ++e)
                    if (gv[e] != wv[e])
                        fail_msg("case %d (%s): input %d element %lld: gradient %.17g, want %.17g (straight through)",
                                 c, k->name, i, (long long)e, gv[e], wv[e]);
                free(gv);
            }
            free(wv);
            dc_tape_free(tape);
            dc_tensor_free(w);
            free_reference(&r);
            free_inputs(&in);
            continue;
        }
        dc_gradcheck_report rep;
        dc_status st = dc_gradcheck(ctx, case_loss, &u, k->n_in, in.t, NULL, &rep);
        if (st != DC_OK)
            fail_msg("case %d (%s): gradcheck %s, worst: input %d element %lld (backprop %.17g, numeric %.17g): %s", c,
                     k->name, dc_status_name(st), rep.worst_input, (long long)rep.worst_index, rep.worst_backprop,
                     rep.worst_numeric, dc_last_error(ctx));
        int64_t expect = 0;
        for (int i = 0; i < k->n_in; ++i)
            if (k->grad[i])
                expect += shp_numel(&k->shape[i]);
        if (rep.checked != expect)
            fail_msg("case %d (%s): gradcheck compared %lld elements, want %lld", c, k->name, (long long)rep.checked,
                     (long long)expect);
        /* Inputs that do not require a gradient get none. */
        for (int i = 0; i < k->n_in; ++i)
            if (!k->grad[i] && dc_tensor_grad(in.t[i]))
                fail_msg("case %d (%s): input %d does not require a gradient but has one", c, k->name, i);
        dc_tensor_free(w);
        free_reference(&r);
        free_inputs(&in);
    }
    dc_ctx_free(ctx);
}

/* Every op whose differentiable inputs are slices of wider tensors: columns
 * 1..n of [..., n + 2]. A slice's gradient is a view into its base's, with
 * rows longer than the slice's, so this checks that every backward writes
 * through the gradient's strides; the columns outside get zeros. (A backward
 * that finds its matrices in the wrong place but writes the right values,
 * as batched matmul did, shows only in the sanitizer build.) */
typedef struct sliced_user {
    const op_case *k;
    dc_tensor *w;
    bool sliced[3];
} sliced_user;

static dc_tensor *sliced_case_loss(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    const sliced_user *u = user;
    dc_tensor *x[3] = {NULL, NULL, NULL};
    for (int i = 0; i < u->k->n_in; ++i) {
        const int nd = dc_tensor_ndim(inputs[i]);
        x[i] = u->sliced[i] ? dc_op_slice(tape, inputs[i], nd - 1, 1, dc_tensor_dim(inputs[i], nd - 1) - 2) : inputs[i];
    }
    return dc_op_sum(tape, dc_op_mul(tape, u->k->build(tape, x, &u->k->arg), u->w), 0, NULL, false);
}

static void test_gradcheck_sliced_inputs(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    int checked = 0;
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        if (k->arg.straight_through || k->large)
            continue; /* not the derivative (test_gradcheck_table checks it exactly); too large */
        case_inputs in;
        make_inputs(ctx, c, DC_F64, true, &in);
        reference r;
        compute_reference(k, in.v, &r);
        dc_tensor *w = test_random(ctx, DC_F64, r.shape.nd, r.shape.d, -1.0, 1.0);
        sliced_user u = {k, w, {false, false, false}};
        dc_tensor *wide[3] = {NULL, NULL, NULL}, *used[3];
        bool any = false;
        for (int i = 0; i < k->n_in; ++i) {
            used[i] = in.t[i];
            const shp *sh = &k->shape[i];
            if (!k->grad[i] || sh->nd == 0)
                continue;
            shp ws = *sh;
            ws.d[ws.nd - 1] += 2;
            wide[i] = test_random(ctx, DC_F64, ws.nd, ws.d, -1.0, 1.0);
            const int64_t n = sh->d[sh->nd - 1], numel = shp_numel(sh);
            for (int64_t e = 0; n > 0 && e < numel; ++e)
                TEST_OK(ctx, dc_tensor_set(wide[i], e / n * (n + 2) + e % n + 1, in.v[i][e]));
            TEST_OK(ctx, dc_tensor_set_requires_grad(wide[i], true));
            used[i] = wide[i];
            u.sliced[i] = any = true;
        }
        if (any) {
            dc_gradcheck_report rep;
            dc_status st = dc_gradcheck(ctx, sliced_case_loss, &u, k->n_in, used, NULL, &rep);
            if (st != DC_OK)
                fail_msg("case %d (%s) on sliced inputs: gradcheck %s, worst: input %d element %lld (backprop %.17g, "
                         "numeric %.17g): %s",
                         c, k->name, dc_status_name(st), rep.worst_input, (long long)rep.worst_index,
                         rep.worst_backprop, rep.worst_numeric, dc_last_error(ctx));
            ++checked;
        }
        for (int i = 0; i < 3; ++i)
            dc_tensor_free(wide[i]);
        dc_tensor_free(w);
        free_reference(&r);
        free_inputs(&in);
    }
    assert_true(checked > N_CASES / 2);
    dc_ctx_free(ctx);
}

/* Recording off: no node, the same values, an output that needs no gradient. */
static void test_recording_off(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        case_inputs in;
        make_inputs(ctx, c, DC_F64, true, &in);
        reference r;
        compute_reference(k, in.v, &r);
        const int64_t n = shp_numel(&r.shape);

        dc_tape *on = dc_tape_new(ctx);
        dc_tensor *y_on = run_case(ctx, on, c, &in, &r.shape, DC_F64);
        if (dc_tape_node_count(on) == 0)
            fail_msg("case %d (%s): recording on, inputs requiring gradients, but no node was recorded", c, k->name);
        if (!dc_tensor_requires_grad(y_on))
            fail_msg("case %d (%s): recording on, the output does not require a gradient", c, k->name);

        dc_tape *off = dc_tape_new(ctx);
        if (!dc_tape_set_recording(off, false))
            fail_msg("case %d (%s): a new tape was not recording", c, k->name);
        if (dc_tape_is_recording(off))
            fail_msg("case %d (%s): recording is still on after turning it off", c, k->name);
        dc_tensor *y_off = run_case(ctx, off, c, &in, &r.shape, DC_F64);
        if (dc_tape_node_count(off) != 0)
            fail_msg("case %d (%s): recording off, but %zu nodes were recorded", c, k->name, dc_tape_node_count(off));
        if (dc_tensor_requires_grad(y_off))
            fail_msg("case %d (%s): recording off, the output requires a gradient", c, k->name);
        double *von = test_values(y_on), *voff = test_values(y_off);
        for (int64_t e = 0; e < n; ++e)
            if (!(von[e] == voff[e]))
                fail_msg("case %d (%s): element %lld is %.17g recording off and %.17g recording on", c, k->name,
                         (long long)e, voff[e], von[e]);
        /* Nothing to differentiate on that tape. */
        dc_tensor *loss = dc_op_sum(off, y_off, 0, NULL, false);
        TEST_NONNULL(ctx, loss);
        const dc_status st = dc_backward(off, loss);
        if (st == DC_OK)
            fail_msg("case %d (%s): backward through a tape that recorded nothing succeeded", c, k->name);
        free(von);
        free(voff);
        dc_tape_free(on);
        dc_tape_free(off);
        free_reference(&r);
        free_inputs(&in);
    }
    dc_ctx_free(ctx);
}

static double *grad_of(dc_ctx *ctx, const char *what, const char *input, const dc_tensor *t)
{
    const dc_tensor *g = dc_tensor_grad(t);
    if (!g)
        fail_msg("%s: %s has no gradient: %s", what, input, dc_last_error(ctx));
    return test_values(g);
}

/* Gradients of every case: written over a stale buffer on the first pass
 * (after dc_tensor_zero_grad), and added to on a second pass. The first pass
 * must equal the gradient of fresh tensors that never had one. */
static double **case_grads(dc_ctx *ctx, int c, dc_tensor *const *t, dc_tensor *w, const char *what)
{
    const op_case *k = &cases[c];
    loss_user u = {k, w};
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *loss = case_loss(tape, t, &u);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    double **g = calloc(3, sizeof *g);
    assert_non_null(g);
    for (int i = 0; i < k->n_in; ++i)
        if (k->grad[i])
            g[i] = grad_of(ctx, what, "an input", t[i]);
    dc_tape_free(tape);
    return g;
}

static void free_grads(double **g)
{
    for (int i = 0; i < 3; ++i)
        free(g[i]);
    free(g);
}

/* What each gradient element of case c sums, in magnitude: for input i and
 * element e, mag[i][e] = sum over the output elements o of |dy_o/dx_e| |w_o|
 * and terms[i][e] the number of those terms that are not zero. The Jacobian
 * comes column by column from backward passes seeded with unit adjoints. */
static void summed_magnitudes(dc_ctx *ctx, int c, dc_dtype dtype, dc_tensor *w, double **mag, int64_t **terms)
{
    const op_case *k = &cases[c];
    case_inputs in;
    make_inputs(ctx, c, dtype, true, &in);
    double *wv = test_values(w);
    const int64_t n_out = dc_tensor_numel(w);
    for (int i = 0; i < k->n_in; ++i) {
        mag[i] = NULL;
        terms[i] = NULL;
        if (!k->grad[i])
            continue;
        const int64_t n = shp_numel(&k->shape[i]);
        mag[i] = calloc((size_t)(n ? n : 1), sizeof *mag[i]);
        terms[i] = calloc((size_t)(n ? n : 1), sizeof *terms[i]);
        assert_true(mag[i] && terms[i]);
    }
    for (int64_t o = 0; o < n_out; ++o) {
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *y = k->build(tape, in.t, &k->arg);
        TEST_NONNULL(ctx, y);
        dc_tensor *unit = dc_tensor_new(ctx, dtype, dc_tensor_ndim(y), dc_tensor_shape(y));
        TEST_NONNULL(ctx, unit);
        TEST_OK(ctx, dc_tensor_set(unit, o, 1.0));
        for (int i = 0; i < k->n_in; ++i)
            dc_tensor_zero_grad(in.t[i]);
        TEST_OK(ctx, dc_backward_with(tape, y, unit));
        for (int i = 0; i < k->n_in; ++i) {
            if (!k->grad[i])
                continue;
            double *col = grad_of(ctx, "the Jacobian", "an input", in.t[i]);
            for (int64_t e = 0; e < shp_numel(&k->shape[i]); ++e) {
                mag[i][e] += fabs(col[e]) * fabs(wv[o]);
                terms[i][e] += col[e] != 0 && wv[o] != 0;
            }
            free(col);
        }
        dc_tensor_free(unit);
        dc_tape_free(tape);
    }
    free(wv);
    free_inputs(&in);
}

/* A gradient is written by the first backward pass that reaches it after
 * dc_tensor_zero_grad (a stale value underneath is never read), and later
 * passes add to it. What the library promises of that sum is what floating
 * point gives a sum of terms in an unspecified order: a pass may add its
 * terms into the stored gradient one by one (a BLAS adds its products into
 * C, with fused multiply-adds or not) instead of adding their rounded sum.
 * So two passes over the same values give twice the first pass's gradient
 * within the rounding error of both sums, which is bounded by the number of
 * terms summed times their magnitudes, never by the result (a sum that
 * cancels has a small result and a large error). */
static void test_gradients_overwrite_then_accumulate(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        if (k->large)
            continue; /* its Jacobian, column by column, would take too long */
        for (int dt = 0; dt < 2; ++dt) {
            const dc_dtype dtype = dt ? DC_F64 : DC_F32;
            case_inputs fresh, used;
            make_inputs(ctx, c, dtype, true, &fresh);
            make_inputs(ctx, c, dtype, true, &used);
            reference r;
            compute_reference(k, fresh.v, &r);
            dc_tensor *w = test_random(ctx, dtype, r.shape.nd, r.shape.d, -1.0, 1.0);
            char what[160];
            snprintf(what, sizeof what, "case %d (%s), %s", c, k->name, dtype_str(dtype));
            /* A stale gradient of other values in `used`, then zeroed. */
            {
                dc_tape *tape = dc_tape_new(ctx);
                dc_tensor *loss = NULL;
                for (int i = 0; i < k->n_in; ++i) {
                    if (!k->grad[i])
                        continue;
                    dc_tensor *s = dc_op_sum(tape, dc_op_exp(tape, used.t[i]), 0, NULL, false);
                    loss = loss ? dc_op_add(tape, loss, s) : s;
                }
                TEST_NONNULL(ctx, loss);
                TEST_OK(ctx, dc_backward(tape, loss));
                dc_tape_free(tape);
                for (int i = 0; i < k->n_in; ++i)
                    dc_tensor_zero_grad(used.t[i]);
            }
            double **g0 = case_grads(ctx, c, fresh.t, w, what);
            double **g1 = case_grads(ctx, c, used.t, w, what);
            double **g2 = case_grads(ctx, c, used.t, w, what); /* no zero_grad: adds */
            double *mag[3];
            int64_t *terms[3];
            summed_magnitudes(ctx, c, dtype, w, mag, terms);
            const double eps = dtype == DC_F32 ? FLT_EPSILON : DBL_EPSILON;
            for (int i = 0; i < k->n_in; ++i) {
                if (!k->grad[i])
                    continue;
                for (int64_t e = 0; e < shp_numel(&k->shape[i]); ++e) {
                    if (g1[i][e] != g0[i][e])
                        fail_msg("%s: input %d element %lld: %.17g over a stale gradient, %.17g on a fresh tensor",
                                 what, i, (long long)e, g1[i][e], g0[i][e]);
                    /* Each sum of m terms (the second one has the stored
                     * gradient as one more) errs by at most about m eps
                     * times the sum of their magnitudes; products rounded
                     * apart from their sums count as one more term each. */
                    const double m = (double)terms[i][e] + 2;
                    const double tol = 2 * m * eps * (fabs(g0[i][e]) + mag[i][e]);
                    if (!(fabs(g2[i][e] - 2 * g0[i][e]) <= tol))
                        fail_msg("%s: input %d element %lld: %.17g after two passes, want 2 * %.17g within %.3g "
                                 "(%lld terms, of magnitudes summing to %.17g)",
                                 what, i, (long long)e, g2[i][e], g0[i][e], tol, (long long)terms[i][e], mag[i][e]);
                }
                free(mag[i]);
                free(terms[i]);
            }
            free_grads(g0);
            free_grads(g1);
            free_grads(g2);
            dc_tensor_free(w);
            free_reference(&r);
            free_inputs(&fresh);
            free_inputs(&used);
        }
    }
    dc_ctx_free(ctx);
}

/* dc_backward_with seeds the output's gradient with the adjoint as given:
 * contiguous, a transposed (strided) view, broadcast from fewer axes, or a
 * scalar. Every op's adjoint must read it in place of a contiguous one; the
 * gradients must equal those of loss = sum(y * adjoint) through dc_backward. */
typedef enum adjoint_layout { ADJ_CONTIGUOUS, ADJ_TRANSPOSED, ADJ_ROW, ADJ_SCALAR, ADJ_LAYOUTS } adjoint_layout;

static const char *const adjoint_layout_names[ADJ_LAYOUTS] = {"contiguous", "a transposed view", "a broadcast row",
                                                                "a scalar"};

static void test_backward_with_adjoint_layouts(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int c = 0; c < N_CASES; ++c) {
        const op_case *k = &cases[c];
        if (k->arg.straight_through || k->large)
            continue;
        case_inputs in;
        make_inputs(ctx, c, DC_F64, true, &in);
        reference r;
        compute_reference(k, in.v, &r);
        const shp *ys = &r.shape;
        for (int layout = 0; layout < ADJ_LAYOUTS; ++layout) {
            if (layout == ADJ_TRANSPOSED && (ys->nd < 2 || ys->d[ys->nd - 1] < 2 || ys->d[ys->nd - 2] < 2))
                continue;
            if (layout == ADJ_ROW && ys->nd < 2)
                continue;
            /* The adjoint's values as a persistent tensor `src`, and the
             * same values broadcast to y's shape as `full`. */
            shp src_shape = *ys;
            if (layout == ADJ_TRANSPOSED) {
                src_shape.d[ys->nd - 1] = ys->d[ys->nd - 2];
                src_shape.d[ys->nd - 2] = ys->d[ys->nd - 1];
            } else if (layout == ADJ_ROW) {
                src_shape.nd = 1;
                src_shape.d[0] = ys->d[ys->nd - 1];
            } else if (layout == ADJ_SCALAR) {
                src_shape.nd = 0;
            }
            dc_tensor *src = test_random(ctx, DC_F64, src_shape.nd, src_shape.d, 0.5, 1.5);
            dc_tensor *full = dc_tensor_new(ctx, DC_F64, ys->nd, ys->d);
            TEST_NONNULL(ctx, full);
            {
                double *sv = test_values(src);
                for (int64_t e = 0; e < shp_numel(ys); ++e) {
                    int64_t cc[DC_MAX_DIMS];
                    coords_of(ys, e, cc);
                    int64_t from = 0;
                    if (layout == ADJ_CONTIGUOUS)
                        from = e;
                    else if (layout == ADJ_TRANSPOSED) {
                        const int64_t tmp = cc[ys->nd - 1];
                        cc[ys->nd - 1] = cc[ys->nd - 2];
                        cc[ys->nd - 2] = tmp;
                        from = flat_of(&src_shape, cc);
                    }
                    else if (layout == ADJ_ROW)
                        from = cc[ys->nd - 1];
                    TEST_OK(ctx, dc_tensor_set(full, e, sv[from]));
                }
                free(sv);
            }
            char what[200];
            snprintf(what, sizeof what, "case %d (%s), adjoint %s", c, k->name, adjoint_layout_names[layout]);

            /* Reference: dc_backward of sum(y * full). */
            double *want[3] = {NULL, NULL, NULL};
            {
                for (int i = 0; i < k->n_in; ++i)
                    dc_tensor_zero_grad(in.t[i]);
                dc_tape *tape = dc_tape_new(ctx);
                dc_tensor *y = k->build(tape, in.t, &k->arg);
                dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, y, full), 0, NULL, false);
                TEST_NONNULL(ctx, loss);
                TEST_OK(ctx, dc_backward(tape, loss));
                for (int i = 0; i < k->n_in; ++i)
                    if (k->grad[i])
                        want[i] = grad_of(ctx, what, "an input (reference)", in.t[i]);
                dc_tape_free(tape);
            }
            /* dc_backward_with(y, adjoint) */
            {
                for (int i = 0; i < k->n_in; ++i)
                    dc_tensor_zero_grad(in.t[i]);
                dc_tape *tape = dc_tape_new(ctx);
                dc_tensor *y = k->build(tape, in.t, &k->arg);
                TEST_NONNULL(ctx, y);
                const dc_tensor *adj = src;
                if (layout == ADJ_TRANSPOSED) {
                    adj = dc_op_transpose(tape, src, -1, -2);
                    TEST_NONNULL(ctx, adj);
                    if (dc_tensor_is_contiguous(adj))
                        fail_msg("%s: the transposed adjoint is contiguous", what);
                }
                TEST_OK(ctx, dc_backward_with(tape, y, adj));
                for (int i = 0; i < k->n_in; ++i) {
                    if (!k->grad[i])
                        continue;
                    double *got = grad_of(ctx, what, "an input", in.t[i]);
                    const int64_t n = shp_numel(&k->shape[i]);
                    double scale = 0;
                    for (int64_t e = 0; e < n; ++e)
                        scale = fmax(scale, fabs(want[i][e]));
                    for (int64_t e = 0; e < n; ++e)
                        if (!(fabs(got[e] - want[i][e]) <= 1e-12 * (fabs(want[i][e]) + scale)))
                            fail_msg("%s: gradient of input %d element %lld: %.17g, want %.17g", what, i,
                                     (long long)e, got[e], want[i][e]);
                    free(got);
                }
                dc_tape_free(tape);
            }
            for (int i = 0; i < 3; ++i)
                free(want[i]);
            dc_tensor_free(src);
            dc_tensor_free(full);
        }
        free_reference(&r);
        free_inputs(&in);
    }
    dc_ctx_free(ctx);
}

/* Sums and means over an axis of size 0: a sum of nothing is 0, a mean of
 * nothing is NaN (0 / 0, as NumPy and PyTorch give it); the gradient of the
 * empty input has no elements and the others are untouched. */
static void test_reduce_empty_axis(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {0, 3};
    const int axis0[1] = {0}, axis_last[1] = {-1};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        dc_tensor *x = dc_tensor_new(ctx, dtype, 2, shape);
        TEST_NONNULL(ctx, x);
        dc_tape *tape = dc_tape_new(ctx);
        struct {
            const char *name;
            dc_tensor *y;
            int64_t numel;
            bool mean;
        } r[] = {
            {"sum over axis 0 of [0, 3]", dc_op_sum(tape, x, 1, axis0, false), 3, false},
            {"sum over every axis of [0, 3]", dc_op_sum(tape, x, 0, NULL, false), 1, false},
            {"sum over axis -1 of [0, 3]", dc_op_sum(tape, x, 1, axis_last, true), 0, false},
            {"mean over axis 0 of [0, 3]", dc_op_mean(tape, x, 1, axis0, false), 3, true},
            {"mean over every axis of [0, 3]", dc_op_mean(tape, x, 0, NULL, true), 1, true},
        };
        for (size_t i = 0; i < sizeof r / sizeof r[0]; ++i) {
            if (!r[i].y)
                fail_msg("%s, %s: NULL: %s", r[i].name, dtype_str(dtype), dc_last_error(ctx));
            assert_int_equal(dc_tensor_numel(r[i].y), r[i].numel);
            double *v = test_values(r[i].y);
            for (int64_t e = 0; e < r[i].numel; ++e)
                if (r[i].mean ? !isnan(v[e]) : v[e] != 0.0)
                    fail_msg("%s, %s: element %lld is %g, want %s", r[i].name, dtype_str(dtype), (long long)e, v[e],
                             r[i].mean ? "NaN (the mean of nothing)" : "0");
            free(v);
        }
        dc_tape_free(tape);
        dc_tensor_free(x);
    }
    dc_ctx_free(ctx);
}

/* ---- select and values that are not finite ---- */

static void assert_finite_grad(const char *what, const char *input, const double *g, int64_t n)
{
    for (int64_t e = 0; e < n; ++e)
        if (!isfinite(g[e]))
            fail_msg("%s: gradient of %s element %lld is %g", what, input, (long long)e, g[e]);
}

static void expect_grad(const char *what, const char *input, const double *g, const double *want, int64_t n,
                        double rtol)
{
    for (int64_t e = 0; e < n; ++e) {
        if (want[e] == 0.0 ? g[e] != 0.0 : !(fabs(g[e] - want[e]) <= rtol * fabs(want[e])))
            fail_msg("%s: gradient of %s element %lld: %.17g, want %.17g%s", what, input, (long long)e, g[e], want[e],
                     want[e] == 0.0 ? " exactly" : "");
    }
}

/* a = log(x) with x <= 0 (NaN, -Inf) where cond takes b. */
static void run_select_log(dc_ctx *ctx, dc_dtype dt)
{
    char what[128];
    snprintf(what, sizeof what, "select(cond, log(x), y), %s", dtype_str(dt));
    const int64_t shape[2] = {4, 5};
    const int64_t n = 20;
    double xv[20], cv[20], yv[20];
    static const double bad[4] = {0.0, -0.0, -1.0, -3.5};
    for (int64_t e = 0; e < n; ++e) {
        const bool take_a = e % 3 != 1;
        cv[e] = take_a ? 1.0 : 0.0;
        xv[e] = take_a ? 0.25 + 0.125 * (double)e : bad[e % 4];
        yv[e] = 0.5 - 0.0625 * (double)e;
    }
    dc_tensor *x = test_tensor(ctx, dt, 2, shape, xv), *cond = test_tensor(ctx, dt, 2, shape, cv);
    dc_tensor *y = test_tensor(ctx, dt, 2, shape, yv);
    dc_tensor *g = test_random(ctx, dt, 2, shape, 0.5, 1.5); /* never 0 */
    dc_tensor_set_requires_grad(x, true);
    dc_tensor_set_requires_grad(y, true);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *out = dc_op_select(tape, cond, dc_op_log(tape, x), y);
    TEST_NONNULL(ctx, out);
    TEST_OK(ctx, dc_backward_with(tape, out, g));
    double *gv = test_values(g), *ov = test_values(out);
    double *gx = grad_of(ctx, what, "x", x), *gy = grad_of(ctx, what, "y", y);
    double wx[20], wy[20], wo[20];
    for (int64_t e = 0; e < n; ++e) {
        wx[e] = cv[e] != 0 ? gv[e] / xv[e] : 0.0;
        wy[e] = cv[e] != 0 ? 0.0 : gv[e];
        wo[e] = cv[e] != 0 ? log(xv[e]) : yv[e];
    }
    const double rtol = dt == DC_F32 ? 1e-6 : 1e-14;
    for (int64_t e = 0; e < n; ++e)
        if (!isfinite(ov[e]) || fabs(ov[e] - wo[e]) > rtol * fabs(wo[e]) + 1e-7)
            fail_msg("%s: output element %lld: %.17g, want %.17g", what, (long long)e, ov[e], wo[e]);
    assert_finite_grad(what, "x", gx, n);
    assert_finite_grad(what, "y", gy, n);
    expect_grad(what, "x", gx, wx, n, rtol);
    expect_grad(what, "y", gy, wy, n, rtol);
    free(gv);
    free(ov);
    free(gx);
    free(gy);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(cond);
    dc_tensor_free(y);
    dc_tensor_free(g);
}

/* b holds +-Inf and NaN where cond takes a; b = exp(z) and 1 / q overflow
 * there too; a = x * t with t infinite where not taken. */
static void run_select_inf(dc_ctx *ctx, dc_dtype dt)
{
    char what[160];
    const int64_t shape[2] = {4, 5};
    const int64_t n = 20;
    double cv[20], xv[20], tv[20], bv[20], zv[20], qv[20];
    for (int64_t e = 0; e < n; ++e) {
        const bool take_a = e % 4 != 2;
        cv[e] = take_a ? 1.0 : 0.0;
        xv[e] = 0.1 * (double)(e + 1);
        tv[e] = take_a ? 1.5 - 0.1 * (double)e : (e % 8 == 2 ? INFINITY : -INFINITY);
        bv[e] = take_a ? (e % 3 == 0 ? INFINITY : e % 3 == 1 ? -INFINITY : NAN) : 0.25 * (double)e;
        zv[e] = take_a ? 1000.0 : -0.5 + 0.05 * (double)e;
        qv[e] = take_a ? 0.0 : 1.0 + 0.25 * (double)e;
    }
    dc_tensor *cond = test_tensor(ctx, dt, 2, shape, cv), *x = test_tensor(ctx, dt, 2, shape, xv);
    dc_tensor *t = test_tensor(ctx, dt, 2, shape, tv), *b = test_tensor(ctx, dt, 2, shape, bv);
    dc_tensor *z = test_tensor(ctx, dt, 2, shape, zv), *q = test_tensor(ctx, dt, 2, shape, qv);
    dc_tensor *g = test_random(ctx, dt, 2, shape, 0.5, 1.5);
    dc_tensor *all[4] = {x, b, z, q};
    for (int i = 0; i < 4; ++i)
        dc_tensor_set_requires_grad(all[i], true);
    double *gv = test_values(g);
    const double rtol = dt == DC_F32 ? 1e-6 : 1e-14;

    for (int variant = 0; variant < 3; ++variant) {
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *a = dc_op_mul(tape, x, t), *side_b;
        const char *bname;
        if (variant == 0) {
            side_b = b;
            bname = "b (infinite and NaN where not taken)";
        } else if (variant == 1) {
            side_b = dc_op_exp(tape, z);
            bname = "z of exp(z) (infinite where not taken)";
        } else {
            dc_tensor *one = dc_tape_scalar(tape, dt, 1.0);
            side_b = dc_op_div(tape, one, q);
            bname = "q of 1 / q (infinite where not taken)";
        }
        dc_tensor *out = dc_op_select(tape, cond, a, side_b);
        TEST_NONNULL(ctx, out);
        for (int i = 0; i < 4; ++i)
            dc_tensor_zero_grad(all[i]);
        TEST_OK(ctx, dc_backward_with(tape, out, g));
        snprintf(what, sizeof what, "select(cond, x * t, %s), %s", bname, dtype_str(dt));
        double *ov = test_values(out);
        for (int64_t e = 0; e < n; ++e)
            if (!isfinite(ov[e]))
                fail_msg("%s: output element %lld is %g", what, (long long)e, ov[e]);
        free(ov);
        double *gx = grad_of(ctx, what, "x", x);
        double wx[20], wb[20];
        for (int64_t e = 0; e < n; ++e) {
            wx[e] = cv[e] != 0 ? gv[e] * tv[e] : 0.0;
            if (variant == 0)
                wb[e] = cv[e] != 0 ? 0.0 : gv[e];
            else if (variant == 1)
                wb[e] = cv[e] != 0 ? 0.0 : gv[e] * exp(zv[e]);
            else
                wb[e] = cv[e] != 0 ? 0.0 : -gv[e] / (qv[e] * qv[e]);
        }
        assert_finite_grad(what, "x", gx, n);
        expect_grad(what, "x", gx, wx, n, rtol);
        dc_tensor *src = variant == 0 ? b : variant == 1 ? z : q;
        double *gb = grad_of(ctx, what, bname, src);
        assert_finite_grad(what, bname, gb, n);
        expect_grad(what, bname, gb, wb, n, dt == DC_F32 ? 2e-6 : 1e-13);
        free(gx);
        free(gb);
        dc_tape_free(tape);
    }
    free(gv);
    for (int i = 0; i < 4; ++i)
        dc_tensor_free(all[i]);
    dc_tensor_free(cond);
    dc_tensor_free(t);
    dc_tensor_free(g);
}

/* Broadcast sides: a = log(xa) with xa [5] non-positive in column 2, never
 * taken; b [1, 5] infinite in columns never taken. Their gradients are sums
 * over rows of exact zeros there. */
static void run_select_broadcast(dc_ctx *ctx, dc_dtype dt)
{
    char what[128];
    snprintf(what, sizeof what, "select(cond [4, 5], log(xa [5]), b [1, 5]), %s", dtype_str(dt));
    const int64_t cs[2] = {4, 5}, as[1] = {5}, bs[2] = {1, 5};
    double cv[20], av[5] = {0.5, 1.5, -1.0, 2.0, 0.75}, bv[5] = {INFINITY, 0.5, -0.25, NAN, -INFINITY};
    for (int e = 0; e < 20; ++e)
        cv[e] = e % 5 != 2 ? 1.0 : 0.0; /* column 2 takes b, the others a */
    dc_tensor *cond = test_tensor(ctx, dt, 2, cs, cv), *xa = test_tensor(ctx, dt, 1, as, av);
    dc_tensor *b = test_tensor(ctx, dt, 2, bs, bv);
    dc_tensor *g = test_random(ctx, dt, 2, cs, 0.5, 1.5);
    dc_tensor_set_requires_grad(xa, true);
    dc_tensor_set_requires_grad(b, true);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *out = dc_op_select(tape, cond, dc_op_log(tape, xa), b);
    TEST_NONNULL(ctx, out);
    TEST_OK(ctx, dc_backward_with(tape, out, g));
    double *gv = test_values(g);
    double wa[5] = {0}, wb[5] = {0};
    for (int e = 0; e < 20; ++e) {
        const int j = e % 5;
        if (cv[e] != 0)
            wa[j] += gv[e] / av[j];
        else
            wb[j] += gv[e];
    }
    double *ga = grad_of(ctx, what, "xa", xa), *gb = grad_of(ctx, what, "b", b);
    assert_finite_grad(what, "xa", ga, 5);
    assert_finite_grad(what, "b", gb, 5);
    expect_grad(what, "xa", ga, wa, 5, dt == DC_F32 ? 1e-5 : 1e-13);
    expect_grad(what, "b", gb, wb, 5, dt == DC_F32 ? 1e-5 : 1e-13);
    free(gv);
    free(ga);
    free(gb);
    dc_tape_free(tape);
    dc_tensor_free(cond);
    dc_tensor_free(xa);
    dc_tensor_free(b);
    dc_tensor_free(g);
}

static void test_select_blocks_nonfinite(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        run_select_log(ctx, dtype);
        run_select_inf(ctx, dtype);
        run_select_broadcast(ctx, dtype);
    }
    dc_ctx_free(ctx);
}

/* ---- one tensor used twice ---- */

#define SQ 5 /* x is [SQ, SQ] */

typedef struct twice_case {
    const char *name;
    dc_tensor *(*build)(dc_tape *tape, dc_tensor *x, dc_tensor *cond);
    /* d(sum(f(x) * w))/dx, from x and w (SQ x SQ, row-major) */
    void (*grad)(const double *x, const double *w, const double *cond, double *g);
} twice_case;

static dc_tensor *tw_mul(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_mul(t, x, x); }
static dc_tensor *tw_add(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_add(t, x, x); }
static dc_tensor *tw_sub(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_sub(t, x, x); }
static dc_tensor *tw_div(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_div(t, x, x); }
static dc_tensor *tw_pow(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_pow(t, x, x); }
static dc_tensor *tw_select(dc_tape *t, dc_tensor *x, dc_tensor *c) { return dc_op_select(t, c, x, x); }
static dc_tensor *tw_matmul(dc_tape *t, dc_tensor *x, dc_tensor *c) { (void)c; return dc_op_matmul(t, x, x); }
static dc_tensor *tw_matmul_t(dc_tape *t, dc_tensor *x, dc_tensor *c)
{
    (void)c;
    return dc_op_matmul(t, x, dc_op_transpose(t, x, 0, 1));
}
static dc_tensor *tw_mul_t(dc_tape *t, dc_tensor *x, dc_tensor *c)
{
    (void)c;
    return dc_op_mul(t, x, dc_op_transpose(t, x, 0, 1));
}
static dc_tensor *tw_two_ops(dc_tape *t, dc_tensor *x, dc_tensor *c)
{
    (void)c;
    return dc_op_add(t, dc_op_exp(t, x), dc_op_affine(t, x, 3.0, 1.0));
}
static dc_tensor *tw_chain(dc_tape *t, dc_tensor *x, dc_tensor *c)
{
    (void)c;
    dc_tensor *y = dc_op_tanh(t, x);
    return dc_op_mul(t, y, dc_op_add(t, y, x));
}

#define AT(m, i, j) (m)[(i) * SQ + (j)]

static void g_mul(const double *x, const double *w, const double *c, double *g)
{
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = 2 * x[e] * w[e];
}
static void g_add(const double *x, const double *w, const double *c, double *g)
{
    (void)x;
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = 2 * w[e];
}
static void g_sub(const double *x, const double *w, const double *c, double *g)
{
    (void)x;
    (void)w;
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = 0;
}
static void g_div(const double *x, const double *w, const double *c, double *g)
{
    /* w / x - w * x / x^2 = 0 up to rounding */
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = w[e] / x[e] - w[e] * (x[e] / x[e]) / x[e];
}
static void g_pow(const double *x, const double *w, const double *c, double *g)
{
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = w[e] * (x[e] * pow(x[e], x[e] - 1) + pow(x[e], x[e]) * log(x[e]));
}
static void g_select(const double *x, const double *w, const double *c, double *g)
{
    (void)x;
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = w[e];
}
static void g_matmul(const double *x, const double *w, const double *c, double *g)
{
    /* d/dx sum((x x) * w) = w x^T + x^T w */
    (void)c;
    for (int i = 0; i < SQ; ++i)
        for (int j = 0; j < SQ; ++j) {
            double s = 0;
            for (int q = 0; q < SQ; ++q)
                s += AT(w, i, q) * AT(x, j, q) + AT(x, q, i) * AT(w, q, j);
            AT(g, i, j) = s;
        }
}
static void g_matmul_t(const double *x, const double *w, const double *c, double *g)
{
    /* d/dx sum((x x^T) * w) = (w + w^T) x */
    (void)c;
    for (int i = 0; i < SQ; ++i)
        for (int j = 0; j < SQ; ++j) {
            double s = 0;
            for (int q = 0; q < SQ; ++q)
                s += (AT(w, i, q) + AT(w, q, i)) * AT(x, q, j);
            AT(g, i, j) = s;
        }
}
static void g_mul_t(const double *x, const double *w, const double *c, double *g)
{
    /* d/dx_ij sum_kl x_kl x_lk w_kl = x_ji (w_ij + w_ji) */
    (void)c;
    for (int i = 0; i < SQ; ++i)
        for (int j = 0; j < SQ; ++j)
            AT(g, i, j) = AT(x, j, i) * (AT(w, i, j) + AT(w, j, i));
}
static void g_two_ops(const double *x, const double *w, const double *c, double *g)
{
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e)
        g[e] = w[e] * (exp(x[e]) + 3.0);
}
static void g_chain(const double *x, const double *w, const double *c, double *g)
{
    /* f = y (y + x), y = tanh x: f' = y' (y + x) + y (y' + 1) */
    (void)c;
    for (int e = 0; e < SQ * SQ; ++e) {
        const double y = tanh(x[e]), dy = 1 - y * y;
        g[e] = w[e] * (dy * (y + x[e]) + y * (dy + 1));
    }
}

static const twice_case twice_cases[] = {
    {"mul(x, x)", tw_mul, g_mul},
    {"add(x, x)", tw_add, g_add},
    {"sub(x, x)", tw_sub, g_sub},
    {"div(x, x)", tw_div, g_div},
    {"pow(x, x)", tw_pow, g_pow},
    {"select(cond, x, x)", tw_select, g_select},
    {"matmul(x, x)", tw_matmul, g_matmul},
    {"matmul(x, transpose(x))", tw_matmul_t, g_matmul_t},
    {"mul(x, transpose(x))", tw_mul_t, g_mul_t},
    {"add(exp(x), affine(x, 3, 1))", tw_two_ops, g_two_ops},
    {"mul(tanh(x), add(tanh(x), x))", tw_chain, g_chain},
};

typedef struct twice_user {
    const twice_case *k;
    dc_tensor *w, *cond;
} twice_user;

static dc_tensor *twice_loss(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    const twice_user *u = user;
    return dc_op_sum(tape, dc_op_mul(tape, u->k->build(tape, inputs[0], u->cond), u->w), 0, NULL, false);
}

/* sum(x * x) for dc_gradcheck */
static dc_tensor *sum_of_squares_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    (void)user;
    return dc_op_sum(tape, dc_op_mul(tape, x[0], x[0]), 0, NULL, false);
}

/* max_per_input bounds the elements checked and spreads them: 0 checks all. */
static void test_gradcheck_max_per_input(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[1] = {10};
    dc_tensor *x = test_random(ctx, DC_F64, 1, shape, -1.0, 1.0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    const int64_t limits[] = {0, 1, 3, 6, 9, 10, 20}, want[] = {10, 1, 3, 6, 9, 10, 10};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; ++i) {
        dc_gradcheck_options o = dc_gradcheck_options_default();
        o.max_per_input = limits[i];
        dc_gradcheck_report rep;
        TEST_OK(ctx, dc_gradcheck(ctx, sum_of_squares_loss, NULL, 1, &x, &o, &rep));
        if (rep.checked != want[i])
            fail_msg("gradcheck with max_per_input %lld over 10 elements checked %lld, expected %lld",
                     (long long)limits[i], (long long)rep.checked, (long long)want[i]);
    }
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* Uniform values stay in [lo, hi) after rounding to the dtype; with no value
 * of the dtype there, every element is lo rounded; infinite bounds refused. */
static void test_fill_uniform_bounds(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[1] = {1 << 16};
    const struct {
        dc_dtype dtype;
        double lo, hi;
    } ranges[] = {
        {DC_F32, 16777216.0, 16777218.0}, /* floats 2 apart: only lo lies in [lo, hi) */
        {DC_F32, 0.0, 1.0},
        {DC_F32, 1.0, 1.0 + 0x1p-20},
        {DC_F64, 0.0, 1.0},
        {DC_F32, 0.7, 0.70000006}, /* lo is not a float: values round to it from below */
        {DC_F32, 3.0, 3.0},
        {DC_F64, -2.5, -2.5},
        {DC_F32, 0.1, 0.1}, /* no float in [lo, hi): lo, rounded */
        {DC_F64, -DBL_MAX, DBL_MAX},
        {DC_F64, -DBL_MAX, 0.0},
        {DC_F32, -FLT_MAX, FLT_MAX},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; ++i) {
        dc_tensor *t = dc_tensor_new(ctx, ranges[i].dtype, 1, shape);
        TEST_NONNULL(ctx, t);
        TEST_OK(ctx, dc_tensor_fill_uniform(t, ranges[i].lo, ranges[i].hi));
        double *v = test_values(t);
        /* a range wider than the largest double (hi - lo overflows) still spreads its values */
        if (ranges[i].hi - ranges[i].lo == INFINITY) {
            int distinct = 0;
            for (int64_t e = 1; e < shape[0]; ++e)
                distinct += v[e] != v[0];
            if (distinct < shape[0] / 2)
                fail_msg("fill_uniform(%s, %g, %g): only %d elements differ from the first",
                         dc_dtype_name(ranges[i].dtype), ranges[i].lo, ranges[i].hi, distinct);
        }
        const bool empty = ranges[i].lo == ranges[i].hi;
        const double lo_rounded = ranges[i].dtype == DC_F32 ? (double)(float)ranges[i].lo : ranges[i].lo;
        for (int64_t e = 0; e < shape[0]; ++e)
            if (empty ? v[e] != lo_rounded : !(v[e] >= ranges[i].lo && v[e] < ranges[i].hi))
                fail_msg("fill_uniform(%s, %.17g, %.17g): element %lld is %.17g", dc_dtype_name(ranges[i].dtype),
                         ranges[i].lo, ranges[i].hi, (long long)e, v[e]);
        free(v);
        dc_tensor_free(t);
    }
    /* bounds that are not finite are refused (nextafter from an infinity never moves) */
    dc_tensor *t = dc_tensor_new(ctx, DC_F32, 1, shape);
    TEST_NONNULL(ctx, t);
    const double bad[][2] = {{-INFINITY, -INFINITY}, {0.0, INFINITY}, {-INFINITY, 0.0}, {NAN, 1.0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        if (dc_tensor_fill_uniform(t, bad[i][0], bad[i][1]) != DC_ERR_ARG)
            fail_msg("fill_uniform(%g, %g): expected DC_ERR_ARG: %s", bad[i][0], bad[i][1], dc_last_error(ctx));
    /* and a normal fill with a mean or deviation that is not finite */
    const double bad_normal[][2] = {{NAN, 1.0}, {INFINITY, 1.0}, {0.0, INFINITY}, {0.0, NAN}, {0.0, -1.0}};
    for (size_t i = 0; i < sizeof bad_normal / sizeof bad_normal[0]; ++i)
        if (dc_tensor_fill_normal(t, bad_normal[i][0], bad_normal[i][1]) != DC_ERR_ARG)
            fail_msg("fill_normal(%g, %g): expected DC_ERR_ARG: %s", bad_normal[i][0], bad_normal[i][1],
                     dc_last_error(ctx));
    dc_tensor_free(t);
    dc_ctx_free(ctx);
}

/* dc_tensor_copy between views that share memory copies as if through a
 * temporary: x[1:] = x[:-1] shifts, and so does the other direction, in
 * both dtypes and in two dimensions. */
static void test_copy_between_overlapping_views(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        const int64_t n = 5000, shape[1] = {n};
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t e = 0; e < n; ++e)
            v[e] = (double)e;
        for (int dir = 0; dir < 2; ++dir) {
            dc_tensor *x = test_tensor(ctx, dtype, 1, shape, v);
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *head = dc_op_slice(tape, x, 0, 0, n - 1), *tail = dc_op_slice(tape, x, 0, 1, n - 1);
            TEST_OK(ctx, dir == 0 ? dc_tensor_copy(tail, head) : dc_tensor_copy(head, tail));
            double *got = test_values(x);
            for (int64_t e = 0; e < n; ++e) {
                const double want = dir == 0 ? (e == 0 ? 0.0 : (double)(e - 1)) : (e == n - 1 ? (double)e : (double)(e + 1));
                if (got[e] != want)
                    fail_msg("%s, x[%s] = x[%s]: element %lld is %g, want %g", dc_dtype_name(dtype),
                             dir == 0 ? "1:" : ":-1", dir == 0 ? ":-1" : "1:", (long long)e, got[e], want);
            }
            free(got);
            dc_tape_free(tape);
            dc_tensor_free(x);
        }
        free(v);
    }
    /* a transposed square onto itself: x = x^T */
    const int64_t sq[2] = {40, 40};
    double *v = malloc(40 * 40 * sizeof *v);
    for (int e = 0; e < 1600; ++e)
        v[e] = e;
    dc_tensor *x = test_tensor(ctx, DC_F64, 2, sq, v);
    dc_tape *tape = dc_tape_new(ctx);
    TEST_OK(ctx, dc_tensor_copy(x, dc_op_transpose(tape, x, 0, 1)));
    double *got = test_values(x);
    for (int i = 0; i < 40; ++i)
        for (int j = 0; j < 40; ++j)
            if (got[i * 40 + j] != v[j * 40 + i])
                fail_msg("x = x^T: element (%d, %d) is %g, want %g", i, j, got[i * 40 + j], v[j * 40 + i]);
    free(got);
    free(v);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

static void test_same_tensor_twice(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {SQ, SQ};
    double xv[SQ * SQ], cv[SQ * SQ];
    for (int e = 0; e < SQ * SQ; ++e) {
        xv[e] = (double)(float)(0.3 + 0.07 * (double)((e * 7) % 25)); /* positive: pow(x, x) */
        cv[e] = (double)((e * 3) % 2);
    }
    for (size_t c = 0; c < sizeof twice_cases / sizeof twice_cases[0]; ++c) {
        const twice_case *k = &twice_cases[c];
        for (int dt = 0; dt < 2; ++dt) {
            const dc_dtype dtype = dt ? DC_F64 : DC_F32;
            char what[128];
            snprintf(what, sizeof what, "%s, %s", k->name, dtype_str(dtype));
            dc_tensor *x = test_tensor(ctx, dtype, 2, shape, xv);
            dc_tensor *cond = test_tensor(ctx, dtype, 2, shape, cv);
            dc_tensor *w = test_random(ctx, dtype, 2, shape, -1.0, 1.0);
            TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
            twice_user u = {k, w, cond};
            /* A stale gradient buffer first: the pass below must overwrite it. */
            {
                dc_tape *tape = dc_tape_new(ctx);
                dc_tensor *l = dc_op_sum(tape, dc_op_exp(tape, x), 0, NULL, false);
                TEST_OK(ctx, dc_backward(tape, l));
                dc_tape_free(tape);
                dc_tensor_zero_grad(x);
            }
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *x_in[1] = {x};
            dc_tensor *loss = twice_loss(tape, x_in, &u);
            TEST_NONNULL(ctx, loss);
            TEST_OK(ctx, dc_backward(tape, loss));
            double *wv = test_values(w), *xd = test_values(x);
            double want[SQ * SQ];
            k->grad(xd, wv, cv, want);
            double *got = grad_of(ctx, what, "x", x);
            const double rtol = dtype == DC_F32 ? 1e-5 : 1e-12;
            double scale = 0;
            for (int e = 0; e < SQ * SQ; ++e)
                scale = fmax(scale, fabs(want[e]));
            for (int e = 0; e < SQ * SQ; ++e)
                if (!(fabs(got[e] - want[e]) <= rtol * (fabs(want[e]) + scale * 1e-3) + 1e-300))
                    fail_msg("%s: gradient of x element %d: %.17g, want %.17g", what, e, got[e], want[e]);
            free(got);
            free(wv);
            free(xd);
            dc_tape_free(tape);
            if (dtype == DC_F64) {
                dc_gradcheck_report rep;
                dc_status st = dc_gradcheck(ctx, twice_loss, &u, 1, x_in, NULL, &rep);
                if (st != DC_OK)
                    fail_msg("%s: gradcheck %s, element %lld: backprop %.17g, numeric %.17g: %s", what,
                             dc_status_name(st), (long long)rep.worst_index, rep.worst_backprop, rep.worst_numeric,
                             dc_last_error(ctx));
                assert_int_equal(rep.checked, SQ * SQ);
            }
            dc_tensor_free(x);
            dc_tensor_free(cond);
            dc_tensor_free(w);
        }
    }
    dc_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_values),
        cmocka_unit_test(test_gradcheck_table),
        cmocka_unit_test(test_gradcheck_sliced_inputs),
        cmocka_unit_test(test_gradcheck_max_per_input),
        cmocka_unit_test(test_fill_uniform_bounds),
        cmocka_unit_test(test_recording_off),
        cmocka_unit_test(test_gradients_overwrite_then_accumulate),
        cmocka_unit_test(test_backward_with_adjoint_layouts),
        cmocka_unit_test(test_reduce_empty_axis),
        cmocka_unit_test(test_select_blocks_nonfinite),
        cmocka_unit_test(test_same_tensor_twice),
        cmocka_unit_test(test_copy_between_overlapping_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
