/* User-written associative operators (include/dualcast/assoc.h, the
 * operators in tests/assoc/): reductions, scans and reductions by index
 * against sequential references written here, gradients against central
 * differences, determinism across thread counts, refusals of bad
 * arguments, and the CUDA backend against the CPU (skipped without a
 * device; DC_REQUIRE_CUDA=1 makes a missing device a failure, as in the
 * emulated copy tests/cuda_emulation runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

DC_ASSOC_DECLARE(usum);
DC_ASSOC_DECLARE(linrec);
DC_ASSOC_DECLARE(mat2);
DC_ASSOC_DECLARE(maxcount);
DC_ASSOC_DECLARE(ema_reset);

static dc_ctx *gpu; /* NULL without a usable CUDA device */

/* ---- the operators, sequentially, in double ---- */

typedef void (*ref_combine)(const double *l, const double *r, double *o);

static void ref_usum(const double *l, const double *r, double *o) { o[0] = l[0] + r[0]; }
static void ref_linrec(const double *l, const double *r, double *o)
{
    o[0] = r[0] * l[0];
    o[1] = r[0] * l[1] + r[1];
}
static void ref_mat2(const double *l, const double *r, double *o)
{
    o[0] = l[0] * r[0] + l[1] * r[2];
    o[1] = l[0] * r[1] + l[1] * r[3];
    o[2] = l[2] * r[0] + l[3] * r[2];
    o[3] = l[2] * r[1] + l[3] * r[3];
}
static void ref_maxcount(const double *l, const double *r, double *o)
{
    if (l[0] > r[0] || r[0] > l[0]) {
        const double *w = l[0] > r[0] ? l : r;
        o[0] = w[0];
        o[1] = w[1];
    } else {
        o[0] = l[0];
        o[1] = l[1] + r[1];
    }
}
static void ref_ema_reset(const double *l, const double *r, double *o)
{
    if (r[2] > 0.5) {
        memcpy(o, r, 3 * sizeof *o);
    } else {
        o[0] = r[0] * l[0];
        o[1] = r[0] * l[1] + r[1];
        o[2] = l[2];
    }
}

/* An operator with its reference and the range of each field's values
 * (a field with lo == hi == -1 is a 0/1 flag, 1 with probability 1/5). */
typedef struct op_case {
    const dc_assoc *op;
    ref_combine ref;
    double lo[4], hi[4];
} op_case;

static const op_case *cases(int *n)
{
    static op_case c[5];
    c[0] = (op_case){DC_ASSOC_REF(usum), ref_usum, {-1}, {1}};
    c[1] = (op_case){DC_ASSOC_REF(linrec), ref_linrec, {0.5, -1}, {1.0, 1}};
    c[2] = (op_case){DC_ASSOC_REF(mat2), ref_mat2, {0.6, -0.3, -0.3, 0.6}, {0.8, 0.3, 0.3, 0.8}};
    c[3] = (op_case){DC_ASSOC_REF(maxcount), ref_maxcount, {-3, 0.5}, {3, 1.5}};
    c[4] = (op_case){DC_ASSOC_REF(ema_reset), ref_ema_reset, {0.5, -1, -1}, {0.95, 1, -1}};
    *n = 5;
    return c;
}

static uint64_t rng_state = 12345;
static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* k host arrays of n values for the case's fields (malloc'd, one block). */
static double *case_values(const op_case *c, int64_t n)
{
    const int k = c->op->n_state;
    double *v = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *v);
    for (int f = 0; f < k; ++f)
        for (int64_t i = 0; i < n; ++i)
            v[f * n + i] = c->lo[f] == -1 && c->hi[f] == -1 ? (uniform() < 0.2 ? 1.0 : 0.0)
                                                            : c->lo[f] + (c->hi[f] - c->lo[f]) * uniform();
    return v;
}

static void make_fields(dc_ctx *ctx, dc_dtype dtype, int k, int ndim, const int64_t *shape, const double *v, int64_t n,
                        dc_tensor **x)
{
    for (int f = 0; f < k; ++f) {
        x[f] = dc_tensor_new(ctx, dtype, ndim, shape);
        TEST_NONNULL(ctx, x[f]);
        if (n == 0)
            continue;
        if (dtype == DC_F64) {
            TEST_OK(ctx, dc_tensor_from_host_copy(x[f], v + f * n, (size_t)n * sizeof(double)));
        } else {
            float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
            for (int64_t i = 0; i < n; ++i)
                h[i] = (float)v[f * n + i];
            TEST_OK(ctx, dc_tensor_from_host_copy(x[f], h, (size_t)n * sizeof(float)));
            free(h);
        }
    }
}

static void free_fields(int k, dc_tensor **x)
{
    for (int f = 0; f < k; ++f)
        dc_tensor_free(x[f]);
}

static int64_t numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

/* The reduction over the axes of `mask`: every element in row-major
 * order, combined into its output's accumulator (so each output combines
 * its elements in row-major order of the reduced axes). */
static double *ref_reduce(const op_case *c, const double *v, int ndim, const int64_t *shape, unsigned mask,
                          int64_t *n_out)
{
    const int k = c->op->n_state;
    const int64_t n = numel(ndim, shape);
    int64_t m = 1;
    for (int d = 0; d < ndim; ++d)
        m *= (mask >> d) & 1u ? 1 : shape[d];
    double *acc = malloc((size_t)(k * m > 0 ? k * m : 1) * sizeof *acc);
    for (int f = 0; f < k; ++f)
        for (int64_t o = 0; o < m; ++o)
            acc[f * m + o] = c->op->neutral[f];
    for (int64_t e = 0; e < n; ++e) {
        int64_t rest = e, o = 0, scale = 1;
        for (int d = ndim - 1; d >= 0; --d) {
            const int64_t i = rest % shape[d];
            rest /= shape[d];
            if (!((mask >> d) & 1u)) {
                o += i * scale;
                scale *= shape[d];
            }
        }
        double l[4], r[4], out[4];
        for (int f = 0; f < k; ++f) {
            l[f] = acc[f * m + o];
            r[f] = v[f * n + e];
        }
        c->ref(l, r, out);
        for (int f = 0; f < k; ++f)
            acc[f * m + o] = out[f];
    }
    *n_out = m;
    return acc;
}

static double *ref_scan(const op_case *c, const double *v, int ndim, const int64_t *shape, int axis, bool exclusive)
{
    const int k = c->op->n_state;
    const int64_t n = numel(ndim, shape);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
        outer *= shape[d];
    for (int d = axis + 1; d < ndim; ++d)
        inner *= shape[d];
    const int64_t len = shape[axis];
    double *y = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *y);
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            double acc[4], r[4], out[4];
            for (int f = 0; f < k; ++f)
                acc[f] = c->op->neutral[f];
            for (int64_t j = 0; j < len; ++j) {
                const int64_t e = (o * len + j) * inner + i;
                for (int f = 0; f < k; ++f)
                    r[f] = v[f * n + e];
                c->ref(acc, r, out);
                for (int f = 0; f < k; ++f) {
                    y[f * n + e] = exclusive ? acc[f] : out[f];
                    acc[f] = out[f];
                }
            }
        }
    return y;
}

static double *ref_segments(const op_case *c, const double *v, int64_t n, int64_t width, const double *index,
                            int64_t n_segments)
{
    const int k = c->op->n_state;
    const int64_t m = n_segments * width;
    double *acc = malloc((size_t)(k * m > 0 ? k * m : 1) * sizeof *acc);
    for (int f = 0; f < k; ++f)
        for (int64_t e = 0; e < m; ++e)
            acc[f * m + e] = c->op->neutral[f];
    for (int64_t i = 0; i < n; ++i)
        for (int64_t w = 0; w < width; ++w) {
            const int64_t o = (int64_t)index[i] * width + w;
            double l[4], r[4], out[4];
            for (int f = 0; f < k; ++f) {
                l[f] = acc[f * m + o];
                r[f] = v[f * n * width + i * width + w];
            }
            c->ref(l, r, out);
            for (int f = 0; f < k; ++f)
                acc[f * m + o] = out[f];
        }
    return acc;
}

/* Fails unless each out[f] holds ref's field f (m values each). */
static void check_fields(dc_tensor **out, int k, const double *ref, int64_t m, double tol, const char *what)
{
    for (int f = 0; f < k; ++f) {
        assert_int_equal(dc_tensor_numel(out[f]), m);
        double *got = test_values(out[f]);
        for (int64_t i = 0; i < m; ++i)
            if (isinf(ref[f * m + i]) && got[i] != ref[f * m + i])
                fail_msg("%s, field %d: element %lld is %g, not %g", what, f, (long long)i, got[i], ref[f * m + i]);
            else if (isinf(ref[f * m + i]))
                got[i] = 0; /* compared */
        double *want = malloc((size_t)(m > 0 ? m : 1) * sizeof *want);
        for (int64_t i = 0; i < m; ++i)
            want[i] = isinf(ref[f * m + i]) ? 0 : ref[f * m + i];
        char label[96];
        snprintf(label, sizeof label, "%s, field %d", what, f);
        test_assert_close(got, want, m, tol, tol, label);
        free(want);
        free(got);
    }
}

/* Element i of t. */
static double get(const dc_tensor *t, int64_t i)
{
    double v = NAN;
    assert_int_equal(dc_tensor_get(t, i, &v), DC_OK);
    return v;
}

/* ---- forward against the references ---- */

static void test_user_sum_matches_builtin(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int64_t shape[3] = {4, 6, 5};
    for (int t = 0; t < 2; ++t) {
        const dc_dtype dtype = t ? DC_F32 : DC_F64;
        dc_tensor *x = test_random(ctx, dtype, 3, shape, -1, 1);
        const int axes_sets[3][2] = {{1, 0}, {0, 2}, {0, 0}};
        const int n_axes[3] = {1, 2, 0};
        for (int a = 0; a < 3; ++a)
            for (int keep = 0; keep < 2; ++keep) {
                dc_tensor *mine = NULL;
                TEST_OK(ctx, dc_op_reduce_fn(tape, DC_ASSOC_REF(usum), &x, n_axes[a], axes_sets[a], keep, &mine));
                dc_tensor *builtin = dc_op_sum(tape, x, n_axes[a], axes_sets[a], keep);
                TEST_NONNULL(ctx, builtin);
                assert_int_equal(dc_tensor_ndim(mine), dc_tensor_ndim(builtin));
                for (int d = 0; d < dc_tensor_ndim(mine); ++d)
                    assert_int_equal(dc_tensor_shape(mine)[d], dc_tensor_shape(builtin)[d]);
                double *a1 = test_values(mine), *b1 = test_values(builtin);
                test_assert_close(a1, b1, dc_tensor_numel(mine), t ? 1e-5 : 1e-13, t ? 1e-5 : 1e-13, "usum vs sum");
                free(a1);
                free(b1);
            }
        dc_tensor_free(x);
        dc_tape_reset(tape);
    }
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* Every operator: reductions over several axis sets, scans both ways along
 * each axis, against the sequential references, in float64 and float32;
 * rows longer than one piece (DC_ASSOC_CHUNK) among them, and rows of one
 * lane, three pieces each, the last short: the CPU walks eight pieces
 * together, across rows, none of them short. */
static void test_operators_match_references(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    int n_cases;
    const op_case *cs = cases(&n_cases);
    for (int ci = 0; ci < n_cases; ++ci) {
        const op_case *c = &cs[ci];
        const int k = c->op->n_state;
        const int64_t shapes[4][3] = {{3, 7, 4}, {1, 2500, 2}, {5, 1, 3}, {3, 2 * DC_ASSOC_CHUNK + 5, 1}};
        for (int si = 0; si < 4; ++si)
            for (int t = 0; t < 2; ++t) {
                const dc_dtype dtype = t ? DC_F32 : DC_F64;
                const double tol = t ? 2e-4 : 1e-11;
                const int64_t *shape = shapes[si];
                const int64_t n = numel(3, shape);
                double *v = case_values(c, n);
                dc_tensor *x[4], *out[4];
                make_fields(ctx, dtype, k, 3, shape, v, n, x);
                const unsigned masks[4] = {2u, 5u, 7u, 1u};
                for (int a = 0; a < 4; ++a) {
                    int axes[3], na = 0;
                    for (int d = 0; d < 3; ++d)
                        if ((masks[a] >> d) & 1u)
                            axes[na++] = d;
                    TEST_OK(ctx, dc_op_reduce_fn(tape, c->op, x, na, axes, false, out));
                    int64_t m;
                    double *ref = ref_reduce(c, v, 3, shape, masks[a], &m);
                    check_fields(out, k, ref, m, tol, c->op->name);
                    free(ref);
                }
                for (int axis = 0; axis < 3; ++axis)
                    for (int ex = 0; ex < 2; ++ex) {
                        TEST_OK(ctx, dc_op_scan_fn(tape, c->op, x, axis - 3 * (axis == 2), ex, out));
                        double *ref = ref_scan(c, v, 3, shape, axis, ex);
                        check_fields(out, k, ref, n, tol, c->op->name);
                        free(ref);
                    }
                free_fields(k, x);
                free(v);
                dc_tape_reset(tape);
            }
    }
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* Reductions by index: an unsorted index with empty segments, rows of
 * several values. */
static void test_segments_match_references(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t n = 40, width = 3, n_segments = 9;
    double index[40];
    for (int64_t i = 0; i < n; ++i)
        index[i] = (double)((i * 7 + 3) % 8); /* unsorted; segment 8 stays empty */
    for (int ci = 0; ci < n_cases; ++ci) {
        const op_case *c = &cs[ci];
        const int k = c->op->n_state;
        const int64_t shape[2] = {n, width};
        double *v = case_values(c, n * width);
        dc_tensor *x[4], *out[4];
        make_fields(ctx, DC_F64, k, 2, shape, v, n * width, x);
        dc_tensor *idx = test_tensor(ctx, DC_F64, 1, &n, index);
        TEST_OK(ctx, dc_op_segment_reduce_fn(tape, c->op, x, idx, n_segments, out));
        assert_int_equal(dc_tensor_shape(out[0])[0], n_segments);
        double *ref = ref_segments(c, v, n, width, index, n_segments);
        check_fields(out, k, ref, n_segments * width, 1e-12, c->op->name);
        free(ref);
        free_fields(k, x);
        dc_tensor_free(idx);
        free(v);
        dc_tape_reset(tape);
    }
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* Empty axes give the neutral element (reduce), empty results (scan), and
 * segments that no row reaches; a size-1 axis gives the element itself. */
static void test_empty_and_size_one(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const dc_assoc *op = DC_ASSOC_REF(maxcount);
    const int64_t empty[2] = {3, 0};
    dc_tensor *x[2], *out[2];
    make_fields(ctx, DC_F64, 2, 2, empty, NULL, 0, x);
    const int axis1 = 1;
    TEST_OK(ctx, dc_op_reduce_fn(tape, op, x, 1, &axis1, false, out));
    assert_int_equal(dc_tensor_numel(out[0]), 3);
    for (int64_t i = 0; i < 3; ++i) {
        assert_true(isinf(get(out[0], i)) && get(out[0], i) < 0);
        assert_true(get(out[1], i) == 0);
    }
    TEST_OK(ctx, dc_op_scan_fn(tape, op, x, 1, false, out));
    assert_int_equal(dc_tensor_numel(out[0]), 0);
    /* every input that requires a gradient gets one, empty */
    for (int kind = 0; kind < 2; ++kind) {
        for (int f = 0; f < 2; ++f) {
            TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
            dc_tensor_zero_grad(x[f]);
        }
        dc_tape_reset(tape);
        if (kind == 0)
            TEST_OK(ctx, dc_op_reduce_fn(tape, op, x, 1, &axis1, false, out));
        else
            TEST_OK(ctx, dc_op_scan_fn(tape, op, x, 1, false, out));
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, out[1], 0, NULL, false)));
        for (int f = 0; f < 2; ++f) {
            TEST_NONNULL(ctx, dc_tensor_grad(x[f]));
            assert_int_equal(dc_tensor_numel(dc_tensor_grad(x[f])), 0);
        }
    }
    dc_tape_reset(tape);
    free_fields(2, x);
    const int64_t zero = 0, no_rows[2] = {0, 3};
    make_fields(ctx, DC_F64, 2, 2, no_rows, NULL, 0, x);
    dc_tensor *idx = dc_tensor_new(ctx, DC_F64, 1, &zero);
    TEST_OK(ctx, dc_op_segment_reduce_fn(tape, op, x, idx, 0, out)); /* [0, 3] of nothing */
    assert_int_equal(dc_tensor_shape(out[0])[0], 0);
    assert_int_equal(dc_tensor_shape(out[0])[1], 3);
    free_fields(2, x);
    dc_tensor_free(idx);
    /* n = 0 rows into 2 segments: both neutral */
    const int64_t rows0[2] = {0, 2}; /* and segments of rows of 2 */
    make_fields(ctx, DC_F64, 2, 2, rows0, NULL, 0, x);
    idx = dc_tensor_new(ctx, DC_F64, 1, &zero);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x[0], true));
    TEST_OK(ctx, dc_op_segment_reduce_fn(tape, op, x, idx, 2, out));
    assert_int_equal(dc_tensor_numel(out[0]), 4);
    assert_true(isinf(get(out[0], 3)) && get(out[1], 3) == 0);
    TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, out[1], 0, NULL, false)));
    TEST_NONNULL(ctx, dc_tensor_grad(x[0]));
    assert_int_equal(dc_tensor_numel(dc_tensor_grad(x[0])), 0);
    assert_null(dc_tensor_grad(x[1])); /* it requires none */
    dc_tape_reset(tape);
    free_fields(2, x);
    dc_tensor_free(idx);
    /* a size-1 axis: the element itself, and the neutral element before it */
    const int64_t one[2] = {2, 1};
    const double v[4] = {0.5, -2, 3, 4};
    make_fields(ctx, DC_F64, 2, 2, one, v, 2, x);
    TEST_OK(ctx, dc_op_reduce_fn(tape, op, x, 1, &axis1, true, out));
    assert_true(get(out[0], 1) == -2 && get(out[1], 1) == 4);
    TEST_OK(ctx, dc_op_scan_fn(tape, op, x, 1, true, out));
    assert_true(isinf(get(out[0], 0)) && get(out[1], 0) == 0);
    free_fields(2, x);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* ---- gradients ---- */

typedef enum { RUN_REDUCE, RUN_SCAN, RUN_SEGMENT } run_kind;

typedef struct run_spec {
    const dc_assoc *op;
    run_kind kind;
    int n_axes;
    int axes[3];
    bool flag; /* keepdims, or exclusive */
    dc_tensor *index;
    int64_t n_segments;
} run_spec;

static dc_status run_op(dc_tape *tape, const run_spec *s, dc_tensor *const *x, dc_tensor **out)
{
    switch (s->kind) {
    case RUN_REDUCE:
        return dc_op_reduce_fn(tape, s->op, x, s->n_axes, s->axes, s->flag, out);
    case RUN_SCAN:
        return dc_op_scan_fn(tape, s->op, x, s->axes[0], s->flag, out);
    case RUN_SEGMENT:
        return dc_op_segment_reduce_fn(tape, s->op, x, s->index, s->n_segments, out);
    }
    return DC_ERR_ARG;
}

/* sum over fields f of (f + 1) * sum(out_f * out_f): a different adjoint
 * for every element of every field */
static dc_tensor *loss_of(dc_tape *tape, const run_spec *s, dc_tensor *const *x)
{
    dc_tensor *out[4];
    if (run_op(tape, s, x, out) != DC_OK)
        return NULL;
    dc_tensor *loss = NULL;
    for (int f = 0; f < s->op->n_state; ++f) {
        dc_tensor *sq = dc_op_affine(tape, dc_op_mul(tape, out[f], out[f]), (double)(f + 1), 0.0);
        dc_tensor *t = dc_op_sum(tape, sq, 0, NULL, false);
        loss = loss ? dc_op_add(tape, loss, t) : t;
    }
    return loss;
}

static dc_tensor *gradcheck_fn(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    return loss_of(tape, user, inputs);
}

static void gradcheck_case(dc_ctx *ctx, const op_case *c, run_spec *s, int ndim, const int64_t *shape)
{
    const int k = c->op->n_state;
    const int64_t n = numel(ndim, shape);
    double *v = case_values(c, n);
    dc_tensor *x[4];
    make_fields(ctx, DC_F64, k, ndim, shape, v, n, x);
    for (int f = 0; f < k; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    s->op = c->op;
    dc_gradcheck_options o = dc_gradcheck_options_default();
    o.max_per_input = 60;
    /* the loss sums squares of outputs up to a few units: some hundreds for
     * the small shapes, thousands for the long rows. Its central differences
     * (step 1e-6) round at about 2.2e-16 * |loss| / 1e-6, 1e-7 and 1e-6 or
     * more (1.2e-6 seen for ema_reset's long rows, a loss near 5000) */
    o.atol = n > 1000 ? 2e-6 : 2e-7;
    dc_gradcheck_report r;
    const dc_status st = dc_gradcheck(ctx, gradcheck_fn, s, k, x, &o, &r);
    if (st != DC_OK)
        fail_msg("%s, kind %d: %s", c->op->name, (int)s->kind, dc_last_error(ctx));
    assert_true(r.checked > 0);
    free_fields(k, x);
    free(v);
}

static void test_reduce_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t shape[3] = {3, 5, 4};
    const int64_t long_row[1] = {2100};
    for (int ci = 1; ci < n_cases; ++ci) {
        run_spec s = {.kind = RUN_REDUCE, .n_axes = 1, .axes = {1}};
        gradcheck_case(ctx, &cs[ci], &s, 3, shape);
        s = (run_spec){.kind = RUN_REDUCE, .n_axes = 2, .axes = {0, 2}, .flag = true};
        gradcheck_case(ctx, &cs[ci], &s, 3, shape);
        s = (run_spec){.kind = RUN_REDUCE, .n_axes = 0};
        gradcheck_case(ctx, &cs[ci], &s, 3, shape);
        if (ci != 2) { /* several pieces; a long matrix product would vanish */
            s = (run_spec){.kind = RUN_REDUCE, .n_axes = 0};
            gradcheck_case(ctx, &cs[ci], &s, 1, long_row);
        }
    }
    dc_ctx_free(ctx);
}

static dc_tensor *twice_fn(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    return dc_op_add(tape, loss_of(tape, user, inputs), loss_of(tape, user, inputs));
}

static dc_tensor *same_tensor_fn(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    dc_tensor *both[2] = {inputs[0], inputs[0]};
    return loss_of(tape, user, both);
}

/* The reduction's adjoint at the edges of its pieces (DC_ASSOC_CHUNK): one
 * element, one short of a piece, a whole piece, one over, two and one;
 * then written in place over an earlier gradient (the inputs reduced
 * twice), and with one tensor as both fields (no gradient in place). */
static void test_reduce_gradients_at_piece_edges(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t lengths[] = {1, DC_ASSOC_CHUNK - 1, DC_ASSOC_CHUNK, DC_ASSOC_CHUNK + 1, 2 * DC_ASSOC_CHUNK + 1};
    for (int ci = 1; ci < n_cases; ++ci) {
        if (ci == 2) /* a long matrix product would vanish */
            continue;
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            run_spec s = {.kind = RUN_REDUCE, .n_axes = 0};
            gradcheck_case(ctx, &cs[ci], &s, 1, &lengths[li]);
        }
    }
    const op_case *linrec = &cs[1];
    const int64_t n = DC_ASSOC_CHUNK + 3;
    double *v = case_values(linrec, n);
    dc_tensor *x[2];
    make_fields(ctx, DC_F64, 2, 1, &n, v, n, x);
    for (int f = 0; f < 2; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    run_spec s = {.op = linrec->op, .kind = RUN_REDUCE, .n_axes = 0};
    dc_gradcheck_options o = dc_gradcheck_options_default();
    o.max_per_input = 60;
    o.atol = 1e-6;
    dc_gradcheck_report r;
    if (dc_gradcheck(ctx, twice_fn, &s, 2, x, &o, &r) != DC_OK)
        fail_msg("reduced twice: %s", dc_last_error(ctx));
    assert_true(r.checked > 0);
    if (dc_gradcheck(ctx, same_tensor_fn, &s, 1, x, &o, &r) != DC_OK)
        fail_msg("one tensor as both fields: %s", dc_last_error(ctx));
    assert_true(r.checked > 0);
    free_fields(2, x);
    free(v);
    dc_ctx_free(ctx);
}

/* The gradients of both fields x[0], x[1] (n elements of es bytes each) of
 * run s's loss taken once into once and of the inputs run twice (twice_fn,
 * the second adjoint added in place to the first) into twice, field after
 * field. */
static void grads_once_and_twice(dc_ctx *ctx, const run_spec *s, dc_tensor **x, int64_t n, size_t es, void *once,
                                 void *twice)
{
    for (int times = 1; times <= 2; ++times) {
        dc_tape *tape = dc_tape_new(ctx);
        for (int f = 0; f < 2; ++f)
            dc_tensor_zero_grad(x[f]);
        dc_tensor *loss = times == 1 ? loss_of(tape, s, x) : twice_fn(tape, x, (void *)s);
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        for (int f = 0; f < 2; ++f)
            TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(x[f]), (char *)(times == 1 ? once : twice) + f * n * es,
                                           (size_t)n * es));
        dc_tape_free(tape);
    }
}

/* The reduction's adjoint added in place to an earlier gradient on a row of
 * nine pieces and a short tenth (the CPU walks eight together, float32 ones
 * as tiles of steps, broadcast/tiles8.h; CUDA a piece per block, its
 * gradients added as they leave the block's staging, the short piece in
 * runs of two steps), in float32 and float64: the inputs reduced twice get
 * exactly twice the gradient of one reduction. */
static void reduce_adjoint_added_in_place(dc_ctx *ctx)
{
    int n_cases;
    const op_case *linrec = &cases(&n_cases)[1];
    const int64_t n = 9 * DC_ASSOC_CHUNK + 133;
    double *v = case_values(linrec, n);
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        const size_t es = dc_dtype_size(dtype);
        dc_tensor *x[2];
        make_fields(ctx, dtype, 2, 1, &n, v, n, x);
        for (int f = 0; f < 2; ++f)
            TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
        unsigned char *once = malloc(2 * (size_t)n * es), *twice = malloc(2 * (size_t)n * es);
        assert_non_null(once);
        assert_non_null(twice);
        const run_spec s = {.op = linrec->op, .kind = RUN_REDUCE, .n_axes = 0};
        grads_once_and_twice(ctx, &s, x, n, es, once, twice);
        for (int64_t i = 0; i < 2 * n; ++i) {
            const double a = dt ? ((const float *)once)[i] : ((const double *)once)[i];
            const double b = dt ? ((const float *)twice)[i] : ((const double *)twice)[i];
            if (b != 2 * a)
                fail_msg("%s reduced twice: gradient %lld is %.9g, not twice %.9g", dc_dtype_name(dtype), (long long)i,
                         b, a);
        }
        free(once);
        free(twice);
        free_fields(2, x);
    }
    free(v);
}

static void test_reduce_adjoint_added_in_place(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    reduce_adjoint_added_in_place(ctx);
    dc_ctx_free(ctx);
}

static void test_scan_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t shape[3] = {3, 6, 4};
    const int64_t long_row[1] = {2100};
    for (int ci = 1; ci < n_cases; ++ci)
        for (int ex = 0; ex < 2 - (ci == 3); ++ex) { /* maxcount's exclusive scan starts at -inf */
            for (int axis = 0; axis < 3; ++axis) {
                run_spec s = {.kind = RUN_SCAN, .axes = {axis}, .flag = ex};
                gradcheck_case(ctx, &cs[ci], &s, 3, shape);
            }
            if (ci != 2) {
                run_spec s = {.kind = RUN_SCAN, .axes = {0}, .flag = ex};
                gradcheck_case(ctx, &cs[ci], &s, 1, long_row);
            }
        }
    /* a row of nine pieces (the CPU walks eight of them together): the
     * input's adjoint added in place to an earlier gradient (the inputs
     * scanned twice: exactly twice the gradient of one scan), and with one
     * tensor as both fields (no gradient in place) */
    const op_case *linrec = &cs[1];
    const int64_t n = 9 * DC_ASSOC_CHUNK;
    double *v = case_values(linrec, n);
    dc_tensor *x[2];
    make_fields(ctx, DC_F64, 2, 1, &n, v, n, x);
    for (int f = 0; f < 2; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    double *once = malloc((size_t)(2 * n) * sizeof *once), *twice = malloc((size_t)(2 * n) * sizeof *twice);
    for (int ex = 0; ex < 2; ++ex) {
        const run_spec s = {.op = linrec->op, .kind = RUN_SCAN, .axes = {0}, .flag = ex};
        grads_once_and_twice(ctx, &s, x, n, sizeof(double), once, twice);
        for (int64_t i = 0; i < 2 * n; ++i)
            if (twice[i] != 2 * once[i])
                fail_msg("scanned twice, exclusive %d: gradient %lld is %.17g, not twice %.17g", ex, (long long)i,
                         twice[i], once[i]);
    }
    free(once);
    free(twice);
    free_fields(2, x);
    const int64_t m = 2 * DC_ASSOC_CHUNK + 5;
    make_fields(ctx, DC_F64, 2, 1, &m, v, m, x);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x[0], true));
    dc_gradcheck_options o = dc_gradcheck_options_default();
    o.max_per_input = 60;
    o.atol = 1e-6;
    for (int ex = 0; ex < 2; ++ex) {
        run_spec s = {.op = linrec->op, .kind = RUN_SCAN, .axes = {0}, .flag = ex};
        dc_gradcheck_report r;
        if (dc_gradcheck(ctx, same_tensor_fn, &s, 1, x, &o, &r) != DC_OK)
            fail_msg("one tensor as both fields, exclusive %d: %s", ex, dc_last_error(ctx));
        assert_true(r.checked > 0);
    }
    free_fields(2, x);
    free(v);
    dc_ctx_free(ctx);
}

static void test_segment_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t n = 17, shape[2] = {17, 3};
    double index[17];
    for (int64_t i = 0; i < n; ++i)
        index[i] = (double)((i * 5 + 2) % 7); /* unsorted, segments 7 and 8 empty */
    dc_tensor *idx = test_tensor(ctx, DC_F64, 1, &n, index);
    for (int ci = 1; ci < n_cases; ++ci) {
        /* the maximum of an empty segment is -inf, whose square the loss
         * cannot take: its segments all have rows */
        run_spec s = {.kind = RUN_SEGMENT, .index = idx, .n_segments = ci == 3 ? 7 : 9};
        gradcheck_case(ctx, &cs[ci], &s, 2, shape);
    }
    dc_tensor_free(idx);
    dc_ctx_free(ctx);
}

/* ---- determinism ---- */

/* Outputs and gradients of one long row, as raw bytes (malloc'd). */
static unsigned char *long_row_bits(dc_ctx *ctx, const op_case *c, run_kind kind, const double *v, int64_t n,
                                    size_t *size)
{
    const int k = c->op->n_state;
    dc_tensor *x[4];
    make_fields(ctx, DC_F32, k, 1, &n, v, n, x);
    for (int f = 0; f < k; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    dc_tape *tape = dc_tape_new(ctx);
    run_spec s = {.op = c->op, .kind = kind, .n_axes = 0, .axes = {0}};
    dc_tensor *out[4];
    TEST_OK(ctx, run_op(tape, &s, x, out));
    const int64_t m = dc_tensor_numel(out[0]);
    dc_tensor *loss = loss_of(tape, &s, x);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    *size = (size_t)(k * (m + n)) * sizeof(float);
    unsigned char *bits = malloc(*size), *at = bits;
    for (int f = 0; f < k; ++f) {
        TEST_OK(ctx, dc_tensor_to_host(out[f], at, (size_t)m * sizeof(float)));
        at += m * sizeof(float);
        TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(x[f]), at, (size_t)n * sizeof(float)));
        at += n * sizeof(float);
    }
    dc_tape_free(tape);
    free_fields(k, x);
    return bits;
}

static void test_threads_give_identical_bits(void **state)
{
    (void)state;
    int n_cases;
    const op_case *cs = cases(&n_cases);
    dc_ctx *one = test_cpu_ctx_threads(1, 1), *two = test_cpu_ctx_threads(2, 1);
    const int64_t n = 100000;
    for (int ci = 0; ci < n_cases; ++ci) {
        if (ci == 2)
            continue;
        double *v = case_values(&cs[ci], n);
        for (int kind = RUN_REDUCE; kind <= RUN_SCAN; ++kind) {
            size_t s1, s2;
            unsigned char *b1 = long_row_bits(one, &cs[ci], kind, v, n, &s1);
            unsigned char *b2 = long_row_bits(two, &cs[ci], kind, v, n, &s2);
            assert_int_equal(s1, s2);
            if (memcmp(b1, b2, s1) != 0)
                fail_msg("%s, kind %d: 1 and 2 threads differ", cs[ci].op->name, kind);
            free(b1);
            free(b2);
        }
        free(v);
    }
    dc_ctx_free(one);
    dc_ctx_free(two);
}

/* Outputs and gradients (in dtype) of the case run by s on [shape[0],
 * shape[1]] inputs (v: k fields of shape[0] * shape[1] values), of every
 * width-th element from the first only, as raw bytes (malloc'd): each
 * field's outputs, then its gradients. */
static unsigned char *case_bits(dc_ctx *ctx, const op_case *c, const run_spec *s, const double *v,
                                const int64_t shape[2], int64_t width, dc_dtype dtype, size_t *size)
{
    const int k = c->op->n_state;
    const size_t es = dc_dtype_size(dtype);
    const int64_t total = shape[0] * shape[1], n = total / width;
    dc_tensor *x[4], *out[4];
    make_fields(ctx, dtype, k, 2, shape, v, total, x);
    for (int f = 0; f < k; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    dc_tape *tape = dc_tape_new(ctx);
    TEST_OK(ctx, run_op(tape, s, x, out));
    const int64_t m = dc_tensor_numel(out[0]) / width;
    dc_tensor *loss = loss_of(tape, s, x);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    *size = (size_t)(k * (m + n)) * es;
    unsigned char *bits = malloc(*size), *at = bits;
    unsigned char *h = malloc((size_t)total * es);
    assert_true(bits && h);
    for (int f = 0; f < k; ++f) {
        TEST_OK(ctx, dc_tensor_to_host(out[f], h, (size_t)(m * width) * es));
        for (int64_t i = 0; i < m; ++i, at += es)
            memcpy(at, h + (size_t)(i * width) * es, es);
        TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(x[f]), h, (size_t)total * es));
        for (int64_t i = 0; i < n; ++i, at += es)
            memcpy(at, h + (size_t)(i * width) * es, es);
    }
    free(h);
    dc_tape_free(tape);
    free_fields(k, x);
    return bits;
}

/* case_bits of a row of n steps repeated in `width` lanes ([n, width],
 * reduced or scanned along axis 0), lane 0's only. */
static unsigned char *lane_bits(dc_ctx *ctx, const op_case *c, run_kind kind, bool exclusive, const double *v,
                                int64_t n, int64_t width, dc_dtype dtype, size_t *size)
{
    const int k = c->op->n_state;
    double *wide = calloc((size_t)(k * n * width), sizeof *wide);
    assert_non_null(wide);
    for (int f = 0; f < k; ++f)
        for (int64_t i = 0; i < n * width; ++i)
            wide[f * n * width + i] = v[f * n + i / width];
    const int64_t shape[2] = {n, width};
    const run_spec s = {.op = c->op, .kind = kind, .n_axes = 1, .axes = {0}, .flag = kind == RUN_SCAN && exclusive};
    unsigned char *bits = case_bits(ctx, c, &s, wide, shape, width, dtype, size);
    free(wide);
    return bits;
}

/* A row of one lane is walked in runs of whole pieces together (the CPU
 * kernels' groups, float32 ones through tiles8.h's tiles), a row of two
 * lanes piece by piece: the same bits, in float32 and float64. The row has
 * 20 pieces, the last one short: two runs, then single pieces. */
static void test_grouped_pieces_match_lanes(void **state)
{
    (void)state;
    int n_cases;
    const op_case *cs = cases(&n_cases);
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 19 * DC_ASSOC_CHUNK + 37;
    for (int ci = 0; ci < n_cases; ++ci) {
        if (ci == 2)
            continue;
        double *v = case_values(&cs[ci], n);
        for (int kind = RUN_REDUCE; kind <= RUN_SCAN; ++kind)
            for (int ex = 0; ex < 1 + (kind == RUN_SCAN); ++ex)
                for (int dt = 0; dt < 2; ++dt) {
                    const dc_dtype dtype = dt ? DC_F64 : DC_F32;
                    size_t s1, s2;
                    unsigned char *b1 = lane_bits(ctx, &cs[ci], kind, ex, v, n, 1, dtype, &s1);
                    unsigned char *b2 = lane_bits(ctx, &cs[ci], kind, ex, v, n, 2, dtype, &s2);
                    assert_int_equal(s1, s2);
                    if (memcmp(b1, b2, s1) != 0)
                        fail_msg("%s, kind %d, exclusive %d, %s: one lane and two lanes differ", cs[ci].op->name, kind,
                                 ex, dc_dtype_name(dtype));
                    free(b1);
                    free(b2);
                }
        free(v);
    }
    dc_ctx_free(ctx);
}

/* case_bits of `rows` rows of n steps ([rows, n], reduced or scanned
 * along axis 1; v: k fields of rows * n values), every element. */
static unsigned char *rows_bits(dc_ctx *ctx, const op_case *c, run_kind kind, bool exclusive, const double *v,
                                int64_t rows, int64_t n, dc_dtype dtype, size_t *size)
{
    const int64_t shape[2] = {rows, n};
    const run_spec s = {.op = c->op, .kind = kind, .n_axes = 1, .axes = {1}, .flag = kind == RUN_SCAN && exclusive};
    return case_bits(ctx, c, &s, v, shape, 1, dtype, size);
}

/* Rows of whole pieces, four rows of two pieces a group (eight pieces; four
 * for three fields, two groups), so that rows start and end inside a group
 * and its tiles that hold a row's first or last step go step by step: the
 * bits of each row reduced or scanned (inclusive, exclusive) alone, in
 * float32 and float64. */
static void test_grouped_rows_match_rows_alone(void **state)
{
    (void)state;
    int n_cases;
    const op_case *cs = cases(&n_cases);
    dc_ctx *ctx = test_cpu_ctx();
    enum { ROWS = 4 };
    const int64_t n = 2 * DC_ASSOC_CHUNK;
    for (int ci = 1; ci < n_cases; ++ci) {
        if (ci == 2)
            continue;
        const int k = cs[ci].op->n_state;
        double *v = case_values(&cs[ci], ROWS * n), *one = malloc((size_t)(k * n) * sizeof *one);
        assert_non_null(one);
        for (int run = 0; run < 3; ++run)
            for (int dt = 0; dt < 2; ++dt) {
                const dc_dtype dtype = dt ? DC_F64 : DC_F32;
                const run_kind kind = run == 0 ? RUN_REDUCE : RUN_SCAN;
                const size_t es = dc_dtype_size(dtype);
                size_t all_size, row_size;
                unsigned char *all = rows_bits(ctx, &cs[ci], kind, run == 2, v, ROWS, n, dtype, &all_size);
                const int64_t m = kind == RUN_REDUCE ? 1 : n; /* outputs a row */
                for (int64_t r = 0; r < ROWS; ++r) {
                    for (int f = 0; f < k; ++f)
                        memcpy(one + f * n, v + f * ROWS * n + r * n, (size_t)n * sizeof *one);
                    unsigned char *alone = rows_bits(ctx, &cs[ci], kind, run == 2, one, 1, n, dtype, &row_size);
                    for (int f = 0; f < k; ++f) {
                        const unsigned char *out_all = all + (size_t)f * (size_t)(ROWS * m + ROWS * n) * es;
                        const unsigned char *grad_all = out_all + (size_t)(ROWS * m) * es;
                        const unsigned char *out_one = alone + (size_t)f * (size_t)(m + n) * es;
                        if (memcmp(out_all + (size_t)(r * m) * es, out_one, (size_t)m * es) != 0 ||
                            memcmp(grad_all + (size_t)(r * n) * es, out_one + (size_t)m * es, (size_t)n * es) != 0)
                            fail_msg("%s, %s, %s, field %d: row %lld of %d differs from the row alone", cs[ci].op->name,
                                     run == 0 ? "reduce" : run == 1 ? "inclusive scan" : "exclusive scan",
                                     dc_dtype_name(dtype), f, (long long)r, ROWS);
                    }
                    free(alone);
                }
                free(all);
            }
        free(one);
        free(v);
    }
    dc_ctx_free(ctx);
}

/* Gradients (float32) of the reduction along axis 1 of `rows` rows of n
 * steps (v: k fields of rows * n values), into grads (k * rows * n). */
static void rows_reduced_grads(dc_ctx *ctx, const op_case *c, const double *v, int64_t rows, int64_t n, float *grads)
{
    const int k = c->op->n_state;
    const int64_t shape[2] = {rows, n};
    dc_tensor *x[4];
    make_fields(ctx, DC_F32, k, 2, shape, v, rows * n, x);
    for (int f = 0; f < k; ++f)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
    dc_tape *tape = dc_tape_new(ctx);
    const run_spec s = {.op = c->op, .kind = RUN_REDUCE, .n_axes = 1, .axes = {1}};
    dc_tensor *loss = loss_of(tape, &s, x);
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    for (int f = 0; f < k; ++f)
        TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(x[f]), grads + f * rows * n, (size_t)(rows * n) * sizeof(float)));
    dc_tape_free(tape);
    free_fields(k, x);
}

/* Gradients of DC_STREAM_MIN_BYTES (8 MiB) or more, which the CPU's groups
 * of pieces write with streaming stores where a piece starts on a 64-byte
 * boundary (broadcast/tiles8.h): a row of them, reduced or scanned, gets the
 * bits of the same row walked piece by piece (two lanes, no groups); of two
 * reduced rows of an odd length, whose second starts off the boundary and is
 * written as usual, each gets the bits of its row alone. */
static void test_streamed_gradients_match_pieces(void **state)
{
    (void)state;
    int n_cases;
    const op_case *linrec = &cases(&n_cases)[1];
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 1041 * DC_ASSOC_CHUNK + 5; /* 2 fields * n * 4 bytes >= 8 MiB */
    assert_true(2 * n * (int64_t)sizeof(float) >= 8 << 20);
    /* two rows, fields v[f * 2n + r * n + i]: a = 1, so that no gradient
     * vanishes down a row (a_j's is the sum of the b before it, b_j's 1) */
    double *v = malloc(4 * (size_t)n * sizeof *v), *one = malloc(2 * (size_t)n * sizeof *one);
    float *both = malloc(4 * (size_t)n * sizeof *both), *alone = malloc(2 * (size_t)n * sizeof *alone);
    assert_true(v && one && both && alone);
    for (int64_t i = 0; i < 2 * n; ++i) {
        v[i] = 1.0;
        v[2 * n + i] = 2.0 * uniform() - 1.0;
    }
    rows_reduced_grads(ctx, linrec, v, 2, n, both);
    for (int64_t r = 0; r < 2; ++r) {
        /* row r alone: one[f * n + i] */
        for (int f = 0; f < 2; ++f)
            memcpy(one + f * n, v + f * 2 * n + r * n, (size_t)n * sizeof *one);
        /* the reduction, and the scan inclusive and exclusive */
        for (int run = 0; r == 0 && run < 3; ++run) {
            const run_kind kind = run == 0 ? RUN_REDUCE : RUN_SCAN;
            size_t s1, s2;
            unsigned char *b1 = lane_bits(ctx, linrec, kind, run == 2, one, n, 1, DC_F32, &s1);
            unsigned char *b2 = lane_bits(ctx, linrec, kind, run == 2, one, n, 2, DC_F32, &s2);
            assert_int_equal(s1, s2);
            if (memcmp(b1, b2, s1) != 0)
                fail_msg("%s: a streamed row and its pieces one by one differ",
                         run == 0 ? "reduction" : run == 1 ? "inclusive scan" : "exclusive scan");
            free(b1);
            free(b2);
        }
        rows_reduced_grads(ctx, linrec, one, 1, n, alone);
        for (int f = 0; f < 2; ++f)
            for (int64_t i = 0; i < n; ++i)
                if (memcmp(both + f * 2 * n + r * n + i, alone + f * n + i, sizeof(float)) != 0)
                    fail_msg("field %d of row %lld of two differs from the row alone at step %lld: %.9g, not %.9g", f,
                             (long long)r, (long long)i, both[f * 2 * n + r * n + i], alone[f * n + i]);
    }
    free(both);
    free(alone);
    free(one);
    free(v);
    dc_ctx_free(ctx);
}

/* Gradients of the linear recurrence along a row of 9 pieces (the CPU
 * walks the first eight as a group, through plain products first) where an
 * infinite element meets zero adjoints: each gradient takes zero from a zero
 * adjoint times an infinite or NaN partial, and from a zero carry times an
 * infinite map between pieces, as assoc.h documents; the references follow
 * the recurrence in double.
 * - scan, a[t] = inf, y_b's adjoint g before t and 0 from t on: from t on
 *   every adjoint is 0; before it lambda_i = g_i + a_{i+1} lambda_{i+1},
 *   abar_i = lambda_i y_b[i - 1], bbar_i = lambda_i;
 * - scan, b[t] = inf, y_a's adjoint g: y_b, infinite from t on, is the
 *   partial of y_b's step in a, whose adjoint is 0: abar_i = lambda_i
 *   y_a[i - 1] with lambda_i = g_i + a_{i+1} lambda_{i+1}, bbar_i = 0;
 * - reduce, b[t] = inf, the product's adjoint 1: abar_i is the product of
 *   the other a. */
static void zero_adjoints_meet_infinite_partials(dc_ctx *ctx)
{
    int n_cases;
    const op_case *linrec = &cases(&n_cases)[1];
    const int64_t n = 9 * DC_ASSOC_CHUNK, t = 3 * DC_ASSOC_CHUNK + 500;
    double *v = malloc(2 * (size_t)n * sizeof *v), *g = malloc((size_t)n * sizeof *g);
    double *ref = malloc(2 * (size_t)n * sizeof *ref);
    assert_true(v && g && ref);
    for (int run = 0; run < 3; ++run)
        for (int dt = 0; dt < 2; ++dt) {
            const dc_dtype dtype = dt ? DC_F64 : DC_F32;
            const bool reduce = run == 2;
            const int inf_field = run == 0 ? 0 : 1, seeded = run == 0 ? 1 : 0;
            for (int64_t i = 0; i < n; ++i) {
                /* near 1: the products of many of them stay well inside the range */
                v[i] = 0.999 + 0.002 * uniform();
                v[n + i] = 2.0 * uniform() - 1.0;
                g[i] = run == 0 && i >= t ? 0.0 : 0.5 + uniform();
            }
            v[inf_field * n + t] = INFINITY;
            /* the references in double, field a's at ref, b's at ref + n */
            if (reduce) {
                double *suffix = malloc((size_t)(n + 1) * sizeof *suffix), prefix = 1.0;
                assert_non_null(suffix);
                suffix[n] = 1.0;
                for (int64_t i = n - 1; i >= 0; --i)
                    suffix[i] = suffix[i + 1] * v[i];
                for (int64_t i = 0; i < n; ++i) {
                    ref[i] = prefix * suffix[i + 1];
                    ref[n + i] = 0.0;
                    prefix *= v[i];
                }
                free(suffix);
            } else {
                /* lambda from the last element down (ref + n holds it for
                 * now), a zero lambda times anything 0; then abar_i =
                 * lambda_i times the state before i, y_b (run 0) or y_a */
                double lambda = 0.0, ya = 1.0, yb = 0.0;
                for (int64_t i = n - 1; i >= 0; --i) {
                    lambda = g[i] + (lambda == 0.0 ? 0.0 : v[i + 1] * lambda);
                    ref[n + i] = lambda;
                }
                for (int64_t i = 0; i < n; ++i) {
                    const double lam = ref[n + i];
                    ref[i] = lam == 0.0 ? 0.0 : lam * (run == 0 ? yb : ya);
                    ref[n + i] = run == 0 ? lam : 0.0;
                    ya *= v[i];
                    yb = v[i] * yb + v[n + i];
                }
            }
            dc_tensor *x[2], *out[2];
            make_fields(ctx, dtype, 2, 1, &n, v, n, x);
            for (int f = 0; f < 2; ++f)
                TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *adjoint;
            if (reduce) {
                TEST_OK(ctx, dc_op_reduce_fn(tape, linrec->op, x, 0, NULL, false, out));
                adjoint = dc_tensor_new(ctx, dtype, 0, NULL);
                TEST_OK(ctx, dc_tensor_fill(adjoint, 1.0));
            } else {
                TEST_OK(ctx, dc_op_scan_fn(tape, linrec->op, x, 0, false, out));
                make_fields(ctx, dtype, 1, 1, &n, g, n, &adjoint);
            }
            TEST_OK(ctx, dc_backward_with(tape, out[seeded], adjoint));
            for (int f = 0; f < 2; ++f) {
                double *got = test_values(dc_tensor_grad(x[f]));
                for (int64_t i = 0; i < n; ++i)
                    if (!isfinite(got[i]))
                        fail_msg("run %d, %s, field %d: the gradient at %lld is %g", run, dc_dtype_name(dtype), f,
                                 (long long)i, got[i]);
                char label[64];
                snprintf(label, sizeof label, "run %d, %s, field %d", run, dc_dtype_name(dtype), f);
                test_assert_close(got, ref + f * n, n, dt ? 1e-12 : 1e-5, dt ? 1e-9 : 1e-3, label);
                free(got);
            }
            dc_tensor_free(adjoint);
            dc_tape_free(tape);
            free_fields(2, x);
        }
    free(ref);
    free(g);
    free(v);
}

static void test_zero_adjoints_meet_infinite_partials(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    zero_adjoints_meet_infinite_partials(ctx);
    dc_ctx_free(ctx);
}

/* ---- refusals ---- */

static void expect_error(dc_ctx *ctx, dc_status st, dc_status want, const char *a, const char *b)
{
    if (st != want)
        fail_msg("got %s, want %s: %s", dc_status_name(st), dc_status_name(want), dc_last_error(ctx));
    const char *msg = dc_last_error(ctx);
    if (a && !strstr(msg, a))
        fail_msg("the message \"%s\" does not name %s", msg, a);
    if (b && !strstr(msg, b))
        fail_msg("the message \"%s\" does not name %s", msg, b);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const dc_assoc *op = DC_ASSOC_REF(linrec);
    const int64_t s1[2] = {3, 4}, s2[2] = {3, 5};
    dc_tensor *x[2] = {test_random(ctx, DC_F64, 2, s1, 0, 1), test_random(ctx, DC_F64, 2, s2, 0, 1)};
    dc_tensor *out[2] = {x[0], x[0]};
    const int axis = 1;
    expect_error(ctx, dc_op_reduce_fn(tape, op, x, 1, &axis, false, out), DC_ERR_SHAPE, "[3, 4]", "[3, 5]");
    assert_null(out[0]);
    expect_error(ctx, dc_op_scan_fn(tape, op, x, 1, false, out), DC_ERR_SHAPE, "field b", "field a");
    expect_error(ctx, dc_op_reduce_fn(tape, NULL, x, 1, &axis, false, out), DC_ERR_ARG, "dc_op_reduce_fn", "NULL");
    dc_assoc old = *op;
    old.abi_version = DC_ASSOC_ABI_VERSION + 1;
    expect_error(ctx, dc_op_scan_fn(tape, &old, x, 1, false, out), DC_ERR_ARG, "linrec", "version");
    expect_error(ctx, dc_op_scan_fn(tape, op, NULL, 1, false, out), DC_ERR_ARG, "dc_op_scan_fn(linrec)", "x");
    expect_error(ctx, dc_op_scan_fn(tape, op, x, 1, false, NULL), DC_ERR_ARG, "out", NULL);
    dc_tensor *x32 = test_random(ctx, DC_F32, 2, s1, 0, 1);
    dc_tensor *same[2] = {x[0], x32};
    expect_error(ctx, dc_op_scan_fn(tape, op, same, 1, false, out), DC_ERR_DTYPE, "f32", "f64");
    dc_tensor *with_null[2] = {x[0], NULL};
    /* a NULL field keeps the status of the error that produced it */
    assert_int_not_equal(dc_op_scan_fn(tape, op, with_null, 1, false, out), DC_OK);
    assert_non_null(strstr(dc_last_error(ctx), "input b is NULL"));
    same[1] = x[0];
    expect_error(ctx, dc_op_scan_fn(tape, op, same, 2, false, out), DC_ERR_ARG, "axis 2", NULL);
    const int bad_axes[2] = {1, 1};
    expect_error(ctx, dc_op_reduce_fn(tape, op, same, 2, bad_axes, false, out), DC_ERR_ARG, "twice", NULL);
    /* reductions by index */
    const int64_t three = 3, four = 4;
    const double good[3] = {0, 1, 1}, bad[3] = {0, 2.5, 1}, neg[3] = {0, -1, 1};
    dc_tensor *idx = test_tensor(ctx, DC_F64, 1, &three, good);
    dc_tensor *idx_bad = test_tensor(ctx, DC_F64, 1, &three, bad);
    dc_tensor *idx_neg = test_tensor(ctx, DC_F64, 1, &three, neg);
    dc_tensor *idx_long = test_random(ctx, DC_F64, 1, &four, 0, 1);
    dc_tensor *idx_f32 = test_random(ctx, DC_F32, 1, &three, 0, 1);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx_bad, 3, out), DC_ERR_ARG, "index[1]", "2.5");
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx_neg, 3, out), DC_ERR_ARG, "index[1]", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, 1, out), DC_ERR_ARG, "index[1]", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx_long, 3, out), DC_ERR_SHAPE, "[4]", "[3, 4]");
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx_f32, 3, out), DC_ERR_DTYPE, "f32", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, -1, out), DC_ERR_ARG, "n_segments", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, 0, out), DC_ERR_ARG, "n_segments", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, NULL, 2, out), DC_ERR_ARG, "index", NULL);
    /* outputs too large for a tensor, refused before anything is sized by
     * n_segments */
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, ((int64_t)1 << 61) - 1, out), DC_ERR_SHAPE,
                 "too large", NULL);
    expect_error(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, INT64_MAX, out), DC_ERR_SHAPE, "too large", NULL);
    TEST_OK(ctx, dc_op_segment_reduce_fn(tape, op, same, idx, 2, out));
    /* out over x: refused, x untouched */
    dc_tensor *fields[3] = {x[0], x[0], x[0]};
    expect_error(ctx, dc_op_scan_fn(tape, op, fields, 1, false, fields), DC_ERR_ARG, "overlaps", NULL);
    expect_error(ctx, dc_op_reduce_fn(tape, op, fields, 1, &axis, false, fields + 1), DC_ERR_ARG, "overlaps", NULL);
    assert_ptr_equal(fields[0], x[0]);
    assert_ptr_equal(fields[1], x[0]);
    assert_ptr_equal(fields[2], x[0]);
    assert_int_equal(dc_op_scan_fn(NULL, op, same, 1, false, out), DC_ERR_ARG);
    dc_tensor_free(idx);
    dc_tensor_free(idx_bad);
    dc_tensor_free(idx_neg);
    dc_tensor_free(idx_long);
    dc_tensor_free(idx_f32);
    dc_tensor_free(x32);
    dc_tensor_free(x[0]);
    dc_tensor_free(x[1]);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* ---- CUDA against the CPU ---- */

/* Runs spec on both contexts with the same values (float64), comparing the
 * outputs and the gradients of loss_of. */
static void cuda_case(dc_ctx *cpu, const op_case *c, run_spec *s, int ndim, const int64_t *shape, const double *index,
                      int64_t n_index)
{
    const int k = c->op->n_state;
    const int64_t n = numel(ndim, shape);
    double *v = case_values(c, n);
    double *got[2][8];
    int64_t m = 0;
    dc_ctx *ctxs[2] = {cpu, gpu};
    s->op = c->op;
    for (int side = 0; side < 2; ++side) {
        dc_ctx *ctx = ctxs[side];
        dc_tensor *x[4], *out[4];
        make_fields(ctx, DC_F64, k, ndim, shape, v, n, x);
        for (int f = 0; f < k; ++f)
            TEST_OK(ctx, dc_tensor_set_requires_grad(x[f], true));
        s->index = index ? test_tensor(ctx, DC_F64, 1, &n_index, index) : NULL;
        dc_tape *tape = dc_tape_new(ctx);
        TEST_OK(ctx, run_op(tape, s, x, out));
        m = dc_tensor_numel(out[0]);
        for (int f = 0; f < k; ++f)
            got[side][f] = test_values(out[f]);
        dc_tensor *loss = loss_of(tape, s, x);
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        for (int f = 0; f < k; ++f)
            got[side][4 + f] = test_values(dc_tensor_grad(x[f]));
        dc_tape_free(tape);
        free_fields(k, x);
        dc_tensor_free(s->index);
    }
    for (int f = 0; f < k; ++f) {
        char what[96];
        snprintf(what, sizeof what, "%s kind %d: CUDA output field %d", c->op->name, (int)s->kind, f);
        test_assert_close(got[1][f], got[0][f], m, 1e-10, 1e-10, what);
        snprintf(what, sizeof what, "%s kind %d: CUDA gradient field %d", c->op->name, (int)s->kind, f);
        test_assert_close(got[1][4 + f], got[0][4 + f], n, 1e-10, 1e-9, what);
        for (int side = 0; side < 2; ++side) {
            free(got[side][f]);
            free(got[side][4 + f]);
        }
    }
    free(v);
}

static void test_cuda_matches_cpu(void **state)
{
    (void)state;
    if (!gpu)
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t block3[3] = {2, 1100, 3}; /* a row of two pieces, 6600 elements */
    const int64_t cube[3] = {37, 3, 11};    /* the reduced axes 0 and 2 not one run */
    const int64_t rows[2] = {700, 3};
    const int64_t line[1] = {5000};         /* five pieces, the last one short */
    const int64_t short_rows[2] = {3, 700}; /* one piece a row, not a multiple of the block */
    double *index = malloc(700 * sizeof *index);
    for (int i = 0; i < 700; ++i)
        index[i] = (double)((i * 37 + 11) % 41); /* unsorted, segments 41 and 42 empty */
    for (int ci = 1; ci < n_cases; ++ci) {
        const op_case *c = &cs[ci];
        if (ci != 2) {
            run_spec s = {.kind = RUN_SCAN, .axes = {1}};
            cuda_case(cpu, c, &s, 3, block3, NULL, 0);
            s = (run_spec){.kind = RUN_SCAN, .axes = {1}, .flag = ci != 3}; /* maxcount's starts at -inf */
            cuda_case(cpu, c, &s, 3, block3, NULL, 0);
            s = (run_spec){.kind = RUN_REDUCE, .n_axes = 1, .axes = {1}};
            cuda_case(cpu, c, &s, 3, block3, NULL, 0);
        }
        if (ci != 2) { /* rows of one lane: a block per piece */
            for (int ex = 0; ex < 2 - (ci == 3); ++ex) {
                run_spec s = {.kind = RUN_SCAN, .axes = {0}, .flag = ex};
                cuda_case(cpu, c, &s, 1, line, NULL, 0);
                s = (run_spec){.kind = RUN_SCAN, .axes = {1}, .flag = ex};
                cuda_case(cpu, c, &s, 2, short_rows, NULL, 0);
            }
            run_spec s = {.kind = RUN_REDUCE, .n_axes = 0};
            cuda_case(cpu, c, &s, 1, line, NULL, 0);
            s = (run_spec){.kind = RUN_REDUCE, .n_axes = 1, .axes = {1}}; /* one piece a row: buffers of 700 */
            cuda_case(cpu, c, &s, 2, short_rows, NULL, 0);
        }
        run_spec s = {.kind = RUN_REDUCE, .n_axes = 2, .axes = {0, 2}};
        cuda_case(cpu, c, &s, 3, cube, NULL, 0);
        s = (run_spec){.kind = RUN_SCAN, .axes = {2}, .flag = ci != 3};
        cuda_case(cpu, c, &s, 3, cube, NULL, 0);
        s = (run_spec){.kind = RUN_SEGMENT, .n_segments = ci == 3 ? 41 : 43};
        cuda_case(cpu, c, &s, 2, rows, index, 700);
    }
    free(index);
    dc_ctx_free(cpu);
}

/* CUDA's maps between runs and pieces (map_apply, map_then) give zero for
 * a zero carry times an infinite or NaN entry, as the CPU's do. */
static void test_cuda_zero_adjoints_meet_infinite_partials(void **state)
{
    (void)state;
    if (!gpu)
        skip();
    zero_adjoints_meet_infinite_partials(gpu);
}

static void test_cuda_reduce_adjoint_added_in_place(void **state)
{
    (void)state;
    if (!gpu)
        skip();
    reduce_adjoint_added_in_place(gpu);
}

/* Rows of one lane, where CUDA's adjoints take a piece per block (runs of
 * consecutive steps a thread, the runs' states scanned in the block) as
 * its primal does from 2 * 128 steps: at the edges of that choice and of
 * the pieces, lengths that are no multiple of the threads, two rows (the
 * second's pieces after the first's), and 257 pieces in a row (the carries
 * between them scanned by a block too). */
static void test_cuda_block_adjoints_at_piece_edges(void **state)
{
    (void)state;
    if (!gpu)
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    int n_cases;
    const op_case *cs = cases(&n_cases);
    const int64_t lens[] = {
        255, 256, 300, DC_ASSOC_CHUNK - 1, DC_ASSOC_CHUNK, DC_ASSOC_CHUNK + 1, 3 * DC_ASSOC_CHUNK + 5};
    for (int ci = 1; ci < n_cases; ++ci) {
        const op_case *c = &cs[ci];
        for (size_t li = 0; li < sizeof lens / sizeof *lens; ++li) {
            const int64_t shape[2] = {2, lens[li]};
            for (int ex = 0; ex < 2 - (ci == 3); ++ex) { /* maxcount's exclusive scan starts at -inf */
                run_spec s = {.kind = RUN_SCAN, .axes = {1}, .flag = ex};
                cuda_case(cpu, c, &s, 2, shape, NULL, 0);
            }
            run_spec s = {.kind = RUN_REDUCE, .n_axes = 1, .axes = {1}};
            cuda_case(cpu, c, &s, 2, shape, NULL, 0);
        }
    }
    const int64_t long_row[1] = {256 * DC_ASSOC_CHUNK + 3};
    for (int ex = 0; ex < 2; ++ex) {
        run_spec s = {.kind = RUN_SCAN, .axes = {0}, .flag = ex};
        cuda_case(cpu, &cs[1], &s, 1, long_row, NULL, 0);
    }
    run_spec s = {.kind = RUN_REDUCE, .n_axes = 0};
    cuda_case(cpu, &cs[1], &s, 1, long_row, NULL, 0);
    dc_ctx_free(cpu);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    o.quiet = true;
    o.seed = 1;
    const char *device = getenv("DC_DEVICE");
    if (device && strncmp(device, "cuda", 4) == 0)
        o.backend = DC_BACKEND_AUTO;
    gpu = dc_ctx_new(&o, NULL);
    const char *require = getenv("DC_REQUIRE_CUDA");
    if (!gpu && require && strcmp(require, "1") == 0) {
        printf("test_assoc: failed (DC_REQUIRE_CUDA=1): no usable CUDA device: %s\n", dc_last_error(NULL));
        return 1;
    }
    if (gpu)
        printf("test_assoc: CUDA on %s\n", dc_ctx_device_name(gpu));
    else
        printf("test_assoc: the CUDA comparison is skipped: no usable CUDA device: %s\n", dc_last_error(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_sum_matches_builtin),
        cmocka_unit_test(test_operators_match_references),
        cmocka_unit_test(test_segments_match_references),
        cmocka_unit_test(test_empty_and_size_one),
        cmocka_unit_test(test_reduce_gradients),
        cmocka_unit_test(test_reduce_gradients_at_piece_edges),
        cmocka_unit_test(test_reduce_adjoint_added_in_place),
        cmocka_unit_test(test_scan_gradients),
        cmocka_unit_test(test_segment_gradients),
        cmocka_unit_test(test_threads_give_identical_bits),
        cmocka_unit_test(test_grouped_pieces_match_lanes),
        cmocka_unit_test(test_grouped_rows_match_rows_alone),
        cmocka_unit_test(test_streamed_gradients_match_pieces),
        cmocka_unit_test(test_zero_adjoints_meet_infinite_partials),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_cuda_matches_cpu),
        cmocka_unit_test(test_cuda_block_adjoints_at_piece_edges),
        cmocka_unit_test(test_cuda_zero_adjoints_meet_infinite_partials),
        cmocka_unit_test(test_cuda_reduce_adjoint_added_in_place),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(gpu);
    return failed;
}
