/* Prefix scans (dc_op_scan): values against a sequential reference written
 * here, gradients against central differences (float64) and against brute
 * force (a product's gradient as sums of products of the others, a
 * maximum's to each prefix's winner) on zeros, ties, NaN and infinities;
 * axes first, middle, last and negative, transposed views, empty and
 * size-1 axes, float32; the same bits on 1 and 2 threads across many chunks;
 * refused arguments. The CUDA tests compare the CUDA backend with the CPU on
 * rows and columns beyond one chunk, and check that two runs give the same
 * bits; without a CUDA device they are skipped (failed with
 * DC_REQUIRE_CUDA=1). tests/cuda_emulation runs them on the CPU emulation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

static dc_ctx *gpu;
static char no_gpu_reason[512];

static const dc_reduction ops[4] = {DC_REDUCE_SUM, DC_REDUCE_PROD, DC_REDUCE_MAX, DC_REDUCE_MIN};

/* ---- the reference, sequential, in double ---- */

static double ref_neutral(dc_reduction op)
{
    return op == DC_REDUCE_SUM ? 0.0 : op == DC_REDUCE_PROD ? 1.0 : op == DC_REDUCE_MAX ? -INFINITY : INFINITY;
}

static double ref_combine(dc_reduction op, double acc, double v)
{
    if (op == DC_REDUCE_SUM)
        return acc + v;
    if (op == DC_REDUCE_PROD)
        return acc * v;
    if (isnan(acc))
        return acc;
    if (isnan(v))
        return v;
    return (op == DC_REDUCE_MAX ? v > acc : v < acc) ? v : acc;
}

/* The block sizes of a scan of `shape` along `axis` (already >= 0). */
static void block_of(int ndim, const int64_t *shape, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; ++d)
        *outer *= shape[d];
    for (int d = axis + 1; d < ndim; ++d)
        *inner *= shape[d];
    *len = shape[axis];
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

/* y: the scan of x (row-major, `shape`) along axis. */
static void ref_scan(dc_reduction op, bool exclusive, int ndim, const int64_t *shape, int axis, const double *x,
                     double *y)
{
    int64_t outer, len, inner;
    block_of(ndim, shape, axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
            double acc = ref_neutral(op);
            for (int64_t i = 0; i < len; ++i) {
                const int64_t at = (o * len + i) * inner + j;
                const double next = ref_combine(op, acc, x[at]);
                y[at] = exclusive ? acc : next;
                acc = next;
            }
        }
}

/* gx: the gradient of sum(g * scan(x)) by brute force: every output's
 * adjoint given to the elements of its prefix, as the partial of the
 * prefix's result (the product of the other elements; 1 for the winner of
 * a maximum or minimum, the first element equal to it or the first NaN). */
static void ref_grad(dc_reduction op, bool exclusive, int ndim, const int64_t *shape, int axis, const double *x,
                     const double *g, double *gx)
{
    int64_t outer, len, inner;
    block_of(ndim, shape, axis, &outer, &len, &inner);
    memset(gx, 0, (size_t)numel_of(ndim, shape) * sizeof *gx);
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j)
            for (int64_t k = 0; k < len; ++k) {
                const int64_t end = exclusive ? k : k + 1; /* the prefix [0, end) */
                const double gk = g[(o * len + k) * inner + j];
                if (end == 0 || gk == 0) /* a zero adjoint contributes zero */
                    continue;
                if (op == DC_REDUCE_MAX || op == DC_REDUCE_MIN) {
                    int64_t win = 0;
                    for (int64_t i = 1; i < end; ++i) {
                        const double a = x[(o * len + i) * inner + j], w = x[(o * len + win) * inner + j];
                        if (!isnan(w) && (isnan(a) || (op == DC_REDUCE_MAX ? a > w : a < w)))
                            win = i;
                    }
                    gx[(o * len + win) * inner + j] += gk;
                    continue;
                }
                for (int64_t i = 0; i < end; ++i) {
                    /* zero-safe: 0 where another element is 0, even beside
                     * an infinity or NaN */
                    double partial = 1.0;
                    bool zero = false;
                    for (int64_t m = 0; op == DC_REDUCE_PROD && m < end; ++m)
                        if (m != i) {
                            partial *= x[(o * len + m) * inner + j];
                            zero = zero || x[(o * len + m) * inner + j] == 0;
                        }
                    gx[(o * len + i) * inner + j] += gk * (zero ? 0.0 : partial);
                }
            }
}

/* ---- running the op ---- */

/* Host values of a tensor, whatever its backend (contiguous tensors). */
static double *values_of(const dc_tensor *t)
{
    const int64_t n = dc_tensor_numel(t);
    const dc_dtype dtype = dc_tensor_dtype(t);
    void *raw = malloc((size_t)(n ? n : 1) * dc_dtype_size(dtype));
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(raw);
    assert_non_null(v);
    TEST_OK(dc_tensor_ctx(t), dc_tensor_to_host(t, raw, (size_t)n * dc_dtype_size(dtype)));
    for (int64_t i = 0; i < n; ++i)
        v[i] = dtype == DC_F64 ? ((double *)raw)[i] : (double)((float *)raw)[i];
    free(raw);
    return v;
}

/* A persistent tensor of values (doubles) in dtype, from host memory. */
static dc_tensor *tensor_of(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const double *v)
{
    const int64_t n = numel_of(ndim, shape);
    void *raw = malloc((size_t)(n ? n : 1) * dc_dtype_size(dtype));
    assert_non_null(raw);
    for (int64_t i = 0; i < n; ++i) {
        if (dtype == DC_F64)
            ((double *)raw)[i] = v[i];
        else
            ((float *)raw)[i] = (float)v[i];
    }
    dc_tensor *t = dc_tensor_from_host(ctx, dtype, ndim, shape, raw);
    free(raw);
    TEST_NONNULL(ctx, t);
    return t;
}

typedef struct scan_case {
    dc_reduction op;
    bool exclusive;
    int axis;       /* as given to dc_op_scan */
    bool transpose; /* x is the transpose of a [shape[1], shape[0]] tensor (2-D) */
} scan_case;

/* Runs the scan of x (values xv, `shape`) and a backward pass seeded with
 * g: *y and *gx get the output and x's gradient (malloc'd, row-major in
 * `shape`). */
static void run_scan(dc_ctx *ctx, dc_dtype dtype, const scan_case *c, int ndim, const int64_t *shape, const double *xv,
                     const double *gv, double **y, double **gx)
{
    const int64_t n = numel_of(ndim, shape);
    dc_tensor *base;
    if (c->transpose) {
        const int64_t tshape[2] = {shape[1], shape[0]};
        double *tv = malloc((size_t)(n ? n : 1) * sizeof *tv);
        for (int64_t i = 0; i < shape[0]; ++i)
            for (int64_t j = 0; j < shape[1]; ++j)
                tv[j * shape[0] + i] = xv[i * shape[1] + j];
        base = tensor_of(ctx, dtype, 2, tshape, tv);
        free(tv);
    } else {
        base = tensor_of(ctx, dtype, ndim, shape, xv);
    }
    TEST_OK(ctx, dc_tensor_set_requires_grad(base, true));
    dc_tensor *g = tensor_of(ctx, dtype, ndim, shape, gv);
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    dc_tensor *x = c->transpose ? dc_op_transpose(tape, base, 0, 1) : base;
    TEST_NONNULL(ctx, x);
    dc_tensor *out = dc_op_scan(tape, x, c->op, c->axis, c->exclusive);
    TEST_NONNULL(ctx, out);
    assert_int_equal(dc_tensor_ndim(out), ndim);
    for (int d = 0; d < ndim; ++d)
        assert_int_equal(dc_tensor_shape(out)[d], shape[d]);
    *y = values_of(out);
    TEST_OK(ctx, dc_backward_with(tape, out, g));
    const dc_tensor *grad = dc_tensor_grad(base);
    TEST_NONNULL(ctx, grad);
    double *bg = values_of(grad);
    if (c->transpose) {
        *gx = malloc((size_t)(n ? n : 1) * sizeof **gx);
        for (int64_t i = 0; i < shape[0]; ++i)
            for (int64_t j = 0; j < shape[1]; ++j)
                (*gx)[i * shape[1] + j] = bg[j * shape[0] + i];
        free(bg);
    } else {
        *gx = bg;
    }
    dc_tape_free(tape);
    dc_tensor_free(g);
    dc_tensor_free(base);
}

/* Deterministic values: uniform in [lo, hi) from a simple generator. */
static void fill(double *v, int64_t n, double lo, double hi, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
    }
}

/* Values where each op's scan stays in range: products of numbers near 1
 * (signs mixed), sums, maxima and minima of any. */
static void fill_for(dc_reduction op, double *v, int64_t n, uint64_t seed)
{
    fill(v, n, op == DC_REDUCE_PROD ? 0.8 : -2.0, op == DC_REDUCE_PROD ? 1.2 : 2.0, seed);
    if (op == DC_REDUCE_PROD)
        for (int64_t i = 0; i < n; i += 3)
            v[i] = -v[i];
}

/* test_assert_close, with equal values (infinities) passing. */
static void assert_close(const double *a, const double *b, int64_t n, double atol, double rtol, const char *what)
{
    for (int64_t i = 0; i < n; ++i)
        if (a[i] != b[i])
            test_assert_close(&a[i], &b[i], 1, atol, rtol, what);
}

static void assert_same_bits(const double *a, const double *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; ++i)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0 && !(isnan(a[i]) && isnan(b[i])))
            fail_msg("%s: element %lld: %.17g vs %.17g", what, (long long)i, a[i], b[i]);
}

/* ---- CPU ---- */

/* Values and gradients against the reference, for every op, inclusive and
 * exclusive, along every axis of a 3-D shape (negative too) and of a
 * transposed view, in float64 and float32. */
static void test_matches_reference(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[3] = {3, 5, 4}, shape2[2] = {6, 7};
    const int axes[4] = {0, 1, 2, -1};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        const double tol = dtype == DC_F64 ? 1e-12 : 1e-5;
        for (int o = 0; o < 4; ++o)
            for (int e = 0; e < 2; ++e)
                for (int a = 0; a < 6; ++a) {
                    const bool transposed = a >= 4;
                    const scan_case c = {ops[o], e == 1, transposed ? a - 4 : axes[a], transposed};
                    const int ndim = transposed ? 2 : 3;
                    const int64_t *sh = transposed ? shape2 : shape;
                    const int64_t n = numel_of(ndim, sh);
                    double xv[60], gv[60], want_y[60], want_g[60], *y, *gx;
                    fill_for(c.op, xv, n, (uint64_t)(o * 10 + a));
                    fill(gv, n, -1, 1, 99);
                    if (dtype == DC_F32) /* the reference on the values float32 holds */
                        for (int64_t i = 0; i < n; ++i)
                            xv[i] = (float)xv[i], gv[i] = (float)gv[i];
                    const int axis = c.axis < 0 ? c.axis + ndim : c.axis;
                    ref_scan(c.op, c.exclusive, ndim, sh, axis, xv, want_y);
                    ref_grad(c.op, c.exclusive, ndim, sh, axis, xv, gv, want_g);
                    run_scan(ctx, dtype, &c, ndim, sh, xv, gv, &y, &gx);
                    char what[128];
                    snprintf(what, sizeof what, "%s %s %s axis %d%s", dc_dtype_name(dtype), dc_reduction_name(c.op),
                             c.exclusive ? "exclusive" : "inclusive", c.axis, transposed ? " (transposed)" : "");
                    assert_close(y, want_y, n, tol, tol, what);
                    assert_close(gx, want_g, n, tol, tol, what);
                    free(y);
                    free(gx);
                }
    }
    dc_ctx_free(ctx);
}

typedef struct gc_case {
    scan_case c;
    dc_tensor *w;    /* weights of the loss: sum(w * scan(x)) */
    bool drop_first; /* ... without the first element along the axis */
    int axis;        /* the axis, >= 0 */
} gc_case;

static dc_tensor *scan_loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    const gc_case *k = user;
    dc_tensor *x = k->c.transpose ? dc_op_transpose(tape, in[0], 0, 1) : in[0];
    dc_tensor *y = dc_op_scan(tape, x, k->c.op, k->c.axis, k->c.exclusive);
    if (k->drop_first) /* the infinite neutral element would make the loss infinite */
        y = dc_op_slice(tape, y, k->c.axis, 1, dc_tensor_shape(x)[k->axis] - 1);
    return dc_op_sum(tape, dc_op_mul(tape, y, k->w), 0, NULL, false);
}

/* Backprop against central differences in float64, every op and mode,
 * along each axis and through a transposed view. */
static void test_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[3] = {3, 4, 5}, tshape[2] = {5, 6}, tview[3] = {6, 5, 0};
    const int axes[5] = {0, 1, 2, -1, -3};
    for (int o = 0; o < 4; ++o)
        for (int e = 0; e < 2; ++e)
            for (int a = 0; a < 7; ++a) {
                const bool transposed = a >= 5;
                gc_case k = {{ops[o], e == 1, transposed ? a - 5 : axes[a], transposed}, NULL, false, 0};
                const int ndim = transposed ? 2 : 3;
                const int64_t *xs = transposed ? tshape : shape;
                int64_t ys[3];
                memcpy(ys, transposed ? tview : shape, sizeof ys);
                k.axis = k.c.axis < 0 ? k.c.axis + ndim : k.c.axis;
                k.drop_first = k.c.exclusive && k.c.op != DC_REDUCE_SUM && k.c.op != DC_REDUCE_PROD;
                ys[k.axis] -= k.drop_first;
                double xv[60], wv[60];
                fill_for(k.c.op, xv, 60, (uint64_t)(100 + o * 10 + a));
                fill(wv, 60, -1, 1, 7);
                dc_tensor *x = tensor_of(ctx, DC_F64, ndim, xs, xv);
                k.w = tensor_of(ctx, DC_F64, ndim, ys, wv);
                TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
                dc_gradcheck_options opt = dc_gradcheck_options_default();
                opt.max_per_input = 0; /* every element */
                dc_gradcheck_report rep;
                const dc_status st = dc_gradcheck(ctx, scan_loss, &k, 1, &x, &opt, &rep);
                if (st != DC_OK)
                    fail_msg("%s %s axis %d%s: gradcheck %s, element %lld: backprop %.17g, numeric %.17g: %s",
                             dc_reduction_name(k.c.op), k.c.exclusive ? "exclusive" : "inclusive", k.c.axis,
                             transposed ? " (transposed)" : "", dc_status_name(st), (long long)rep.worst_index,
                             rep.worst_backprop, rep.worst_numeric, dc_last_error(ctx));
                assert_int_equal(rep.checked, numel_of(ndim, xs));
                dc_tensor_free(x);
                dc_tensor_free(k.w);
            }
    dc_ctx_free(ctx);
}

/* The same across chunks: a long row and a few long columns, every op and
 * mode, 24 elements of each checked (spread over the chunks); and rows whose
 * pieces the CPU scans side by side (a row of nine chunks, sixteen short
 * rows). */
static void test_gradcheck_long(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    /* [9000, 3] along 0: columns cut in three chunks, so that a chunk's
     * adjoint summary (its affine map: a product's multiplier too) carries
     * past the next */
    const int64_t shapes[5][2] = {{1, 9001}, {4500, 2}, {1, 36869}, {16, 300}, {9000, 3}};
    const int axes[5] = {1, 0, 1, 1, 0};
    double *xv = malloc(36869 * sizeof *xv), *wv = malloc(36869 * sizeof *wv);
    assert_non_null(xv);
    assert_non_null(wv);
    for (int l = 0; l < 5; ++l)
        for (int o = 0; o < 4; ++o)
            for (int e = 0; e < 2; ++e) {
                gc_case k = {{ops[o], e == 1, axes[l], false}, NULL, false, axes[l]};
                int64_t ys[2] = {shapes[l][0], shapes[l][1]};
                k.drop_first = k.c.exclusive && k.c.op != DC_REDUCE_SUM && k.c.op != DC_REDUCE_PROD;
                ys[k.axis] -= k.drop_first;
                const int64_t n = shapes[l][0] * shapes[l][1];
                fill(xv, n, k.c.op == DC_REDUCE_PROD ? 0.999 : -1.0, k.c.op == DC_REDUCE_PROD ? 1.001 : 1.0,
                     (uint64_t)(200 + o));
                fill(wv, n, -1, 1, 8);
                dc_tensor *x = tensor_of(ctx, DC_F64, 2, shapes[l], xv);
                k.w = tensor_of(ctx, DC_F64, 2, ys, wv);
                TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
                dc_gradcheck_options opt = dc_gradcheck_options_default();
                opt.max_per_input = 24;
                opt.atol = 1e-6; /* the loss sums thousands of terms */
                opt.rtol = 1e-5;
                dc_gradcheck_report rep;
                const dc_status st = dc_gradcheck(ctx, scan_loss, &k, 1, &x, &opt, &rep);
                if (st != DC_OK)
                    fail_msg("%s %s along %d of %lld x %lld: gradcheck %s, element %lld: backprop %.17g, numeric "
                             "%.17g",
                             dc_reduction_name(k.c.op), k.c.exclusive ? "exclusive" : "inclusive", k.axis,
                             (long long)shapes[l][0], (long long)shapes[l][1], dc_status_name(st),
                             (long long)rep.worst_index, rep.worst_backprop, rep.worst_numeric);
                assert_int_equal(rep.checked, 24);
                dc_tensor_free(x);
                dc_tensor_free(k.w);
            }
    free(xv);
    free(wv);
    dc_ctx_free(ctx);
}

/* One row of n elements scanned as c says, its output and gradient (from
 * the adjoint gv) equal to the reference's bit for bit. */
static void assert_row_exact(dc_ctx *ctx, dc_dtype dtype, const scan_case *c, int64_t n, const double *row,
                             const double *gv, const char *what)
{
    const int64_t shape[1] = {n};
    double want_y[16], want_g[16], *y, *gx;
    assert_true(n <= 16);
    ref_scan(c->op, c->exclusive, 1, shape, 0, row, want_y);
    ref_grad(c->op, c->exclusive, 1, shape, 0, row, gv, want_g);
    run_scan(ctx, dtype, c, 1, shape, row, gv, &y, &gx);
    assert_same_bits(y, want_y, n, what);
    assert_same_bits(gx, want_g, n, what);
    free(y);
    free(gx);
}

/* A product's gradient with no zero, one, two and only zeros, exact: the
 * values are small powers of two and integers, so every product is exact
 * in any order. With an infinity, the outputs whose adjoint is zero add
 * nothing (no 0 * inf). A zero with an infinity or NaN before a position
 * (whose output, the plain product, is NaN) makes every other partial of
 * that prefix 0, as without them: the products before the position are
 * zero-safe too. */
static void test_prod_zeros(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { ROWS = 9 };
    const double rows[ROWS][6] = {
        {2, -0.5, 3, 4, -1, 0.25},        /* no zero */
        {2, -0.5, 0, 4, -1, 0.25},        /* one */
        {0, -0.5, 3, 0, -1, 0.25},        /* two */
        {0, 0, 0, 0, 0, 0},               /* only zeros */
        {2, INFINITY, 0, 3, -1, 0.25},    /* an infinity, then a zero: with zero adjoints there */
        {0, INFINITY, 2, 1, 0.5, 4},      /* a zero, then an infinity */
        {2, NAN, 0, 3, -1, 0.25},         /* NaN, then a zero */
        {0, 0, INFINITY, 2, -1, 4},       /* two zeros, then an infinity */
        {2, INFINITY, 0.5, 0, 3, 0.25},   /* an infinity, then a zero: every adjoint */
    };
    /* (an infinite partial meets adjoints of one sign, its sum over the
     * prefixes is the same infinity in any order) */
    const double adjoints[3][6] = {{1, -2, 3, 0.5, -1, 2}, {1, 0.5, 0, 0, 0, 0}, {1, 0.5, 0.25, 2, 1, 0.5}};
    for (int r = 0; r < ROWS; ++r)
        for (int e = 0; e < 2; ++e)
            for (int dt = 0; dt < 2; ++dt) {
                const scan_case c = {DC_REDUCE_PROD, e == 1, 0, false};
                char what[64];
                snprintf(what, sizeof what, "prod row %d %s", r, c.exclusive ? "exclusive" : "inclusive");
                assert_row_exact(ctx, dt ? DC_F32 : DC_F64, &c, 6, rows[r], adjoints[r == 4 ? 1 : r > 4 ? 2 : 0], what);
            }
    dc_ctx_free(ctx);
}

/* Maxima and minima with ties, NaN and infinities: the values exact, each
 * prefix's adjoint whole to its winner (the first element equal to the
 * result, or the first NaN). */
static void test_max_min_winners(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double rows[5][8] = {
        {1, 3, 3, 2, 3, 5, 5, 0},                                  /* ties */
        {-INFINITY, -INFINITY, 1, INFINITY, INFINITY, 2, 0, 1},    /* infinities */
        {1, 2, NAN, 3, NAN, 5, 0, 1},                              /* NaN from the third on */
        {NAN, 1, 2, 3, 4, 5, 6, 7},                                /* NaN first */
        {INFINITY, -INFINITY, INFINITY, -INFINITY, 0, -0.0, 0, 1}, /* both infinities, signed zeros */
    };
    const double gv[8] = {1, 2, 4, 8, 16, 32, 64, 128}; /* each sum of adjoints names its terms */
    for (int r = 0; r < 5; ++r)
        for (int o = 2; o < 4; ++o)
            for (int e = 0; e < 2; ++e)
                for (int dt = 0; dt < 2; ++dt) {
                    const scan_case c = {ops[o], e == 1, -1, false};
                    char what[64];
                    snprintf(what, sizeof what, "%s row %d %s", dc_reduction_name(c.op), r,
                             c.exclusive ? "exclusive" : "inclusive");
                    assert_row_exact(ctx, dt ? DC_F32 : DC_F64, &c, 8, rows[r], gv, what);
                }
    dc_ctx_free(ctx);
}

/* Along an empty axis, and along an axis of one element (inclusive: y = x
 * and the adjoint passed through; exclusive: the neutral element and no
 * gradient); tensors without elements along another axis. */
static void test_empty_and_single(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shapes[4][2] = {{0, 3}, {3, 0}, {3, 1}, {1, 3}};
    const int axes[4] = {0, 0, 1, 0};
    const double xv[3] = {2, -1, 0.5}, gv[3] = {1, 2, 3};
    for (int s = 0; s < 4; ++s)
        for (int o = 0; o < 4; ++o)
            for (int e = 0; e < 2; ++e) {
                const scan_case c = {ops[o], e == 1, axes[s], false};
                double *y, *gx;
                run_scan(ctx, DC_F64, &c, 2, shapes[s], xv, gv, &y, &gx);
                const int64_t n = numel_of(2, shapes[s]);
                for (int64_t i = 0; i < n; ++i) {
                    const double want = c.exclusive ? ref_neutral(c.op) : xv[i];
                    if (y[i] != want || gx[i] != (c.exclusive ? 0.0 : gv[i]))
                        fail_msg("%s %s along %d of %lld x %lld: element %lld is %g (gradient %g)",
                                 dc_reduction_name(c.op), c.exclusive ? "exclusive" : "inclusive", c.axis,
                                 (long long)shapes[s][0], (long long)shapes[s][1], (long long)i, y[i], gx[i]);
                }
                free(y);
                free(gx);
            }
    dc_ctx_free(ctx);
}

/* A long scan across many chunks: the same bits on 1 and 2 threads, values
 * and gradients, for one long row and for a few long columns; and close to
 * the sequential reference. */
static void test_threads_same_bits(void **state)
{
    (void)state;
    dc_ctx *one = test_cpu_ctx_threads(1, 1), *two = test_cpu_ctx_threads(2, 1);
    const int64_t row[1] = {100003}, cols[2] = {30001, 3};
    double *xv = malloc(100003 * sizeof *xv), *gv = malloc(100003 * sizeof *gv);
    double *want = malloc(100003 * sizeof *want);
    assert_non_null(xv);
    assert_non_null(gv);
    assert_non_null(want);
    fill(gv, 100003, -1, 1, 5);
    for (int s = 0; s < 2; ++s)
        for (int o = 0; o < 4; ++o)
            for (int dt = 0; dt < 2; ++dt) {
                const dc_dtype dtype = dt ? DC_F32 : DC_F64;
                const int ndim = s ? 2 : 1;
                const int64_t *shape = s ? cols : row;
                const int64_t n = numel_of(ndim, shape);
                /* products of values very near 1 stay in range this long */
                fill(xv, n, ops[o] == DC_REDUCE_PROD ? 0.999 : -1.0, ops[o] == DC_REDUCE_PROD ? 1.001 : 1.0, 11);
                if (dtype == DC_F32)
                    for (int64_t i = 0; i < n; ++i)
                        xv[i] = (float)xv[i];
                const scan_case c = {ops[o], (o + dt) % 2 == 1, 0, false};
                double *y1, *g1, *y2, *g2;
                run_scan(one, dtype, &c, ndim, shape, xv, gv, &y1, &g1);
                run_scan(two, dtype, &c, ndim, shape, xv, gv, &y2, &g2);
                char what[64];
                snprintf(what, sizeof what, "%s %s on %lld elements", dc_dtype_name(dtype), dc_reduction_name(c.op),
                         (long long)n);
                assert_same_bits(y1, y2, n, what);
                assert_same_bits(g1, g2, n, what);
                ref_scan(c.op, c.exclusive, ndim, shape, 0, xv, want);
                assert_close(y1, want, n, dtype == DC_F64 ? 1e-9 : 1e-4, dtype == DC_F64 ? 1e-9 : 1e-5, what);
                free(y1);
                free(g1);
                free(y2);
                free(g2);
            }
    free(xv);
    free(gv);
    free(want);
    dc_ctx_free(one);
    dc_ctx_free(two);
}

/* A product's gradient that underflows to zero (float64: 1e-10 times
 * -5e-324) is +0, whichever path its piece takes: the pieces whose factors
 * are all finite and not zero take one without the zero-safe tests, and
 * which pieces those are, or which share lanes, follows the thread count
 * (columns: pieces narrow while a thread has none) and the batch (short
 * rows). Columns over axis 0 of [3, 128] and rows over axis 1 of [2, 3], a
 * zero elsewhere in each, on 1, 2 and 4 threads. */
static void test_product_underflow_same_bits(void **state)
{
    (void)state;
    dc_ctx *ctxs[3] = {test_cpu_ctx_threads(1, 1), test_cpu_ctx_threads(2, 1), test_cpu_ctx_threads(4, 1)};
    for (int s = 0; s < 2; ++s) {
        const bool cols = s == 0;
        const int64_t shape[2] = {cols ? 3 : 2, cols ? 128 : 3}, n = shape[0] * shape[1];
        /* the underflowing line: column 100 or row 1; a zero in column 0 or
         * row 0; the underflow at the line's position 1 */
        const int64_t line_step = cols ? shape[1] : 1, line_at = cols ? 100 : shape[1], zero_at = cols ? shape[1] : 1;
        double xv[384], gv[384], *g[3];
        for (int64_t i = 0; i < n; ++i) {
            xv[i] = 1.0;
            gv[i] = 1.0;
        }
        xv[zero_at] = 0.0;
        xv[line_at] = 1e-10;
        gv[line_at] = 0.0;
        gv[line_at + line_step] = -5e-324;
        gv[line_at + 2 * line_step] = 0.0;
        const scan_case c = {DC_REDUCE_PROD, false, cols ? 0 : 1, false};
        for (int t = 0; t < 3; ++t) {
            double *y;
            run_scan(ctxs[t], DC_F64, &c, 2, shape, xv, gv, &y, &g[t]);
            free(y);
        }
        const double under = g[0][line_at + line_step];
        if (under != 0.0 || signbit(under))
            fail_msg("%s: the underflowing partial is %g (sign %d), want +0", cols ? "columns" : "rows", under,
                     signbit(under) != 0);
        assert_same_bits(g[0], g[1], n, cols ? "columns, 1 and 2 threads" : "rows, 1 and 2 threads");
        assert_same_bits(g[0], g[2], n, cols ? "columns, 1 and 4 threads" : "rows, 1 and 4 threads");
        for (int t = 0; t < 3; ++t)
            free(g[t]);
    }
    for (int t = 0; t < 3; ++t)
        dc_ctx_free(ctxs[t]);
}

/* The gradient of a long sum scan is the reverse cumulative sum of the
 * adjoint, and a long maximum's goes to the winners: both across chunks. */
static void test_long_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[1] = {40000};
    double *xv = malloc(40000 * sizeof *xv), *gv = malloc(40000 * sizeof *gv), *want = malloc(40000 * sizeof *want);
    assert_non_null(xv);
    assert_non_null(gv);
    assert_non_null(want);
    fill(xv, 40000, -1, 1, 3);
    for (int64_t i = 0; i < 40000; ++i)
        gv[i] = (double)((i * 7) % 5) - 2; /* integers: every sum exact */
    for (int o = 0; o < 4; o += 2) {
        const scan_case c = {ops[o], false, 0, false};
        double *y, *gx;
        run_scan(ctx, DC_F64, &c, 1, shape, xv, gv, &y, &gx);
        if (o == 0) {
            double acc = 0;
            for (int64_t i = 40000; i-- > 0;)
                want[i] = acc += gv[i];
        } else {
            memset(want, 0, 40000 * sizeof *want);
            int64_t win = 0;
            for (int64_t i = 0; i < 40000; ++i) {
                win = xv[i] > xv[win] ? i : win;
                want[win] += gv[i];
            }
        }
        assert_same_bits(gx, want, 40000, dc_reduction_name(c.op));
        free(y);
        free(gx);
    }
    free(xv);
    free(gv);
    free(want);
    dc_ctx_free(ctx);
}

/* The adjoint of a 1-D scan by its recurrence, sequentially in double with
 * the zero-safe products: an independent order of the operations (the
 * library chains pieces), close but not equal to the library's in bits. */
static void ref_grad_recurrence(dc_reduction op, bool exclusive, int64_t n, const double *x, const double *g,
                                double *gx)
{
    double *incl = malloc((size_t)(n ? n : 1) * sizeof *incl);
    assert_non_null(incl);
    ref_scan(op, false, 1, &n, 0, x, incl);
    /* the product before i is zero-safe too: 0 from the first zero on */
    for (int64_t i = 0, zero = 0; i < n; ++i)
        if ((zero = zero || x[i] == 0))
            incl[i] = 0.0;
    double lambda = 0.0;
    for (int64_t i = n; i-- > 0;) {
        const double c = exclusive ? (i + 1 < n ? g[i + 1] : 0.0) : g[i];
        const double k = i + 1 < n ? x[i + 1] : 0.0, s = i > 0 ? incl[i - 1] : 1.0;
        lambda = c + (k == 0 || lambda == 0 ? 0.0 : k * lambda);
        gx[i] = s == 0 || lambda == 0 ? 0.0 : s * lambda;
    }
    free(incl);
}

/* A maximum's or minimum's gradient: each output's adjoint to its prefix's
 * winner (sequential: the library's sums in another order are exact for
 * the integer adjoints given here). */
static void ref_grad_winners(dc_reduction op, bool exclusive, int64_t n, const double *x, const double *g, double *gx)
{
    memset(gx, 0, (size_t)(n ? n : 1) * sizeof *gx);
    int64_t win = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double a = x[i], w = x[win];
        if (i > 0 && !isnan(w) && (isnan(a) || (op == DC_REDUCE_MAX ? a > w : a < w)))
            win = i;
        if (!exclusive)
            gx[win] += g[i];
        else if (i + 1 < n)
            gx[win] += g[i + 1];
    }
}

/* The CPU's pieces of a long line (src/ops/scan.c's CPU_CHUNK). */
enum { PIECE = 4080 };

/* The CPU adjoint's fast pieces (sums, products without a zero or an
 * infinity, maxima and minima where nothing takes over; float32 lanes in
 * vector tiles, src/ops/scan_tiles.h) next to pieces that take the general
 * path: lengths around the piece size (PIECE) and lanes of eight equal
 * pieces beside a shorter one; a zero (products) or a new winner and a NaN
 * (maxima, minima) inside a piece, or at the first position of the second
 * (which the first piece's adjoint reads). The gradients against a
 * reference, the same bits on 1 and 2 threads. */
static void test_fast_pieces(void **state)
{
    (void)state;
    dc_ctx *one = test_cpu_ctx_threads(1, 1), *two = test_cpu_ctx_threads(2, 1);
    const int64_t lens[] = {PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 1, 8 * PIECE, 9 * PIECE + 5};
    const int64_t most = 9 * PIECE + 5;
    double *xv = malloc(most * sizeof *xv), *gv = malloc(most * sizeof *gv), *want = malloc(most * sizeof *want);
    assert_non_null(xv);
    assert_non_null(gv);
    assert_non_null(want);
    for (size_t l = 0; l < sizeof lens / sizeof *lens; ++l)
        for (int o = 0; o < 4; ++o)
            for (int special = 0; special < (o == 0 ? 1 : 3); ++special)
                for (int e = 0; e < 2; ++e)
                    for (int dt = 0; dt < 2; ++dt) {
                        const int64_t n = lens[l];
                        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
                        const bool prod = ops[o] == DC_REDUCE_PROD;
                        fill(xv, n, prod ? 0.999 : -1.0, prod ? 1.001 : 1.0, 31 + l);
                        /* positive adjoints for the products (no cancellation), integers for the others */
                        for (int64_t i = 0; i < n; ++i)
                            gv[i] = prod ? 0.5 + (double)(i % 7) / 7.0 : (double)(i % 5) - 2.0;
                        if (dtype == DC_F32)
                            for (int64_t i = 0; i < n; ++i)
                                xv[i] = (float)xv[i];
                        /* in the third piece where there is one, else the first; the
                         * second kind at the first position of the second piece, the
                         * factor the first piece's adjoint reads beyond its end */
                        const int64_t at = special == 2 && n > PIECE ? PIECE
                                           : n > 2 * PIECE + 100   ? 2 * PIECE + 100
                                                                   : 100;
                        if (special && prod) {
                            xv[at] = 0.0;
                        } else if (special) {
                            xv[at] = ops[o] == DC_REDUCE_MAX ? 5.0 : -5.0;
                            xv[n - 3000] = NAN;
                        }
                        const scan_case c = {ops[o], e == 1, 0, false};
                        double *y1, *g1, *y2, *g2;
                        run_scan(one, dtype, &c, 1, &n, xv, gv, &y1, &g1);
                        run_scan(two, dtype, &c, 1, &n, xv, gv, &y2, &g2);
                        char what[96];
                        snprintf(what, sizeof what, "%s %s %s of %lld%s", dc_dtype_name(dtype), dc_reduction_name(c.op),
                                 c.exclusive ? "exclusive" : "inclusive", (long long)n,
                                 special ? (prod ? " with a zero" : " with a winner and a NaN") : "");
                        assert_same_bits(g1, g2, n, what);
                        if (ops[o] == DC_REDUCE_SUM) { /* integer adjoints: every sum exact */
                            double acc = 0.0;
                            for (int64_t i = n; i-- > 0;) {
                                want[i] = c.exclusive ? acc : acc + gv[i];
                                acc += gv[i];
                            }
                            assert_same_bits(g1, want, n, what);
                        } else if (prod) {
                            ref_grad_recurrence(c.op, c.exclusive, n, xv, gv, want);
                            /* zeros exact, the rest to rounding */
                            assert_close(g1, want, n, 0.0, dtype == DC_F64 ? 1e-9 : 1e-4, what);
                        } else {
                            ref_grad_winners(c.op, c.exclusive, n, xv, gv, want);
                            assert_same_bits(g1, want, n, what);
                        }
                        free(y1);
                        free(g1);
                        free(y2);
                        free(g2);
                    }
    free(xv);
    free(gv);
    free(want);
    dc_ctx_free(one);
    dc_ctx_free(two);
}

/* A float32 product scan's adjoint, where its factors are finite and not
 * zero, against the recurrence in long double, over long rows whose
 * factors span six orders of magnitude (1e3 and 1e-3 in turn, times
 * e^(u_i - u_(i-1)) for u uniform in [-3, 3], so that the products stay
 * in range): one row cut into chunks, and 64 whole rows, whose lanes run
 * 2500 tiles each. The tiles find the products before each position from
 * x (divided per tile, multiplied up it): their relative error must stay at
 * float32's rounding, as when they were read from y (1.2e-7 there). */
static void test_prod_adjoint_precision(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int64_t shapes[2][2] = {{1, 100000}, {64, 20000}};
    for (int sh = 0; sh < 2; ++sh) {
        const int64_t rows = shapes[sh][0], len = shapes[sh][1], n = rows * len;
        float *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g),
              *gx = malloc((size_t)n * sizeof *gx);
        long double *before = malloc((size_t)len * sizeof *before);
        assert_true(x && g && gx && before);
        uint64_t r = 0x9e3779b97f4a7c15ull;
        double prev = 0;
        for (int64_t i = 0; i < n; ++i) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const double u = 6.0 * (double)(r >> 11) / 9007199254740992.0 - 3.0;
            x[i] = (float)((i % 2 ? 1e3 : 1e-3) * exp(u - prev));
            prev = u;
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            g[i] = (float)((double)(r >> 11) / 9007199254740992.0);
        }
        dc_tensor *tx = dc_tensor_from_host(ctx, DC_F32, 2, shapes[sh], x);
        dc_tensor *tg = dc_tensor_from_host(ctx, DC_F32, 2, shapes[sh], g);
        TEST_NONNULL(ctx, tx);
        TEST_NONNULL(ctx, tg);
        TEST_OK(ctx, dc_tensor_set_requires_grad(tx, true));
        for (int e = 0; e < 2; ++e) {
            dc_tape_reset(tape);
            dc_tensor_zero_grad(tx);
            dc_tensor *y = dc_op_scan(tape, tx, DC_REDUCE_PROD, 1, e == 1);
            TEST_NONNULL(ctx, y);
            TEST_OK(ctx, dc_backward_with(tape, y, tg));
            TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(tx), gx, (size_t)n * sizeof *gx));
            double worst = 0;
            for (int64_t row = 0; row < rows; ++row) {
                const float *xr = x + row * len, *gr = g + row * len, *gxr = gx + row * len;
                long double p = 1;
                for (int64_t i = 0; i < len; ++i) {
                    before[i] = p;
                    p *= xr[i];
                }
                /* the carry: the adjoint's sum after the product before i */
                long double c = 0;
                for (int64_t i = len; i-- > 0;) {
                    c = (e ? (i + 1 < len ? gr[i + 1] : 0) : gr[i]) + (i + 1 < len ? (long double)xr[i + 1] * c : 0);
                    const long double want = before[i] * c;
                    if (want != 0)
                        worst = fmax(worst, (double)fabsl((gxr[i] - want) / want));
                }
            }
            if (!(worst < 2.5e-7))
                fail_msg("float32 prod %s of [%lld, %lld]: relative error %g against long double",
                         e ? "exclusive" : "inclusive", (long long)rows, (long long)len, worst);
        }
        dc_tensor_free(tx);
        dc_tensor_free(tg);
        free(x);
        free(g);
        free(gx);
        free(before);
    }
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* A product's pieces whose factors are all finite and not zero take a
 * faster adjoint (src/ops/scan.c, factors_ok), whose plain products would
 * turn a zero times an infinity into NaN where the zero-safe ones give 0:
 * rows long enough to take it (not short rows) with an infinite factor and
 * zero adjoints from it on, and with a zero factor and an infinite adjoint
 * at the end; and with a zero factor before an infinite one, every adjoint
 * 1. Every number exact: the gradients equal the zero-safe recurrence's bit
 * for bit. */
static void test_prod_factor_checks(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { N = 40, AT = 20 };
    double x[N], g[N], want[N], *y, *gx;
    for (int kind = 0; kind < 3; ++kind)
        for (int e = 0; e < 2; ++e)
            for (int dt = 0; dt < 2; ++dt) {
                for (int i = 0; i < N; ++i) {
                    x[i] = i % 3 == 0 ? 2.0 : i % 3 == 1 ? 0.5 : 1.0;
                    g[i] = kind == 0 ? (i < AT ? 1.0 : 0.0) : kind == 1 ? 0.0 : 1.0;
                }
                x[AT] = kind == 1 ? 0.0 : INFINITY;
                if (kind == 1)
                    g[N - 1] = INFINITY;
                if (kind == 2) /* a zero before the infinity: the outputs after both are NaN */
                    x[AT / 2] = 0.0;
                const scan_case c = {DC_REDUCE_PROD, e == 1, 0, false};
                const int64_t n = N;
                ref_grad_recurrence(c.op, c.exclusive, n, x, g, want);
                run_scan(ctx, dt ? DC_F32 : DC_F64, &c, 1, &n, x, g, &y, &gx);
                char what[96];
                snprintf(what, sizeof what, "%s prod %s with %s", dt ? "float32" : "float64",
                         c.exclusive ? "exclusive" : "inclusive",
                         kind == 0   ? "an infinite factor"
                         : kind == 1 ? "a zero factor and an infinite adjoint"
                                     : "a zero factor, then an infinite one");
                assert_same_bits(gx, want, n, what);
                free(y);
                free(gx);
            }
    dc_ctx_free(ctx);
}

/* x's gradient in dtype from the scan of x ([rows, len], along axis 1)
 * with adjoint gv, on ctx: assigned by a first backward (twice = false), or
 * then added to by a second one (twice = true); the scan's output in
 * *y_out where y_out is not NULL. */
static double *rows_grad(dc_ctx *ctx, dc_dtype dtype, dc_reduction op, bool exclusive, int64_t rows, int64_t len,
                         const double *xv, const double *gv, bool twice, double **y_out)
{
    const int64_t shape[2] = {rows, len};
    dc_tensor *x = tensor_of(ctx, dtype, 2, shape, xv), *g = tensor_of(ctx, dtype, 2, shape, gv);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    for (int pass = 0; pass < 1 + twice; ++pass) {
        dc_tape_reset(tape);
        dc_tensor *y = dc_op_scan(tape, x, op, 1, exclusive);
        TEST_NONNULL(ctx, y);
        TEST_OK(ctx, dc_backward_with(tape, y, g));
        if (y_out && pass == 0)
            *y_out = values_of(y);
    }
    double *got = values_of(dc_tensor_grad(x));
    dc_tape_free(tape);
    dc_tensor_free(g);
    dc_tensor_free(x);
    return got;
}

/* A float32 gradient of DC_STREAM_MIN_BYTES or more (src/engine/
 * stream_store.h, 8 MiB) that the adjoint assigns goes out in streaming
 * stores where the tiles take it (src/ops/scan_tiles.h), sixteen positions
 * of each lane at a time, a lane off a 64-byte boundary as usual: sums and
 * nonzero products over a line cut in chunks that no chunk divides, and
 * over rows of 265 side by side (lanes at every alignment; a row's
 * positions past its streamed pairs go through a plain tile, then one by
 * one). Each against its reference, on 1 and 2 threads to the same bits,
 * and to the bits of the plain stores: a second backward, added to the
 * first (added gradients never stream), gives exactly twice the first. A
 * sum's output that large streams too: each against its reference, on 1
 * and 2 threads to the same bits. */
static void test_streamed_gradients(void **state)
{
    (void)state;
    dc_ctx *one = test_cpu_ctx_threads(1, 1), *two = test_cpu_ctx_threads(2, 1);
    const int64_t shapes[2][2] = {{1, ((int64_t)1 << 21) + 3 * PIECE + 5}, {8200, 265}};
    for (int sh = 0; sh < 2; ++sh) {
        const int64_t rows = shapes[sh][0], len = shapes[sh][1], n = rows * len;
        double *xv = malloc(n * sizeof *xv), *gv = malloc(n * sizeof *gv), *want = malloc(n * sizeof *want);
        assert_non_null(xv);
        assert_non_null(gv);
        assert_non_null(want);
        for (int o = 0; o < 2; ++o)
            for (int e = 0; e < 2; ++e) {
                const bool prod = ops[o] == DC_REDUCE_PROD;
                fill(xv, n, prod ? 0.999 : -1.0, prod ? 1.001 : 1.0, 57 + o);
                for (int64_t i = 0; i < n; ++i) {
                    xv[i] = (float)xv[i];
                    /* positive adjoints for the products, integers (every sum exact) for the sums */
                    gv[i] = prod ? 0.5 + (double)(i % 7) / 7.0 : (double)(i % 5) - 2.0;
                }
                char what[96];
                snprintf(what, sizeof what, "float32 %s %s of [%lld, %lld]", dc_reduction_name(ops[o]),
                         e ? "exclusive" : "inclusive", (long long)rows, (long long)len);
                double *y1, *y2;
                double *g1 = rows_grad(one, DC_F32, ops[o], e == 1, rows, len, xv, gv, false, &y1);
                double *g2 = rows_grad(two, DC_F32, ops[o], e == 1, rows, len, xv, gv, false, &y2);
                double *twice = rows_grad(two, DC_F32, ops[o], e == 1, rows, len, xv, gv, true, NULL);
                assert_same_bits(y1, y2, n, what);
                const int64_t shape[2] = {rows, len};
                ref_scan(ops[o], e == 1, 2, shape, 1, xv, want);
                for (int64_t i = 0; i < n; ++i)
                    want[i] = (float)want[i];
                assert_close(y1, want, n, 1e-9, 1e-6, what);
                assert_close(y2, want, n, 1e-9, 1e-6, what);
                assert_same_bits(g1, g2, n, what);
                for (int64_t i = 0; i < n; ++i)
                    want[i] = 2.0 * g2[i];
                assert_same_bits(twice, want, n, what);
                for (int64_t r = 0; r < rows; ++r) {
                    const double *xr = xv + r * len, *gr = gv + r * len;
                    double *wr = want + r * len;
                    if (prod) {
                        ref_grad_recurrence(ops[o], e == 1, len, xr, gr, wr);
                    } else {
                        double acc = 0.0;
                        for (int64_t i = len; i-- > 0;) {
                            wr[i] = e ? acc : acc + gr[i];
                            acc += gr[i];
                        }
                    }
                }
                if (prod)
                    assert_close(g1, want, n, 0.0, 1e-4, what);
                else
                    assert_same_bits(g1, want, n, what);
                free(g1);
                free(g2);
                free(twice);
                free(y1);
                free(y2);
            }
        free(xv);
        free(gv);
        free(want);
    }
    dc_ctx_free(one);
    dc_ctx_free(two);
}

/* Rows shorter than 16 along the last axis (a maximum's or minimum's up to
 * 32), which the CPU takes 64 side by side: 131 rows (two batches and three
 * rows) and 65 (a batch and a row alone), of 1 to 33 elements. Values and
 * gradients the same bits as rows scanned alone (every seventh and the last
 * three), and the reference's; the gradient added to by a second backward
 * twice the one assigned. Products with no zero in a row up to only zeros;
 * maxima and minima with ties, infinities and NaN; zero adjoints. */
static void test_short_rows(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t lens[] = {1, 2, 3, 4, 7, 15, 16, 32, 33}, row_counts[] = {131, 65};
    double *xv = malloc(131 * 33 * sizeof *xv), *gv = malloc(131 * 33 * sizeof *gv);
    double *want = malloc(131 * 33 * sizeof *want);
    assert_non_null(xv);
    assert_non_null(gv);
    assert_non_null(want);
    for (size_t l = 0; l < sizeof lens / sizeof *lens; ++l)
        for (size_t rc = 0; rc < sizeof row_counts / sizeof *row_counts; ++rc)
            for (int o = 0; o < 4; ++o)
                for (int e = 0; e < 2; ++e)
                    for (int dt = 0; dt < 2; ++dt) {
                        const int64_t len = lens[l], rows = row_counts[rc], n = rows * len;
                        const int64_t shape[2] = {rows, len};
                        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
                        const dc_reduction op = ops[o];
                        fill_for(op, xv, n, (uint64_t)(300 + 10 * l + o));
                        fill(gv, n, -1, 1, (uint64_t)(400 + l));
                        for (int64_t i = 0; i < n; i += 9)
                            gv[i] = 0.0;
                        for (int64_t r = 0; r < rows; ++r) {
                            double *row = xv + r * len;
                            if (op == DC_REDUCE_PROD) { /* up to r % 4 zeros; only zeros for r % 4 == 3 */
                                const int64_t zeros = r % 4 == 3 ? len : r % 4 < len ? r % 4 : len;
                                for (int64_t z = 0; z < zeros; ++z)
                                    row[(r + 2 * z) % len] = 0.0;
                            } else if (op != DC_REDUCE_SUM) { /* ties among small integers, a special value */
                                for (int64_t i = 0; i < len; ++i)
                                    row[i] = floor(row[i] * 1.25);
                                const double special[3] = {NAN, INFINITY, -INFINITY};
                                if (r % 4 != 0)
                                    row[r % len] = special[r % 4 - 1];
                            }
                        }
                        if (dtype == DC_F32)
                            for (int64_t i = 0; i < n; ++i)
                                xv[i] = (float)xv[i], gv[i] = (float)gv[i];
                        const scan_case c = {op, e == 1, 1, false};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s %s of [%lld, %lld]", dc_dtype_name(dtype),
                                 dc_reduction_name(op), e ? "exclusive" : "inclusive", (long long)rows, (long long)len);
                        double *y, *gx;
                        run_scan(ctx, dtype, &c, 2, shape, xv, gv, &y, &gx);
                        for (int64_t r = 0; r < rows; ++r) {
                            /* every seventh row and the last three: a row alone is a
                             * tape of its own, slow under the sanitizers */
                            if (r % 7 != 0 && r < rows - 3)
                                continue;
                            const scan_case alone = {op, e == 1, 0, false};
                            double *yr, *gr;
                            run_scan(ctx, dtype, &alone, 1, &len, xv + r * len, gv + r * len, &yr, &gr);
                            assert_same_bits(y + r * len, yr, len, what);
                            assert_same_bits(gx + r * len, gr, len, what);
                            free(yr);
                            free(gr);
                        }
                        ref_grad(op, e == 1, 2, shape, 1, xv, gv, want);
                        const double tol = dtype == DC_F64 ? 1e-12 : 1e-5;
                        assert_close(gx, want, n, tol, tol, what);
                        double *twice = rows_grad(ctx, dtype, op, e == 1, rows, len, xv, gv, true, NULL);
                        for (int64_t i = 0; i < n; ++i)
                            want[i] = 2.0 * gx[i];
                        assert_same_bits(twice, want, n, what);
                        free(twice);
                        free(y);
                        free(gx);
                    }
    free(xv);
    free(gv);
    free(want);
    dc_ctx_free(ctx);
}

/* x's gradient written straight into it (assigned, then added by a second
 * scan of x) and, where it is a view into a wider tensor's (a slice),
 * added through its layout: twice the reference inside the slice, zero
 * outside; on ctx (the CPU, or CUDA against the same reference). float64
 * in 5 rows (each cut in pieces on the CPU), float32 in 72 (side by side
 * in lanes, src/ops/scan_tiles.h). */
static void check_write_modes(dc_ctx *ctx, dc_dtype dtype)
{
    const int64_t rows = dtype == DC_F64 ? 5 : 72;
    const int64_t full[2] = {rows, 4100}, shape[2] = {rows, 4096};
    const int64_t n_full = rows * 4100, n = rows * 4096;
    const double tol = dtype == DC_F64 ? 1e-9 : 1e-4;
    double *xv = malloc(n_full * sizeof *xv), *gv = malloc(n * sizeof *gv), *xs = malloc(n * sizeof *xs);
    double *want = malloc(n * sizeof *want);
    assert_non_null(xv);
    assert_non_null(gv);
    assert_non_null(xs);
    assert_non_null(want);
    fill(xv, n_full, 0.999, 1.001, 41);
    for (int64_t i = 0; i < n_full; ++i)
        xv[i] = dtype == DC_F32 ? (double)(float)xv[i] : xv[i];
    for (int64_t i = 0; i < n; ++i)
        gv[i] = (double)(i % 3) - 1.0;
    for (int sliced = 0; sliced < 2; ++sliced)
        for (int o = 0; o < 4; ++o) {
            const int64_t cols = sliced ? 4100 : 4096;
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < 4096; ++j)
                    xs[r * 4096 + j] = xv[r * cols + (sliced ? 3 : 0) + j];
            dc_tensor *base = tensor_of(ctx, dtype, 2, sliced ? full : shape, xv);
            TEST_OK(ctx, dc_tensor_set_requires_grad(base, true));
            dc_tensor *g = tensor_of(ctx, dtype, 2, shape, gv);
            dc_tape *tape = dc_tape_new(ctx);
            TEST_NONNULL(ctx, tape);
            dc_tensor *x = sliced ? dc_op_slice(tape, base, 1, 3, 4096) : base;
            dc_tensor *a = x ? dc_op_scan(tape, x, ops[o], 1, false) : NULL;
            dc_tensor *b = a ? dc_op_scan(tape, x, ops[o], 1, false) : NULL;
            dc_tensor *out = b ? dc_op_add(tape, a, b) : NULL;
            TEST_NONNULL(ctx, out);
            TEST_OK(ctx, dc_backward_with(tape, out, g));
            double *got = values_of(dc_tensor_grad(base));
            for (int64_t r = 0; r < rows; ++r) {
                const double *xr = xs + r * 4096, *gr = gv + r * 4096;
                double *wr = want + r * 4096;
                if (ops[o] == DC_REDUCE_SUM) { /* the reverse cumulative sum of the adjoint */
                    double acc = 0.0;
                    for (int64_t j = 4096; j-- > 0;)
                        wr[j] = acc += gr[j];
                } else if (ops[o] == DC_REDUCE_PROD) {
                    ref_grad_recurrence(ops[o], false, 4096, xr, gr, wr);
                } else {
                    ref_grad_winners(ops[o], false, 4096, xr, gr, wr);
                }
            }
            char what[80];
            snprintf(what, sizeof what, "%s %s of x used twice%s", dc_dtype_name(dtype), dc_reduction_name(ops[o]),
                     sliced ? ", sliced" : "");
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < cols; ++j) {
                    const int64_t k = j - (sliced ? 3 : 0);
                    const double w = k >= 0 && k < 4096 ? 2.0 * want[r * 4096 + k] : 0.0;
                    assert_close(&got[r * cols + j], &w, 1, 0.0, tol, what);
                }
            free(got);
            dc_tape_free(tape);
            dc_tensor_free(g);
            dc_tensor_free(base);
        }
    free(xv);
    free(gv);
    free(xs);
    free(want);
}

static void test_write_modes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    check_write_modes(ctx, DC_F64);
    check_write_modes(ctx, DC_F32);
    dc_ctx_free(ctx);
}

/* Bad arguments are refused with a message naming the function and the
 * argument. */
static void test_bad_arguments(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {2, 3};
    const double v[6] = {1, 2, 3, 4, 5, 6};
    dc_tensor *x = tensor_of(ctx, DC_F64, 2, shape, v);
    dc_tape *tape = dc_tape_new(ctx);
    assert_null(dc_op_scan(NULL, x, DC_REDUCE_SUM, 0, false));
    assert_null(dc_op_scan(tape, NULL, DC_REDUCE_SUM, 0, false));
    assert_non_null(strstr(dc_last_error(ctx), "dc_op_scan"));
    const int bad_axes[3] = {2, -3, 100};
    for (int i = 0; i < 3; ++i) {
        assert_null(dc_op_scan(tape, x, DC_REDUCE_MAX, bad_axes[i], true));
        const char *msg = dc_last_error(ctx);
        if (!strstr(msg, "dc_op_scan") || !strstr(msg, "axis") || !strstr(msg, "[2, 3]"))
            fail_msg("axis %d: message \"%s\"", bad_axes[i], msg);
    }
    assert_null(dc_op_scan(tape, x, (dc_reduction)7, 0, false));
    if (!strstr(dc_last_error(ctx), "dc_op_scan") || !strstr(dc_last_error(ctx), "op 7") ||
        !strstr(dc_last_error(ctx), "[2, 3]"))
        fail_msg("unknown op: message \"%s\"", dc_last_error(ctx));
    assert_null(dc_op_scan(tape, x, (dc_reduction)-1, 0, false));
    /* a scalar has no axis */
    dc_tensor *s = dc_tape_scalar(tape, DC_F64, 1.0);
    assert_null(dc_op_scan(tape, s, DC_REDUCE_SUM, 0, false));
    assert_non_null(strstr(dc_last_error(ctx), "out of range"));
    /* an input that needs no gradient records no node */
    assert_non_null(dc_op_scan(tape, x, DC_REDUCE_SUM, 1, false));
    assert_int_equal(dc_tape_node_count(tape), 0);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* ---- CUDA against the CPU ---- */

#define NEED_GPU()                                                                                                     \
    do {                                                                                                               \
        if (!gpu) {                                                                                                    \
            print_message("skipped: no usable CUDA device: %s\n", no_gpu_reason);                                      \
            skip();                                                                                                    \
        }                                                                                                              \
    } while (0)

/* Normalized mean squared error of b against a, NaN and Inf in the same
 * places. */
static double nmse(const double *a, const double *b, int64_t n, const char *what)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (isnan(a[i]) != isnan(b[i]) || isinf(a[i]) != isinf(b[i]) || (isinf(a[i]) && a[i] != b[i]))
            fail_msg("%s: element %lld is %g on the CPU and %g on CUDA", what, (long long)i, a[i], b[i]);
        if (isfinite(a[i])) {
            num += (a[i] - b[i]) * (a[i] - b[i]);
            den += a[i] * a[i];
        }
    }
    return den > 0 ? num / den : num;
}

/* Every op and mode on rows (one block's chunk and several), columns (one
 * chunk and several), short rows and a transposed view, float32 and
 * float64: CUDA's values and gradients against the CPU's (the values of
 * maxima and minima equal), and a second CUDA run with the same bits. */
static void test_cuda_matches_cpu(void **state)
{
    (void)state;
    NEED_GPU();
    dc_ctx *cpu = test_cpu_ctx();
    typedef struct {
        int ndim;
        int64_t shape[3];
        int axis;
        bool transpose;
    } layout;
    const layout layouts[] = {
        {2, {3, 9000}, 1, false},                         /* rows of three chunks, the last partial */
        {2, {5, 300}, -1, false},                         /* rows of one chunk */
        {2, {2500, 3}, 0, false},                         /* few columns of three chunks */
        {3, {4, 37, 9}, 1, false},                        /* columns of one chunk */
        {2, {40, 50}, 1, false},                          /* short rows, a thread each */
        {2, {70, 90}, 0, true},                           /* a transposed view: rows after the copy */
        {1, {1}, 0, false},        {2, {4, 0}, 1, false}, /* an empty axis */
        {2, {0, 6}, 1, false},                            /* no lines */
    };
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; ++l) {
        const layout *lo = &layouts[l];
        const int64_t n = numel_of(lo->ndim, lo->shape);
        double *xv = malloc((size_t)(n ? n : 1) * sizeof *xv), *gv = malloc((size_t)(n ? n : 1) * sizeof *gv);
        assert_non_null(xv);
        assert_non_null(gv);
        fill(gv, n, -1, 1, 17);
        for (int o = 0; o < 4; ++o) {
            fill(xv, n, ops[o] == DC_REDUCE_PROD ? 0.99 : -1.0, ops[o] == DC_REDUCE_PROD ? 1.01 : 1.0, 23 + l);
            if (ops[o] >= DC_REDUCE_MAX) /* ties, across chunks too */
                for (int64_t i = 0; i < n; i += 7)
                    xv[i] = 0.5;
            for (int e = 0; e < 2; ++e)
                for (int dt = 0; dt < 2; ++dt) {
                    const dc_dtype dtype = dt ? DC_F32 : DC_F64;
                    const scan_case c = {ops[o], e == 1, lo->axis, lo->transpose};
                    double *yc, *gc, *yg, *gg, *yg2, *gg2;
                    run_scan(cpu, dtype, &c, lo->ndim, lo->shape, xv, gv, &yc, &gc);
                    run_scan(gpu, dtype, &c, lo->ndim, lo->shape, xv, gv, &yg, &gg);
                    run_scan(gpu, dtype, &c, lo->ndim, lo->shape, xv, gv, &yg2, &gg2);
                    char what[128];
                    snprintf(what, sizeof what, "layout %zu, %s %s %s", l, dc_dtype_name(dtype),
                             dc_reduction_name(c.op), c.exclusive ? "exclusive" : "inclusive");
                    assert_same_bits(yg, yg2, n, what);
                    assert_same_bits(gg, gg2, n, what);
                    const double limit = dtype == DC_F64 ? 1e-24 : 1e-12;
                    /* a maximum is one of the elements; its gradient sums
                     * adjoints, in another order on either backend */
                    if (c.op == DC_REDUCE_MAX || c.op == DC_REDUCE_MIN)
                        assert_same_bits(yc, yg, n, what);
                    const double ey = nmse(yc, yg, n, what), eg = nmse(gc, gg, n, what);
                    if (!(ey <= limit && eg <= limit))
                        fail_msg("%s: NMSE %g (values), %g (gradients), limit %g", what, ey, eg, limit);
                    free(yc), free(gc), free(yg), free(gg), free(yg2), free(gg2);
                }
        }
        free(xv);
        free(gv);
    }
    dc_ctx_free(cpu);
}

/* The write modes of the adjoint (assigned, added, through a slice's
 * layout) on CUDA. */
static void test_cuda_write_modes(void **state)
{
    (void)state;
    NEED_GPU();
    check_write_modes(gpu, DC_F64);
    check_write_modes(gpu, DC_F32);
}

/* Products with zeros (and with a zero and an infinity or NaN in one
 * prefix) and maxima with NaN on CUDA, across chunks: the same values and
 * gradients as the CPU. */
static void test_cuda_edges(void **state)
{
    (void)state;
    NEED_GPU();
    dc_ctx *cpu = test_cpu_ctx();
    const int64_t shape[2] = {2, 5000};
    const int64_t n = 10000;
    double *xv = malloc((size_t)n * sizeof *xv), *gv = malloc((size_t)n * sizeof *gv);
    assert_non_null(xv);
    assert_non_null(gv);
    for (int kind = 0; kind < 3; ++kind)
        for (int e = 0; e < 2; ++e) {
            const int o = kind == 2 ? 1 : kind + 1;
            fill(xv, n, 0.99, 1.01, 31);
            /* (kind 2: adjoints of one sign, so that an infinite partial
             * sums to the same infinity in either backend's order) */
            fill(gv, n, kind == 2 ? 0.5 : -1, 1, 29);
            if (kind == 0) { /* a zero in the first chunk of row 0, two in row 1's second */
                xv[100] = 0;
                xv[5000 + 4500] = xv[5000 + 4600] = 0;
            } else if (kind == 1) { /* a NaN in row 0's second chunk, +inf in row 1's first */
                xv[4500] = NAN;
                xv[5000 + 10] = INFINITY;
            } else { /* a product's zero, then +inf in another chunk of row 0; NaN, then a zero, in row 1 */
                xv[100] = 0;
                xv[4500] = INFINITY;
                xv[5000 + 10] = NAN;
                xv[5000 + 4600] = 0;
            }
            const scan_case c = {ops[o], e == 1, 1, false};
            double *yc, *gc, *yg, *gg;
            run_scan(cpu, DC_F64, &c, 2, shape, xv, gv, &yc, &gc);
            run_scan(gpu, DC_F64, &c, 2, shape, xv, gv, &yg, &gg);
            const double ey = nmse(yc, yg, n, "edges, values"), eg = nmse(gc, gg, n, "edges, gradients");
            if (!(ey <= 1e-24 && eg <= 1e-24))
                fail_msg("%s %s: NMSE %g (values), %g (gradients)", dc_reduction_name(c.op),
                         c.exclusive ? "exclusive" : "inclusive", ey, eg);
            free(yc), free(gc), free(yg), free(gg);
        }
    free(xv);
    free(gv);
    dc_ctx_free(cpu);
}

/* The kernels each path launches, in a warm step: one for lines of one
 * chunk, three for longer ones (summaries, their chain, the rescan), forward
 * and adjoint (which adds into the gradient as it writes: no copy after,
 * in this second step where the gradient holds the first's), and for the
 * product's adjoint three for its zero-safe factors first; no wait for
 * the host and no cudaMalloc, so a step with scans can be captured. */
static void test_cuda_launches(void **state)
{
    (void)state;
    NEED_GPU();
    typedef struct {
        int ndim;
        int64_t shape[3];
        int axis;
        uint64_t forward;
    } layout;
    const layout layouts[] = {
        {2, {3, 9000}, 1, 3},  /* rows of several chunks */
        {2, {5, 300}, 1, 1},   /* rows of one */
        {2, {2500, 3}, 0, 3},  /* few long columns */
        {3, {4, 37, 9}, 1, 1}, /* columns of one chunk */
        {2, {40, 50}, 1, 1},   /* short rows */
    };
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; ++l) {
        const layout *lo = &layouts[l];
        const int64_t n = numel_of(lo->ndim, lo->shape);
        double *v = malloc((size_t)n * sizeof *v);
        assert_non_null(v);
        fill(v, n, -1, 1, 41);
        dc_tensor *x = tensor_of(gpu, DC_F32, lo->ndim, lo->shape, v),
                  *g = tensor_of(gpu, DC_F32, lo->ndim, lo->shape, v);
        TEST_OK(gpu, dc_tensor_set_requires_grad(x, true));
        dc_tape *tape = dc_tape_new(gpu);
        for (int step = 0; step < 2; ++step) {
            dc_tape_reset(tape);
            TEST_OK(gpu, dc_ctx_synchronize(gpu));
            const dc_device_counters a = dc_ctx_device_counters(gpu);
            dc_tensor *y = dc_op_scan(tape, x, DC_REDUCE_PROD, lo->axis, false);
            TEST_NONNULL(gpu, y);
            const dc_device_counters b = dc_ctx_device_counters(gpu);
            TEST_OK(gpu, dc_backward_with(tape, y, g));
            const dc_device_counters c = dc_ctx_device_counters(gpu);
            if (step == 0)
                continue;
            /* the product's adjoint three more: its zero-safe factors */
            const uint64_t adjoint = lo->forward + 3;
            if (b.kernel_launches - a.kernel_launches != lo->forward || c.kernel_launches - b.kernel_launches != adjoint)
                fail_msg("layout %zu: %llu kernels forward and %llu in the adjoint, want %llu and %llu", l,
                         (unsigned long long)(b.kernel_launches - a.kernel_launches),
                         (unsigned long long)(c.kernel_launches - b.kernel_launches), (unsigned long long)lo->forward,
                         (unsigned long long)adjoint);
            if (c.host_waits != a.host_waits || c.malloc_calls != a.malloc_calls)
                fail_msg("layout %zu: %llu host waits and %llu cudaMalloc calls in a warm step", l,
                         (unsigned long long)(c.host_waits - a.host_waits),
                         (unsigned long long)(c.malloc_calls - a.malloc_calls));
        }
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_tensor_free(g);
        free(v);
    }
}

typedef struct scan_step_data {
    dc_tape *tape;
    dc_tensor *x, *g, *y;
} scan_step_data;

/* A step: the product scan of x along its rows, its adjoint into x's
 * gradient. */
static dc_status scan_step(void *user)
{
    scan_step_data *s = user;
    dc_tape_reset(s->tape);
    dc_tensor_zero_grad(s->x);
    s->y = dc_op_scan(s->tape, s->x, DC_REDUCE_PROD, 1, false);
    return s->y ? dc_backward_with(s->tape, s->y, s->g) : DC_ERR_ARG;
}

/* A step with a scan of rows of several chunks is captured as a CUDA graph
 * and replayed on new values: the replay's values and gradient are the
 * CPU's on those values. */
static void test_cuda_graph_replay(void **state)
{
    (void)state;
    NEED_GPU();
    dc_ctx *cpu = test_cpu_ctx();
    const int64_t shape[2] = {3, 9000}, n = 27000;
    double *v = malloc((size_t)n * sizeof *v), *gv = malloc((size_t)n * sizeof *gv);
    float *raw = malloc((size_t)n * sizeof *raw);
    assert_non_null(v);
    assert_non_null(gv);
    assert_non_null(raw);
    fill(v, n, 0.99, 1.01, 51);
    fill(gv, n, -1, 1, 52);
    scan_step_data s = {dc_tape_new(gpu), tensor_of(gpu, DC_F32, 2, shape, v), tensor_of(gpu, DC_F32, 2, shape, gv),
                        NULL};
    TEST_OK(gpu, dc_tensor_set_requires_grad(s.x, true));
    dc_status st = DC_OK;
    dc_graph *graph = dc_graph_capture(gpu, scan_step, &s, &st);
    TEST_NONNULL(gpu, graph);
    if (dc_graph_fallback(graph))
        fail_msg("the step was not captured: %s", dc_graph_fallback(graph));
    fill(v, n, 0.99, 1.01, 53); /* new values, written before the replay */
    for (int64_t i = 0; i < n; ++i)
        raw[i] = (float)v[i];
    TEST_OK(gpu, dc_tensor_from_host_copy(s.x, raw, (size_t)n * sizeof *raw));
    TEST_OK(gpu, dc_graph_replay(graph));
    assert_int_equal(dc_graph_replays(graph), 1);
    double *y = values_of(s.y), *gx = values_of(dc_tensor_grad(s.x)), *yc, *gc;
    const scan_case c = {DC_REDUCE_PROD, false, 1, false};
    run_scan(cpu, DC_F32, &c, 2, shape, v, gv, &yc, &gc);
    const double ey = nmse(yc, y, n, "replay, values"), eg = nmse(gc, gx, n, "replay, gradients");
    if (!(ey <= 1e-12 && eg <= 1e-12))
        fail_msg("replayed scan: NMSE %g (values), %g (gradients) against the CPU", ey, eg);
    free(y), free(gx), free(yc), free(gc), free(v), free(gv), free(raw);
    dc_graph_free(graph);
    dc_tape_free(s.tape);
    dc_tensor_free(s.x);
    dc_tensor_free(s.g);
    dc_ctx_free(cpu);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.seed = 1;
    const char *device = getenv("DC_DEVICE");
    o.backend = device && strncmp(device, "cuda", 4) == 0 ? DC_BACKEND_AUTO : DC_BACKEND_CUDA;
    dc_status st = DC_OK;
    gpu = dc_ctx_new(&o, &st);
    if (!gpu) {
        snprintf(no_gpu_reason, sizeof no_gpu_reason, "%s", dc_last_error(NULL));
        const char *require = getenv("DC_REQUIRE_CUDA");
        if (st == DC_ERR_ARG || (require && strcmp(require, "1") == 0)) {
            printf("test_scan: failed: no usable CUDA device: %s\n", no_gpu_reason);
            return 1;
        }
        printf("test_scan: the CUDA tests are skipped: no usable CUDA device: %s\n", no_gpu_reason);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference), cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_gradcheck_long),    cmocka_unit_test(test_prod_zeros),
        cmocka_unit_test(test_max_min_winners),   cmocka_unit_test(test_empty_and_single),
        cmocka_unit_test(test_threads_same_bits), cmocka_unit_test(test_product_underflow_same_bits),
        cmocka_unit_test(test_long_gradients),    cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_cuda_matches_cpu),  cmocka_unit_test(test_cuda_edges),
        cmocka_unit_test(test_cuda_launches),     cmocka_unit_test(test_cuda_graph_replay),
        cmocka_unit_test(test_fast_pieces),       cmocka_unit_test(test_write_modes),
        cmocka_unit_test(test_cuda_write_modes),  cmocka_unit_test(test_streamed_gradients),
        cmocka_unit_test(test_short_rows),        cmocka_unit_test(test_prod_factor_checks),
        cmocka_unit_test(test_prod_adjoint_precision),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(gpu);
    return failed;
}
