/* The reductions of reduce.h: dc_op_prod, dc_op_max, dc_op_min,
 * dc_op_logsumexp, dc_op_reduce and dc_op_segment_reduce. On the CPU:
 * gradients against central differences in float64 over several sets of
 * axes (one axis first, middle or last; two non-adjacent ones, which copy
 * the input into a block; every axis; a transposed input), keepdims on and
 * off; the exact values and gradients at the edges (zeros of a product,
 * ties, NaN, signed zeros and infinities of a maximum or minimum, the
 * infinite and NaN cases of log-sum-exp, empty and size-1 axes); float32
 * against float64; segment reductions (unsorted index, empty segments, one
 * segment, 2-D values, no rows); the errors of bad arguments and bad index
 * values; the same bits on 1 and 2 threads. On CUDA (when a device can be
 * used): every op against the CPU on sizes beyond one block of threads and
 * not powers of two, in float32 and float64, values and gradients; the
 * same bits on two runs; the grouping of a large index by id against a
 * stable counting sort; a bad index reported at the next wait; a step
 * that never waits for the device nor allocates once warm. Without a
 * device the CUDA tests are skipped (with the reason printed), or fail
 * with DC_REQUIRE_CUDA=1; tests/cuda_emulation runs them on the CPU's
 * emulation of CUDA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

#include "src/cuda/cuda_device.h"
#include "src/ops/indices.h"

static dc_ctx *gpu; /* NULL without a usable CUDA device */
static char no_gpu_reason[256];

typedef dc_tensor *(*reduce_fn)(dc_tape *, dc_tensor *, int, const int *, bool);
enum { R_PROD, R_MAX, R_MIN, R_LSE, N_REDUCE };
static const reduce_fn reduce_fns[N_REDUCE] = {dc_op_prod, dc_op_max, dc_op_min, dc_op_logsumexp};
static const char *const reduce_names[N_REDUCE] = {"prod", "max", "min", "logsumexp"};

/* ---- helpers ---- */

/* A persistent tensor of ctx from doubles, requiring a gradient. */
static dc_tensor *make(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const double *values)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    const size_t es = dc_dtype_size(dtype);
    void *buf = malloc((size_t)(n ? n : 1) * es);
    for (int64_t i = 0; i < n; ++i) {
        if (dtype == DC_F64)
            ((double *)buf)[i] = values[i];
        else
            ((float *)buf)[i] = (float)values[i];
    }
    dc_tensor *t = dc_tensor_from_host(ctx, dtype, ndim, shape, buf);
    free(buf);
    TEST_NONNULL(ctx, t);
    TEST_OK(ctx, dc_tensor_set_requires_grad(t, true));
    return t;
}

/* The same without a gradient (index tensors). */
static dc_tensor *make_const(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const double *values)
{
    dc_tensor *t = make(ctx, dtype, ndim, shape, values);
    TEST_OK(ctx, dc_tensor_set_requires_grad(t, false));
    return t;
}

/* All elements of a contiguous tensor as doubles (malloc'd), one copy from
 * the device. */
static double *host(const dc_tensor *t)
{
    dc_ctx *ctx = dc_tensor_ctx(t);
    const int64_t n = dc_tensor_numel(t);
    const dc_dtype dtype = dc_tensor_dtype(t);
    void *buf = malloc((size_t)(n ? n : 1) * dc_dtype_size(dtype));
    TEST_OK(ctx, dc_tensor_to_host(t, buf, (size_t)n * dc_dtype_size(dtype)));
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; ++i)
        v[i] = dtype == DC_F64 ? ((double *)buf)[i] : (double)((float *)buf)[i];
    free(buf);
    return v;
}

/* Deterministic values in [lo, hi), distinct in practice. */
static double *series(int64_t n, double lo, double hi, unsigned seed)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (int64_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
    }
    return v;
}

/* The result of an op and the gradient it gives x, with the adjoint adj
 * (NULL: every element 1), as doubles (malloc'd). */
typedef struct run_result {
    double *y, *gx;
    int64_t ny, nx;
    int y_ndim;
    int64_t y_shape[DC_MAX_DIMS];
} run_result;

typedef dc_tensor *(*build_fn)(dc_tape *tape, dc_tensor *x, const void *arg);

static run_result run(dc_ctx *ctx, dc_tensor *x, build_fn build, const void *arg, bool sine_adjoint)
{
    run_result r;
    dc_tensor_zero_grad(x);
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    dc_tensor *y = build(tape, x, arg);
    TEST_NONNULL(ctx, y);
    r.ny = dc_tensor_numel(y);
    r.nx = dc_tensor_numel(x);
    r.y_ndim = dc_tensor_ndim(y);
    memcpy(r.y_shape, dc_tensor_shape(y), (size_t)r.y_ndim * sizeof *r.y_shape);
    r.y = host(y);
    const dc_dtype dtype = dc_tensor_dtype(x);
    void *adj = malloc((size_t)(r.ny ? r.ny : 1) * dc_dtype_size(dtype));
    for (int64_t i = 0; i < r.ny; ++i) {
        const double a = sine_adjoint ? sin(0.37 * (double)i + 0.1) : 1.0;
        if (dtype == DC_F64)
            ((double *)adj)[i] = a;
        else
            ((float *)adj)[i] = (float)a;
    }
    dc_tensor *g = dc_tape_tensor_new(tape, dtype, r.y_ndim, r.y_shape, adj);
    free(adj);
    TEST_NONNULL(ctx, g);
    TEST_OK(ctx, dc_backward_with(tape, y, g));
    const dc_tensor *gx = dc_tensor_grad(x);
    if (gx) {
        r.gx = host(gx);
    } else {
        r.gx = calloc((size_t)(r.nx ? r.nx : 1), sizeof *r.gx); /* no element: nothing reached */
        if (r.nx > 0)
            fail_msg("the input got no gradient");
    }
    dc_tape_free(tape);
    return r;
}

static void free_result(run_result *r)
{
    free(r->y);
    free(r->gx);
}

/* test_assert_close, with equal values (infinities) agreeing too. */
static void assert_close(const double *a, const double *b, int64_t n, double atol, double rtol, const char *what)
{
    for (int64_t i = 0; i < n; ++i)
        if (a[i] != b[i])
            test_assert_close(&a[i], &b[i], 1, atol, rtol, what);
}

/* The bits of two runs' doubles are the same (NaN included). */
static void assert_same_bits(const double *a, const double *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; ++i)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            fail_msg("%s: element %lld: %.17g vs %.17g", what, (long long)i, a[i], b[i]);
}

/* Exact values, NaN matching NaN and the sign of zero checked. */
static void assert_exact(const double *got, const double *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; ++i) {
        const bool both_nan = isnan(got[i]) && isnan(want[i]);
        if (!both_nan && (got[i] != want[i] || signbit(got[i]) != signbit(want[i])))
            fail_msg("%s: element %lld is %.17g, want %.17g", what, (long long)i, got[i], want[i]);
    }
}

/* ---- axis reductions ---- */

typedef struct axes_arg {
    int op; /* R_* */
    int n_axes;
    int axes[4];
    bool keepdims;
    int view; /* what is reduced: x (VIEW_NONE) or a view of it */
} axes_arg;

/* VIEW_TRANSPOSE: the transpose of x's last two axes; VIEW_SLICE:
 * x without the first and the last element of its last axis. */
enum { VIEW_NONE, VIEW_TRANSPOSE, VIEW_SLICE };

static dc_tensor *view_of(dc_tape *tape, dc_tensor *x, const axes_arg *a)
{
    const int last = dc_tensor_ndim(x) - 1;
    return a->view == VIEW_TRANSPOSE ? dc_op_transpose(tape, x, last - 1, last)
           : a->view == VIEW_SLICE   ? dc_op_slice(tape, x, last, 1, dc_tensor_shape(x)[last] - 2)
                                     : x;
}

static dc_tensor *build_axes(dc_tape *tape, dc_tensor *x, const void *arg)
{
    const axes_arg *a = arg;
    return reduce_fns[a->op](tape, view_of(tape, x, a), a->n_axes, a->axes, a->keepdims);
}

/* The sum (op 0) or the mean (op 1) over a's axes. */
static dc_tensor *build_sums(dc_tape *tape, dc_tensor *x, const void *arg)
{
    const axes_arg *a = arg;
    return (a->op ? dc_op_mean : dc_op_sum)(tape, view_of(tape, x, a), a->n_axes, a->axes, a->keepdims);
}

typedef struct loss_arg {
    build_fn build;
    const void *arg;
    dc_tensor *w; /* weights of the output's elements in the loss */
} loss_arg;

static dc_tensor *weighted_loss(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    const loss_arg *u = user;
    dc_tensor *y = u->build(tape, inputs[0], u->arg);
    return dc_op_sum(tape, dc_op_mul(tape, y, u->w), 0, NULL, false);
}

/* dc_gradcheck of sum(build(x) * w), w fixed weights of the output's shape. */
static void gradcheck(dc_ctx *ctx, dc_tensor *x, build_fn build, const void *arg, const char *what)
{
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = build(tape, x, arg);
    TEST_NONNULL(ctx, y);
    const int64_t ny = dc_tensor_numel(y);
    double *wv = series(ny, 0.5, 1.5, 7);
    dc_tensor *w = make(ctx, DC_F64, dc_tensor_ndim(y), dc_tensor_shape(y), wv);
    TEST_OK(ctx, dc_tensor_set_requires_grad(w, false));
    free(wv);
    dc_tape_free(tape);
    loss_arg u = {build, arg, w};
    dc_gradcheck_report rep;
    const dc_status st = dc_gradcheck(ctx, weighted_loss, &u, 1, &x, NULL, &rep);
    if (st != DC_OK)
        fail_msg("%s: %s: %s", what, dc_status_name(st), dc_last_error(ctx));
    dc_tensor_free(w);
}

static void test_gradients_over_axes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[3] = {3, 4, 5};
    /* one axis first, middle, last (negative), two adjacent, two apart (the
     * copy into a block), every axis (n_axes 0, and all three named) */
    const struct {
        int n;
        int axes[3];
    } sets[] = {{1, {0}},    {1, {1}},    {1, {-1}}, {2, {0, 1}},   {2, {1, 2}},
                {2, {0, 2}}, {2, {2, 0}}, {0, {0}},  {3, {0, 1, 2}}};
    for (int op = 0; op < N_REDUCE; ++op) {
        /* a product of 60 factors stays near 1 with factors near 1 */
        double *v = op == R_PROD ? series(60, 0.6, 1.4, 1) : series(60, -3, 3, 1);
        if (op == R_PROD)
            for (int i = 0; i < 60; i += 7)
                v[i] = -v[i];
        dc_tensor *x = make(ctx, DC_F64, 3, shape, v);
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; ++s)
            for (int keep = 0; keep < 2; ++keep)
                for (int tr = 0; tr < 2; ++tr) {
                    axes_arg a = {op, sets[s].n, {0}, keep == 1, tr == 1 ? VIEW_TRANSPOSE : VIEW_NONE};
                    memcpy(a.axes, sets[s].axes, sizeof sets[s].axes);
                    char what[96];
                    snprintf(what, sizeof what, "%s, axes set %zu, keepdims %d, transposed %d", reduce_names[op], s,
                             keep, tr);
                    gradcheck(ctx, x, build_axes, &a, what);
                }
        dc_tensor_free(x);
        free(v);
    }
    dc_ctx_free(ctx);
}

/* The shapes of the results, with and without keepdims. */
/* x reduced three times, each reduction's adjoint meeting a gradient that
 * already holds another's: the last recorded writes x's gradient first (in
 * place, where its block is x), the others must add to it. */
static dc_tensor *build_three_reductions(dc_tape *tape, dc_tensor *x, const void *arg)
{
    const int op = *(const int *)arg, rows[1] = {0}, cols[1] = {1};
    dc_tensor *per_row = reduce_fns[op](tape, x, 1, cols, false);
    dc_tensor *per_col = reduce_fns[op](tape, x, 1, rows, false);
    dc_tensor *all = reduce_fns[op](tape, x, 0, NULL, false);
    dc_tensor *a = per_row ? dc_op_sum(tape, per_row, 0, NULL, false) : NULL;
    dc_tensor *b = per_col ? dc_op_sum(tape, per_col, 0, NULL, false) : NULL;
    return dc_op_add(tape, dc_op_add(tape, a, b), all);
}

static void test_gradients_accumulate_across_reductions(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {4, 6};
    for (int op = 0; op < N_REDUCE; ++op) {
        double *v = op == R_PROD ? series(24, 0.6, 1.4, 3) : series(24, -3, 3, 3);
        dc_tensor *x = make(ctx, DC_F64, 2, shape, v);
        char what[64];
        snprintf(what, sizeof what, "%s three times", reduce_names[op]);
        gradcheck(ctx, x, build_three_reductions, &op, what);
        dc_tensor_free(x);
        free(v);
    }
    dc_ctx_free(ctx);
}

static void test_result_shapes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[3] = {2, 3, 4};
    double *v = series(24, -1, 1, 2);
    dc_tensor *x = make(ctx, DC_F64, 3, shape, v);
    dc_tape *tape = dc_tape_new(ctx);
    const int axes[2] = {0, 2};
    for (int op = 0; op < N_REDUCE; ++op) {
        dc_tensor *y = reduce_fns[op](tape, x, 2, axes, false);
        TEST_NONNULL(ctx, y);
        assert_int_equal(dc_tensor_ndim(y), 1);
        assert_int_equal(dc_tensor_shape(y)[0], 3);
        y = reduce_fns[op](tape, x, 2, axes, true);
        assert_int_equal(dc_tensor_ndim(y), 3);
        assert_int_equal(dc_tensor_shape(y)[0], 1);
        assert_int_equal(dc_tensor_shape(y)[1], 3);
        assert_int_equal(dc_tensor_shape(y)[2], 1);
        y = reduce_fns[op](tape, x, 0, NULL, false);
        assert_int_equal(dc_tensor_ndim(y), 0);
    }
    dc_tape_free(tape);
    dc_tensor_free(x);
    free(v);
    dc_ctx_free(ctx);
}

/* A product's partials with no zero, one, two and all zeros in a row, as
 * rows (the block kernel's rows) and as columns (inner > 1). */
static void test_prod_zeros(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double rows[4][4] = {{2, 3, 4, 5}, {2, 0, 3, 4}, {0, 2, 0, 3}, {0, 0, 0, 0}};
    const double want_y[4] = {120, 0, 0, 0};
    const double want_g[4][4] = {{60, 40, 30, 24}, {0, 24, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    double cols[16], want_gt[16];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            cols[j * 4 + i] = rows[i][j];
            want_gt[j * 4 + i] = want_g[i][j];
        }
    const int64_t shape[2] = {4, 4};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        dc_tensor *x = make(ctx, dtype, 2, shape, &rows[0][0]);
        axes_arg a = {R_PROD, 1, {1}, false, VIEW_NONE};
        run_result r = run(ctx, x, build_axes, &a, false);
        assert_exact(r.y, want_y, 4, "prod of rows");
        assert_exact(r.gx, &want_g[0][0], 16, "prod of rows: gradient");
        free_result(&r);
        dc_tensor_free(x);
        x = make(ctx, dtype, 2, shape, cols);
        a.axes[0] = 0;
        r = run(ctx, x, build_axes, &a, false);
        assert_exact(r.y, want_y, 4, "prod of columns");
        assert_exact(r.gx, want_gt, 16, "prod of columns: gradient");
        free_result(&r);
        dc_tensor_free(x);
    }
    /* with zeros, central differences agree too (a product is linear in
     * each factor) */
    dc_tensor *x = make(ctx, DC_F64, 2, shape, &rows[0][0]);
    axes_arg a = {R_PROD, 1, {1}, false, VIEW_NONE};
    gradcheck(ctx, x, build_axes, &a, "prod with zeros");
    a.n_axes = 0;
    gradcheck(ctx, x, build_axes, &a, "prod of everything, with zeros");
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* Rows of 4 for max (min: their negations): ties, NaN, infinities, signed
 * zeros; each row's expected result and winner. */
#define N_EDGE_ROWS 8
static const double edge_rows[N_EDGE_ROWS][4] = {
    {1, 3, 3, 2},     /* a tie: the first */
    {NAN, 1, NAN, 5}, /* NaN wins, the first NaN */
    {1, NAN, 7, NAN}, /* ... wherever it is */
    {-INFINITY, -INFINITY, -INFINITY, -INFINITY},
    {-0.0, 0.0, -1, -2}, /* -0 and +0 equal: the first, its sign kept */
    {0.0, -0.0, -1, -2},
    {-5, INFINITY, 2, INFINITY},
    {-2, -1, -3, -1},
};
static const int edge_winner[N_EDGE_ROWS] = {1, 0, 1, 0, 0, 0, 1, 1};

static void check_extremum_edges(dc_ctx *ctx, dc_dtype dtype, int op)
{
    const double sign = op == R_MAX ? 1 : -1;
    double rows[N_EDGE_ROWS * 4], cols[N_EDGE_ROWS * 4], want_y[N_EDGE_ROWS], want_g[N_EDGE_ROWS * 4],
        want_gt[N_EDGE_ROWS * 4];
    for (int i = 0; i < N_EDGE_ROWS; ++i) {
        for (int j = 0; j < 4; ++j) {
            const double v = sign * edge_rows[i][j];
            rows[i * 4 + j] = cols[j * N_EDGE_ROWS + i] = v;
            want_g[i * 4 + j] = want_gt[j * N_EDGE_ROWS + i] = j == edge_winner[i] ? 1 : 0;
        }
        want_y[i] = sign * edge_rows[i][edge_winner[i]];
    }
    char what[64];
    snprintf(what, sizeof what, "%s (%s)", reduce_names[op], dc_dtype_name(dtype));
    const int64_t shape[2] = {N_EDGE_ROWS, 4}, tshape[2] = {4, N_EDGE_ROWS};
    dc_tensor *x = make(ctx, dtype, 2, shape, rows);
    axes_arg a = {op, 1, {1}, false, VIEW_NONE};
    run_result r = run(ctx, x, build_axes, &a, false);
    assert_exact(r.y, want_y, N_EDGE_ROWS, what);
    assert_exact(r.gx, want_g, N_EDGE_ROWS * 4, what);
    free_result(&r);
    dc_tensor_free(x);
    x = make(ctx, dtype, 2, tshape, cols);
    a.axes[0] = 0;
    r = run(ctx, x, build_axes, &a, false);
    assert_exact(r.y, want_y, N_EDGE_ROWS, what);
    assert_exact(r.gx, want_gt, N_EDGE_ROWS * 4, what);
    free_result(&r);
    dc_tensor_free(x);
}

static void test_extremum_edges(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int dt = 0; dt < 2; ++dt) {
        check_extremum_edges(ctx, dt ? DC_F32 : DC_F64, R_MAX);
        check_extremum_edges(ctx, dt ? DC_F32 : DC_F64, R_MIN);
    }
    /* over two axes apart (the block copy), the first in row-major order */
    const int64_t shape[3] = {2, 2, 2};
    const double v[8] = {1, 5, 5, 0, 2, 5, 5, 1}; /* x[0,0,1], x[0,1,0], x[1,0,1], x[1,1,0] are 5 */
    dc_tensor *x = make(ctx, DC_F64, 3, shape, v);
    axes_arg a = {R_MAX, 2, {0, 2}, false, VIEW_NONE}; /* column 1: x[0,1,0] and x[1,1,0]: the first */
    run_result r = run(ctx, x, build_axes, &a, false);
    const double want_y[2] = {5, 5}, want_g[8] = {0, 1, 1, 0, 0, 0, 0, 0};
    assert_exact(r.y, want_y, 2, "max over axes 0 and 2");
    assert_exact(r.gx, want_g, 8, "max over axes 0 and 2: gradient");
    free_result(&r);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

static void test_logsumexp_edges(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double rows[6][3] = {{1, 2, 3},   {-INFINITY, -INFINITY, -INFINITY}, {INFINITY, 1, INFINITY},
                               {NAN, 1, 2}, {-INFINITY, 0, -INFINITY},         {1000, 1000, 1000}};
    const double s = exp(1) + exp(2) + exp(3);
    const double want_y[6] = {log(s), -INFINITY, INFINITY, NAN, 0, 1000 + log(3.0)};
    const double want_g[6][3] = {
        {exp(1) / s, exp(2) / s, exp(3) / s}, {0, 0, 0}, {NAN, 0, NAN}, {NAN, NAN, NAN}, {0, 1, 0},
        {1 / 3.0, 1 / 3.0, 1 / 3.0}};
    const int64_t shape[2] = {6, 3};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        const double tol = dt ? 1e-5 : 1e-13;
        dc_tensor *x = make(ctx, dtype, 2, shape, &rows[0][0]);
        axes_arg a = {R_LSE, 1, {1}, false, VIEW_NONE};
        run_result r = run(ctx, x, build_axes, &a, false);
        for (int i = 0; i < 6; ++i) {
            if (isnan(want_y[i]) != isnan(r.y[i]) || (isinf(want_y[i]) && want_y[i] != r.y[i]))
                fail_msg("logsumexp row %d is %g, want %g", i, r.y[i], want_y[i]);
            for (int j = 0; j < 3; ++j)
                if (isnan(want_g[i][j]) != isnan(r.gx[i * 3 + j]))
                    fail_msg("logsumexp row %d: partial %d is %g, want %g", i, j, r.gx[i * 3 + j], want_g[i][j]);
        }
        assert_close(r.y, want_y, 6, tol, tol, "logsumexp");
        assert_close(r.gx, &want_g[0][0], 18, tol, tol, "logsumexp: gradient");
        free_result(&r);
        dc_tensor_free(x);
    }
    dc_ctx_free(ctx);
}

/* log-sum-exp of large inputs, whose result rounds to within an ulp of the
 * maximum: its gradient is still the softmax. Each output's elements are
 * c - (l % 3) (exact in both dtypes for c = 1e5 and 1e7) or all c (1e38 in
 * float32, 1e300 in float64, where c - 1 is c), over rows (axis 1:
 * short rows, a row alone, rows split in pieces) and columns (axis 0:
 * columns side by side, columns cut in pieces), against the softmax in
 * long double; before the adjoint took the forward's
 * rounding off, two elements of 1e38 in float32 had partials 1, not 1/2,
 * and 1e5 - (l % 3) partials off by 0.2%. */
static void check_logsumexp_large_inputs(dc_ctx *ctx)
{
    const int64_t lens[4] = {2, 3, 70001, 200003}, cols = 3;
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        const double cs[3] = {1e5, 1e7, dt ? 1e38 : 1e300};
        for (int ci = 0; ci < 3; ++ci)
            for (int li = 0; li < 4; ++li)
                for (int axis = 0; axis < 2; ++axis) {
                    const int64_t len = lens[li], n = len * cols;
                    const bool flat = ci == 2; /* c - 1 is c */
                    double *v = malloc((size_t)n * sizeof *v), *want = malloc((size_t)n * sizeof *want);
                    assert_true(v && want);
                    /* axis 1: [cols, len], element l of row r at r len + l;
                     * axis 0: [len, cols], at l cols + r */
                    long double sum = 0;
                    for (int64_t l = 0; l < len; ++l)
                        sum += flat ? 1.0L : expl(-(long double)(l % 3));
                    for (int64_t r = 0; r < cols; ++r)
                        for (int64_t l = 0; l < len; ++l) {
                            const int64_t at = axis ? r * len + l : l * cols + r;
                            v[at] = flat ? cs[ci] : cs[ci] - (double)(l % 3);
                            want[at] = (double)((flat ? 1.0L : expl(-(long double)(l % 3))) / sum);
                        }
                    const int64_t shape[2] = {axis ? cols : len, axis ? len : cols};
                    dc_tensor *x = make(ctx, dtype, 2, shape, v);
                    axes_arg a = {R_LSE, 1, {axis}, false, VIEW_NONE};
                    run_result res = run(ctx, x, build_axes, &a, false);
                    char what[128];
                    snprintf(what, sizeof what, "%s logsumexp over axis %d of %lld elements of %g",
                             dt ? "float32" : "float64", axis, (long long)len, cs[ci]);
                    /* float32's sum of terms is float32's: 10^-5 over 70001 */
                    assert_close(res.gx, want, n, 0.0, dt ? 3e-5 : 1e-12, what);
                    free_result(&res);
                    dc_tensor_free(x);
                    free(v);
                    free(want);
                }
    }
}

/* On the CPU, and on CUDA where there is a device (its kernels' own paths:
 * a block a row, a thread a column, rows and columns in pieces). */
static void test_logsumexp_large_inputs(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    check_logsumexp_large_inputs(ctx);
    dc_ctx_free(ctx);
    if (gpu)
        check_logsumexp_large_inputs(gpu);
}

/* A float32 mean whose sum overflows float32 but whose value does not:
 * 3e38 and 3e38 (and columns of them, over axis 0), and 10^6 elements of
 * 3e33, give 3e38 and 3e33, not inf (the sum had been rounded to float32
 * before it was scaled); an infinite element still gives inf. */
static void test_mean_of_huge_float32(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {2, 3};
    const double v[6] = {3e38, 3e38, 1, 3e38, 3e38, INFINITY};
    dc_tensor *x = make(ctx, DC_F32, 2, shape, v);
    axes_arg a = {1, 1, {0}, false, VIEW_NONE}; /* the mean over axis 0 */
    run_result r = run(ctx, x, build_sums, &a, false);
    const double want[3] = {(double)3e38f, (double)3e38f, INFINITY};
    test_assert_close(r.y, want, 2, 0, 1e-6, "float32 mean of 3e38 and 3e38");
    if (!isinf(r.y[2]))
        fail_msg("the mean with an infinite element is %g", r.y[2]);
    free_result(&r);
    dc_tensor_free(x);
    const int64_t n = 1000000;
    double *many = malloc((size_t)n * sizeof *many);
    assert_non_null(many);
    for (int64_t i = 0; i < n; ++i)
        many[i] = 3e33;
    x = make(ctx, DC_F32, 1, &n, many);
    a.axes[0] = 0;
    r = run(ctx, x, build_sums, &a, false);
    const double want_many = (double)3e33f;
    test_assert_close(r.y, &want_many, 1, 0, 1e-6, "float32 mean of 10^6 elements of 3e33");
    free_result(&r);
    dc_tensor_free(x);
    free(many);
    dc_ctx_free(ctx);
}

/* Empty axes give the neutral elements (and a backward pass with nothing
 * to do); size-1 axes give the input itself, partials 1. */
static void test_empty_and_size_one_axes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double neutral[N_REDUCE] = {1, -INFINITY, INFINITY, -INFINITY};
    const int64_t empty[2] = {3, 0};
    for (int op = 0; op < N_REDUCE; ++op) {
        dc_tensor *x = make(ctx, DC_F64, 2, empty, NULL);
        axes_arg a = {op, 1, {1}, false, VIEW_NONE};
        run_result r = run(ctx, x, build_axes, &a, false);
        assert_int_equal(r.ny, 3);
        for (int i = 0; i < 3; ++i)
            assert_true(r.y[i] == neutral[op]);
        free_result(&r);
        a.n_axes = 0; /* every axis: a scalar */
        r = run(ctx, x, build_axes, &a, false);
        assert_int_equal(r.ny, 1);
        assert_true(r.y[0] == neutral[op]);
        free_result(&r);
        a.n_axes = 1; /* along the non-empty axis: no output */
        a.axes[0] = 0;
        r = run(ctx, x, build_axes, &a, false);
        assert_int_equal(r.ny, 0);
        free_result(&r);
        dc_tensor_free(x);
    }
    /* a scalar: itself */
    for (int op = 0; op < N_REDUCE; ++op) {
        const double v0 = -0.75, one_v = 1;
        dc_tensor *x = make(ctx, DC_F64, 0, NULL, &v0);
        axes_arg a = {op, 0, {0}, false, VIEW_NONE};
        run_result r = run(ctx, x, build_axes, &a, false);
        assert_exact(r.y, &v0, 1, reduce_names[op]);
        assert_exact(r.gx, &one_v, 1, reduce_names[op]);
        free_result(&r);
        dc_tensor_free(x);
    }
    const int64_t one[2] = {3, 1};
    const double v[3] = {2, 0, -1.5};
    for (int op = 0; op < N_REDUCE; ++op) {
        dc_tensor *x = make(ctx, DC_F64, 2, one, v);
        axes_arg a = {op, 1, {1}, true, VIEW_NONE};
        run_result r = run(ctx, x, build_axes, &a, false);
        const double ones[3] = {1, 1, 1};
        assert_exact(r.y, v, 3, reduce_names[op]);
        assert_exact(r.gx, ones, 3, reduce_names[op]);
        free_result(&r);
        dc_tensor_free(x);
    }
    dc_ctx_free(ctx);
}

/* float32 against float64 on the same values. */
static void test_float32_matches_float64(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[3] = {4, 70, 3};
    double *v = series(840, -2, 2, 3);
    double *pv = series(840, 0.9, 1.1, 4);
    const struct {
        int n;
        int axes[2];
    } sets[] = {{1, {1}}, {1, {2}}, {2, {0, 2}}, {0, {0}}};
    for (int op = 0; op < N_REDUCE; ++op)
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; ++s) {
            const double *vals = op == R_PROD ? pv : v;
            dc_tensor *x64 = make(ctx, DC_F64, 3, shape, vals), *x32 = make(ctx, DC_F32, 3, shape, vals);
            axes_arg a = {op, sets[s].n, {sets[s].axes[0], sets[s].axes[1]}, false, VIEW_NONE};
            run_result r64 = run(ctx, x64, build_axes, &a, true), r32 = run(ctx, x32, build_axes, &a, true);
            char what[64];
            snprintf(what, sizeof what, "%s float32, axes set %zu", reduce_names[op], s);
            assert_close(r32.y, r64.y, r64.ny, 1e-5, 1e-4, what);
            assert_close(r32.gx, r64.gx, r64.nx, 1e-5, 1e-4, what);
            free_result(&r64);
            free_result(&r32);
            dc_tensor_free(x64);
            dc_tensor_free(x32);
        }
    free(v);
    free(pv);
    dc_ctx_free(ctx);
}

/* Rows long enough to be reduced in pieces (a whole tensor, a long row):
 * against a plain reference, the maximum's tie across two pieces won by
 * the first. */
static void test_long_rows(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { kLen = 40000 };
    const int64_t shape[2] = {2, kLen};
    double *v = series(2 * kLen, -3, 3, 50), *pv = series(2 * kLen, 0.9999, 1.0001, 51);
    v[100] = v[kLen - 5] = 3.5; /* row 0: a tie, pieces apart */
    v[kLen + 30000] = -3.5;     /* row 1: the minimum */
    pv[kLen + 20000] = 0;       /* row 1: one zero */
    for (int op = 0; op < N_REDUCE; ++op) {
        const double *x = op == R_PROD ? pv : v;
        dc_tensor *t = make(ctx, DC_F64, 2, shape, x);
        axes_arg a = {op, 1, {1}, false, VIEW_NONE};
        run_result r = run(ctx, t, build_axes, &a, false);
        for (int row = 0; row < 2; ++row) {
            const double *e = x + row * kLen;
            double want = op == R_PROD ? 1 : op == R_MIN ? INFINITY : -INFINITY, nz = 1;
            int64_t win = -1, zeros = 0;
            for (int64_t l = 0; l < kLen; ++l) {
                if (op == R_PROD) {
                    want *= e[l];
                    e[l] == 0 ? (void)++zeros : (void)(nz *= e[l]);
                } else if (win < 0 || (op == R_MIN ? e[l] < want : e[l] > want)) {
                    want = e[l];
                    win = l;
                }
            }
            if (op == R_LSE) {
                double sum = 0;
                for (int64_t l = 0; l < kLen; ++l)
                    sum += exp(e[l] - want);
                want += log(sum);
            }
            assert_close(&r.y[row], &want, 1, 0, op == R_MAX || op == R_MIN ? 0 : 1e-12, reduce_names[op]);
            for (int64_t l = 0; l < kLen; ++l) {
                const double g = op == R_PROD  ? (zeros ? (e[l] == 0 ? nz : 0) : nz / e[l])
                                 : op == R_LSE ? exp(e[l] - want)
                                               : (l == win ? 1 : 0);
                assert_close(&r.gx[row * kLen + l], &g, 1, 1e-15, 1e-11, reduce_names[op]);
            }
        }
        free_result(&r);
        dc_tensor_free(t);
    }
    free(v);
    free(pv);
    dc_ctx_free(ctx);
}

/* Columns few and long enough to be cut (reduce_kinds.h: fewer than 256
 * outputs, longer than 2048), two output rows of three columns: against a plain reference, a
 * maximum's tie across cuts won by the first, a zero in one product's
 * column; dc_op_sum and dc_op_mean too, which read no nz or aux. Then the
 * same columns as a slice of a [2, 4500, 5] tensor, whose gradient is a
 * view into the tensor's: every reduction (maxima and minima too) writes it
 * through the elementwise gradient of narrow columns, the sums through the
 * loop engine. */
static void test_long_columns(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { kOuter = 2, kLen = 4500, kInner = 3, kN = kOuter * kLen * kInner };
    const int64_t shape[3] = {kOuter, kLen, kInner};
    double *v = series(kN, -3, 3, 52), *pv = series(kN, 0.9999, 1.0001, 53);
    v[100 * kInner + 1] = v[(kLen - 5) * kInner + 1] = 3.5; /* output (0, 1): a tie, cuts apart */
    v[(kLen + 3000) * kInner + 2] = -3.5;                   /* output (1, 2): the minimum */
    pv[(kLen + 2500) * kInner] = 0;                         /* output (1, 0): one zero */
    /* the sliced layout: element (o, l, c) at (o * kLen + l) * kWide + c + 1 */
    enum { kWide = kInner + 2 };
    double *sv = calloc(kOuter * kLen * kWide, sizeof *sv), *spv = calloc(kOuter * kLen * kWide, sizeof *spv);
    for (int64_t e = 0; e < kN; ++e) {
        sv[e / kInner * kWide + e % kInner + 1] = v[e];
        spv[e / kInner * kWide + e % kInner + 1] = pv[e];
    }
    const int64_t wide_shape[3] = {kOuter, kLen, kWide};
    /* the reductions, dc_op_sum and dc_op_mean, then the same of the slices */
    for (int k = 0; k < 2 * (N_REDUCE + 2); ++k) {
        const bool sliced = k >= N_REDUCE + 2;
        const int op = k % (N_REDUCE + 2);
        const bool sums = op >= N_REDUCE; /* dc_op_sum, then dc_op_mean */
        const double *x = op == R_PROD ? pv : v;
        dc_tensor *t =
            sliced ? make(ctx, DC_F64, 3, wide_shape, op == R_PROD ? spv : sv) : make(ctx, DC_F64, 3, shape, x);
        axes_arg a = {sums ? op - N_REDUCE : op, 1, {1}, false, sliced ? VIEW_SLICE : VIEW_NONE};
        run_result r = run(ctx, t, sums ? build_sums : build_axes, &a, false);
        const char *what = sums ? (op == N_REDUCE ? "sum" : "mean") : reduce_names[op];
        for (int o = 0; o < kOuter; ++o)
            for (int c = 0; c < kInner; ++c) {
                const double *e = x + o * kLen * kInner + c;
                double want = op == R_PROD ? 1 : op == R_MIN ? INFINITY : sums ? 0 : -INFINITY, nz = 1;
                int64_t win = -1, zeros = 0;
                for (int64_t l = 0; l < kLen; ++l) {
                    const double el = e[l * kInner];
                    if (sums) {
                        want += el;
                    } else if (op == R_PROD) {
                        want *= el;
                        el == 0 ? (void)++zeros : (void)(nz *= el);
                    } else if (win < 0 || (op == R_MIN ? el < want : el > want)) {
                        want = el;
                        win = l;
                    }
                }
                if (op == R_LSE) {
                    double sum = 0;
                    for (int64_t l = 0; l < kLen; ++l)
                        sum += exp(e[l * kInner] - want);
                    want += log(sum);
                }
                if (op == N_REDUCE + 1)
                    want /= kLen;
                assert_close(&r.y[o * kInner + c], &want, 1, 1e-12, op == R_MAX || op == R_MIN ? 0 : 1e-12, what);
                for (int64_t l = 0; l < kLen; ++l) {
                    const double el = e[l * kInner];
                    const double g = sums           ? (op == N_REDUCE ? 1.0 : 1.0 / kLen)
                                     : op == R_PROD ? (zeros ? (el == 0 ? nz : 0) : nz / el)
                                     : op == R_LSE  ? exp(el - want)
                                                    : (l == win ? 1 : 0);
                    const int64_t at = sliced ? (o * kLen + l) * kWide + c + 1 : (o * kLen + l) * kInner + c;
                    assert_close(&r.gx[at], &g, 1, 1e-15, 1e-11, what);
                }
            }
        free_result(&r);
        dc_tensor_free(t);
    }
    free(v);
    free(pv);
    free(sv);
    free(spv);
    dc_ctx_free(ctx);
}

/* dc_op_reduce is the op it names; DC_REDUCE_SUM is dc_op_sum. */
static void test_reduce_dispatch(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {3, 5};
    double *v = series(15, 0.5, 1.5, 5);
    dc_tensor *x = make(ctx, DC_F64, 2, shape, v);
    dc_tape *tape = dc_tape_new(ctx);
    const int axis = 1;
    const dc_reduction ops[4] = {DC_REDUCE_SUM, DC_REDUCE_PROD, DC_REDUCE_MAX, DC_REDUCE_MIN};
    for (int k = 0; k < 4; ++k) {
        dc_tensor *a = dc_op_reduce(tape, x, ops[k], 1, &axis, false);
        dc_tensor *b = k == 0 ? dc_op_sum(tape, x, 1, &axis, false) : reduce_fns[k - 1](tape, x, 1, &axis, false);
        TEST_NONNULL(ctx, a);
        TEST_NONNULL(ctx, b);
        double *va = host(a), *vb = host(b);
        assert_same_bits(va, vb, 3, dc_reduction_name(ops[k]));
        free(va);
        free(vb);
    }
    assert_null(dc_op_reduce(tape, x, (dc_reduction)7, 1, &axis, false));
    assert_int_equal(dc_last_status(ctx), DC_ERR_ARG);
    assert_non_null(strstr(dc_last_error(ctx), "dc_op_reduce"));
    assert_null(dc_op_reduce(tape, x, DC_REDUCE_MAX, 1, (const int[]){2}, false));
    assert_non_null(strstr(dc_last_error(ctx), "dc_op_reduce"));
    dc_tape_free(tape);
    dc_tensor_free(x);
    free(v);
    dc_ctx_free(ctx);
}

static void expect_error(dc_ctx *ctx, const void *result, dc_status status, const char *const *parts, int n_parts)
{
    if (result)
        fail_msg("expected %s, got a result", dc_status_name(status));
    if (dc_last_status(ctx) != status)
        fail_msg("expected %s, got %s: %s", dc_status_name(status), dc_status_name(dc_last_status(ctx)),
                 dc_last_error(ctx));
    for (int i = 0; i < n_parts; ++i)
        if (!strstr(dc_last_error(ctx), parts[i]))
            fail_msg("the message \"%s\" does not name \"%s\"", dc_last_error(ctx), parts[i]);
}

static void test_bad_axes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {2, 3};
    const double v[6] = {1, 2, 3, 4, 5, 6};
    dc_tensor *x = make(ctx, DC_F64, 2, shape, v);
    dc_tape *tape = dc_tape_new(ctx);
    const char *fns[N_REDUCE] = {"dc_op_prod", "dc_op_max", "dc_op_min", "dc_op_logsumexp"};
    for (int op = 0; op < N_REDUCE; ++op) {
        const int out[1] = {2}, neg[1] = {-3}, twice[2] = {1, -1};
        const char *range[] = {fns[op], "axis 2", "out of range", "[2, 3]"};
        expect_error(ctx, reduce_fns[op](tape, x, 1, out, false), DC_ERR_ARG, range, 4);
        const char *range_neg[] = {fns[op], "axis -3"};
        expect_error(ctx, reduce_fns[op](tape, x, 1, neg, false), DC_ERR_ARG, range_neg, 2);
        const char *dup[] = {fns[op], "twice"};
        expect_error(ctx, reduce_fns[op](tape, x, 2, twice, false), DC_ERR_ARG, dup, 2);
        const char *null_axes[] = {fns[op], "NULL"};
        expect_error(ctx, reduce_fns[op](tape, x, 1, NULL, false), DC_ERR_ARG, null_axes, 2);
        const char *null_x[] = {fns[op], "x"};
        expect_error(ctx, reduce_fns[op](tape, NULL, 0, NULL, false), DC_ERR_ARG, null_x, 2);
        assert_null(reduce_fns[op](NULL, x, 0, NULL, false));
    }
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* ---- segment reductions ---- */

typedef struct segment_arg {
    dc_tensor *index;
    int64_t n_segments;
    dc_reduction op;
} segment_arg;

static dc_tensor *build_segment(dc_tape *tape, dc_tensor *x, const void *arg)
{
    const segment_arg *a = arg;
    return dc_op_segment_reduce(tape, x, a->index, a->n_segments, a->op);
}

/* The reference: the rows of v ([n, width]) by segment, in ascending order;
 * win: each output's winner row (max, min), -1 for none. */
static void segment_reference(dc_reduction op, const double *v, int64_t n, int64_t width, const double *index,
                              int64_t n_segments, double *y, int64_t *win)
{
    for (int64_t k = 0; k < n_segments * width; ++k) {
        y[k] = op == DC_REDUCE_SUM ? 0 : op == DC_REDUCE_PROD ? 1 : op == DC_REDUCE_MAX ? -INFINITY : INFINITY;
        win[k] = -1;
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < width; ++c) {
            const int64_t k = (int64_t)index[i] * width + c;
            const double x = v[i * width + c];
            if (op == DC_REDUCE_SUM)
                y[k] += x;
            else if (op == DC_REDUCE_PROD)
                y[k] *= x;
            else if (win[k] < 0 || (op == DC_REDUCE_MAX ? x > y[k] : x < y[k])) {
                y[k] = x;
                win[k] = i;
            }
        }
}

/* The adjoints of max and min on the CPU add the adjoint at the winners
 * only: into a gradient that other ops also write (the sum of x, the
 * segments of x), and through a slice whose gradient is a strided view of
 * x's; every winner's adjoint counted once per reduction that picked it. */
static void test_winners_gradient_accumulates(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[2] = {3, 4}, ishape[1] = {3};
    const double v[12] = {1, 5, 3, 2, 4, 0, 7, 7, -1, 6, 6, 2};
    const double index[3] = {1, 0, 1};
    /* 1 from the sum; max over columns 1..2 of each row: (0,1), (1,2), (2,1)
     * (a tie, the first); the minimum of all: (2,0); segment 0 (row 1): all
     * of row 1; segment 1 (rows 0 and 2): (0,0), (2,1), (2,2), (0,3) (a tie) */
    const double want[12] = {2, 2, 1, 2, 2, 2, 3, 2, 2, 3, 2, 1};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        dc_tensor *x = make(ctx, dtype, 2, shape, v), *idx = make_const(ctx, dtype, 1, ishape, index);
        dc_tape *tape = dc_tape_new(ctx);
        TEST_NONNULL(ctx, tape);
        const int cols[1] = {1};
        dc_tensor *a = dc_op_slice(tape, x, 1, 1, 2);
        dc_tensor *y1 = dc_op_sum(tape, dc_op_max(tape, a, 1, cols, false), 0, NULL, false);
        dc_tensor *y2 = dc_op_min(tape, x, 0, NULL, false);
        dc_tensor *y3 = dc_op_sum(tape, dc_op_segment_reduce(tape, x, idx, 2, DC_REDUCE_MAX), 0, NULL, false);
        dc_tensor *y4 = dc_op_sum(tape, x, 0, NULL, false);
        dc_tensor *loss = dc_op_add(tape, dc_op_add(tape, y1, y2), dc_op_add(tape, y3, y4));
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_backward(tape, loss));
        double *g = host(dc_tensor_grad(x));
        assert_close(g, want, 12, 0, 0, dt ? "winners' gradient, f32" : "winners' gradient, f64");
        free(g);
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_tensor_free(idx);
    }
    dc_ctx_free(ctx);
}

static void test_segment_values_and_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    /* unsorted, segment 1 empty; values with a tie across rows (rows 0 and 2
     * of segment 2 in column 0) */
    const double index[6] = {2, 0, 2, 3, 0, 2};
    const int64_t n = 6, S = 4, width = 2;
    double v[12];
    double *r = series(12, -2, 2, 9);
    memcpy(v, r, sizeof v);
    free(r);
    v[4] = v[0]; /* row 2 column 0 ties row 0 */
    const int64_t vshape[2] = {n, width}, ishape[1] = {n};
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        dc_tensor *x = make(ctx, DC_F64, 2, vshape, v);
        dc_tensor *idx = make_const(ctx, DC_F64, 1, ishape, index);
        segment_arg a = {idx, S, (dc_reduction)op};
        run_result res = run(ctx, x, build_segment, &a, false);
        assert_int_equal(res.y_ndim, 2);
        assert_int_equal(res.y_shape[0], S);
        assert_int_equal(res.y_shape[1], width);
        double want[8], want_g[12];
        int64_t win[8];
        segment_reference((dc_reduction)op, v, n, width, index, S, want, win);
        assert_close(res.y, want, S * width, 1e-15, 1e-14, dc_reduction_name((dc_reduction)op));
        for (int64_t i = 0; i < n; ++i)
            for (int64_t c = 0; c < width; ++c) {
                const int64_t k = (int64_t)index[i] * width + c;
                double g = 1;
                if (op == DC_REDUCE_PROD)
                    g = want[k] / v[i * width + c];
                else if (op >= DC_REDUCE_MAX)
                    g = win[k] == i ? 1 : 0;
                want_g[i * width + c] = g;
            }
        assert_close(res.gx, want_g, n * width, 1e-14, 1e-12, dc_reduction_name((dc_reduction)op));
        free_result(&res);
        dc_tensor_free(x);
        dc_tensor_free(idx);
        /* central differences: without the tie, where they are not the
         * derivative, and with every segment reached (an empty one's -inf
         * or +inf would leave the loss infinite) */
        double *untied = series(12, -2, 2, 9);
        const double every[6] = {2, 0, 2, 1, 0, 2};
        x = make(ctx, DC_F64, 2, vshape, untied);
        idx = make_const(ctx, DC_F64, 1, ishape, every);
        segment_arg b = {idx, 3, (dc_reduction)op};
        gradcheck(ctx, x, build_segment, &b, dc_reduction_name((dc_reduction)op));
        dc_tensor_free(x);
        dc_tensor_free(idx);
        free(untied);
    }
    dc_ctx_free(ctx);
}

static void test_segment_shapes_and_edges(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    /* 1-D values, every row in one segment: the whole reduction */
    const double v[5] = {3, -1, 4, 0.5, 2};
    const double zeros[5] = {0, 0, 0, 0, 0};
    const int64_t n5[1] = {5};
    dc_tensor *x = make(ctx, DC_F64, 1, n5, v);
    dc_tensor *idx = make_const(ctx, DC_F64, 1, n5, zeros);
    const double want[4] = {8.5, -12, 4, -1};
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        segment_arg a = {idx, 1, (dc_reduction)op};
        run_result r = run(ctx, x, build_segment, &a, false);
        assert_int_equal(r.ny, 1);
        assert_true(r.y[0] == want[op]);
        free_result(&r);
        gradcheck(ctx, x, build_segment, &a, "one segment");
    }
    /* a product segment with one zero, one with two */
    const double pv[5] = {2, 0, 3, 0, 0};
    const double pidx[5] = {0, 0, 0, 1, 1};
    dc_tensor *px = make(ctx, DC_F64, 1, n5, pv), *pi = make_const(ctx, DC_F64, 1, n5, pidx);
    segment_arg pa = {pi, 3, DC_REDUCE_PROD};
    run_result pr = run(ctx, px, build_segment, &pa, false);
    const double want_py[3] = {0, 0, 1}, want_pg[5] = {0, 6, 0, 0, 0};
    assert_exact(pr.y, want_py, 3, "segment prod");
    assert_exact(pr.gx, want_pg, 5, "segment prod: gradient");
    free_result(&pr);
    /* no rows: every segment neutral; no rows and no segments */
    const int64_t empty_v[2] = {0, 3}, empty_i[1] = {0};
    dc_tensor *ex = make(ctx, DC_F64, 2, empty_v, NULL), *ei = make_const(ctx, DC_F64, 1, empty_i, NULL);
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        segment_arg a = {ei, 2, (dc_reduction)op};
        run_result r = run(ctx, ex, build_segment, &a, false);
        assert_int_equal(r.ny, 6);
        const double neutral = op == DC_REDUCE_SUM    ? 0
                               : op == DC_REDUCE_PROD ? 1
                               : op == DC_REDUCE_MAX  ? -INFINITY
                                                      : INFINITY;
        for (int k = 0; k < 6; ++k)
            assert_true(r.y[k] == neutral);
        free_result(&r);
        a.n_segments = 0;
        r = run(ctx, ex, build_segment, &a, false);
        assert_int_equal(r.ny, 0);
        free_result(&r);
    }
    /* NaN wins a segment's maximum: the first NaN row */
    const double nv[4] = {1, NAN, 5, NAN};
    const double nidx[4] = {0, 0, 0, 0};
    const int64_t n4[1] = {4};
    dc_tensor *nx = make(ctx, DC_F64, 1, n4, nv), *ni = make_const(ctx, DC_F64, 1, n4, nidx);
    segment_arg na = {ni, 1, DC_REDUCE_MAX};
    run_result nr = run(ctx, nx, build_segment, &na, false);
    const double want_ng[4] = {0, 1, 0, 0};
    assert_true(isnan(nr.y[0]));
    assert_exact(nr.gx, want_ng, 4, "segment max with NaN: gradient");
    free_result(&nr);
    dc_tensor *frees[] = {x, idx, px, pi, ex, ei, nx, ni};
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; ++i)
        dc_tensor_free(frees[i]);
    dc_ctx_free(ctx);
}

static void test_segment_bad_arguments(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t vs[2] = {4, 2}, is[1] = {4}, is5[1] = {5};
    const double v[8] = {0};
    const double good[4] = {0, 1, 2, 1};
    dc_tensor *x = make(ctx, DC_F64, 2, vs, v);
    dc_tensor *idx = make_const(ctx, DC_F64, 1, is, good);
    dc_tensor *idx5 = make_const(ctx, DC_F64, 1, is5, v);
    dc_tensor *idx32 = make_const(ctx, DC_F32, 1, is, good);
    dc_tape *tape = dc_tape_new(ctx);
    const char *shapes[] = {"dc_op_segment_reduce", "[4, 2]", "[5]"};
    expect_error(ctx, dc_op_segment_reduce(tape, x, idx5, 3, DC_REDUCE_SUM), DC_ERR_SHAPE, shapes, 3);
    const char *dtype[] = {"dc_op_segment_reduce", "index"};
    expect_error(ctx, dc_op_segment_reduce(tape, x, idx32, 3, DC_REDUCE_SUM), DC_ERR_DTYPE, dtype, 2);
    const char *neg[] = {"dc_op_segment_reduce", "n_segments", "-1"};
    expect_error(ctx, dc_op_segment_reduce(tape, x, idx, -1, DC_REDUCE_SUM), DC_ERR_ARG, neg, 3);
    expect_error(ctx, dc_op_segment_reduce(tape, x, idx, 0, DC_REDUCE_SUM), DC_ERR_ARG, neg, 2);
    const char *op[] = {"dc_op_segment_reduce", "op 9"};
    expect_error(ctx, dc_op_segment_reduce(tape, x, idx, 3, (dc_reduction)9), DC_ERR_ARG, op, 2);
    const char *null_v[] = {"dc_op_segment_reduce", "values"};
    expect_error(ctx, dc_op_segment_reduce(tape, NULL, idx, 3, DC_REDUCE_SUM), DC_ERR_ARG, null_v, 2);
    const char *null_i[] = {"dc_op_segment_reduce", "index"};
    expect_error(ctx, dc_op_segment_reduce(tape, x, NULL, 3, DC_REDUCE_SUM), DC_ERR_ARG, null_i, 2);
    /* index values: out of range (3 for 3 segments), negative, not an integer */
    const double bad[3][4] = {{0, 1, 3, 1}, {0, -1, 2, 1}, {0, 1, 1.5, 1}};
    const char *names[3] = {"index[2] is 3", "index[1] is -1", "index[2] is 1.5"};
    for (int k = 0; k < 3; ++k) {
        dc_tensor *b = make_const(ctx, DC_F64, 1, is, bad[k]);
        const char *parts[] = {"dc_op_segment_reduce", names[k], "0..2"};
        expect_error(ctx, dc_op_segment_reduce(tape, x, b, 3, DC_REDUCE_MAX), DC_ERR_ARG, parts, 3);
        dc_tensor_free(b);
    }
    /* rows in pieces, the index checked as the pieces read it: the first bad
     * row reported, wherever the pieces meet */
    const int64_t many[1] = {40000};
    double *pv = calloc(40000, sizeof *pv), *pi = calloc(40000, sizeof *pi);
    dc_tensor *px = make(ctx, DC_F32, 1, many, pv);
    const struct {
        int64_t row[2];
        double value[2];
        const char *name;
    } pbad[] = {{{35000, 20}, {3, 7}, "index[20] is 7"}, {{39999, 32768}, {-1, 1.5}, "index[32768] is 1.5"}};
    for (int k = 0; k < 2; ++k) {
        for (int j = 0; j < 2; ++j)
            pi[pbad[k].row[j]] = pbad[k].value[j];
        dc_tensor *b = make_const(ctx, DC_F32, 1, many, pi);
        const char *parts[] = {"dc_op_segment_reduce", pbad[k].name, "0..2"};
        expect_error(ctx, dc_op_segment_reduce(tape, px, b, 3, DC_REDUCE_SUM), DC_ERR_ARG, parts, 3);
        dc_tensor_free(b);
        for (int j = 0; j < 2; ++j)
            pi[pbad[k].row[j]] = 0;
    }
    dc_tensor_free(px);
    free(pv);
    free(pi);
    dc_tape_free(tape);
    dc_tensor *frees[] = {x, idx, idx5, idx32};
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; ++i)
        dc_tensor_free(frees[i]);
    dc_ctx_free(ctx);
}

/* Many rows into few outputs go in pieces of rows, each with its own bins
 * (dc_segment_piece_rows); many outputs in one piece. Both against the
 * float64 reference: sums and products to float32's rounding of the result
 * (they accumulate in double), maxima and minima exactly, with the adjoint
 * at the winner. */
static void test_segment_pieces_and_one_piece(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const struct {
        int64_t n, width, n_segments;
    } cases[] = {{100003, 1, 7}, {70001, 3, 5}, {50000, 1, 5000}, {40000, 2, 3000}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const int64_t n = cases[c].n, width = cases[c].width, S = cases[c].n_segments, numel = n * width;
        double *v = series(numel, -2, 2, (unsigned)c + 50), *pv = series(numel, 0.9995, 1.0005, (unsigned)c + 50);
        double *index = series(n, 0, (double)S, (unsigned)c + 60);
        for (int64_t i = 0; i < n; ++i)
            index[i] = floor(index[i]);
        const int64_t shape[2] = {n, width}, ishape[1] = {n};
        dc_tensor *idx = make_const(ctx, DC_F32, 1, ishape, index);
        double *want = malloc((size_t)(S * width) * sizeof *want);
        int64_t *win = malloc((size_t)(S * width) * sizeof *win);
        for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
            const double *vals = op == DC_REDUCE_PROD ? pv : v;
            dc_tensor *x = make(ctx, DC_F32, width > 1 ? 2 : 1, shape, vals);
            segment_arg a = {idx, S, (dc_reduction)op};
            run_result r = run(ctx, x, build_segment, &a, false);
            /* the reference from the float32 values */
            double *v32 = malloc((size_t)numel * sizeof *v32);
            for (int64_t e = 0; e < numel; ++e)
                v32[e] = (float)vals[e];
            segment_reference((dc_reduction)op, v32, n, width, index, S, want, win);
            char what[96];
            snprintf(what, sizeof what, "segments n %lld width %lld of %lld, %s", (long long)n, (long long)width,
                     (long long)S, dc_reduction_name((dc_reduction)op));
            if (op == DC_REDUCE_SUM || op == DC_REDUCE_PROD) {
                assert_close(r.y, want, S * width, 1e-6, 1.2e-7, what);
            } else {
                assert_exact(r.y, want, S * width, what);
                for (int64_t k = 0; k < S * width; ++k)
                    if (win[k] >= 0 && r.gx[win[k] * width + k % width] != 1.0)
                        fail_msg("%s: output %lld: no adjoint at its winner", what, (long long)k);
            }
            free(v32);
            free_result(&r);
            dc_tensor_free(x);
        }
        free(want);
        free(win);
        dc_tensor_free(idx);
        free(v);
        free(pv);
        free(index);
    }
    dc_ctx_free(ctx);
}

/* The index as it was at the op: written after it (a value out of range
 * too), the adjoint still goes where the forward's rows went, on the path
 * that reads the index as stored (rows in pieces) and on the one that
 * reads it first (one piece). */
static void test_segment_index_written_after_the_op(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t sizes[2] = {40000, 300}; /* in pieces; one piece */
    for (int c = 0; c < 2; ++c) {
        const int64_t n = sizes[c], three = 3;
        double *index = malloc((size_t)n * sizeof *index), *ones = malloc((size_t)n * sizeof *ones);
        assert_non_null(index);
        assert_non_null(ones);
        for (int64_t i = 0; i < n; ++i) {
            index[i] = (double)(i % 3);
            ones[i] = 1.0;
        }
        const double weights[3] = {1, 10, 100};
        dc_tensor *x = make(ctx, DC_F32, 1, &n, ones), *idx = make_const(ctx, DC_F32, 1, &n, index);
        dc_tensor *w = make_const(ctx, DC_F32, 1, &three, weights);
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *y = dc_op_segment_reduce(tape, x, idx, 3, DC_REDUCE_SUM);
        TEST_NONNULL(ctx, y);
        dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, y, w), 0, NULL, false);
        TEST_NONNULL(ctx, loss);
        TEST_OK(ctx, dc_tensor_fill(idx, 1e9));
        TEST_OK(ctx, dc_backward(tape, loss));
        float *g = malloc((size_t)n * sizeof *g);
        assert_non_null(g);
        TEST_OK(ctx, dc_tensor_to_host(dc_tensor_grad(x), g, (size_t)n * sizeof *g));
        for (int64_t i = 0; i < n; ++i)
            if (g[i] != (float)weights[i % 3])
                fail_msg("%lld rows: row %lld's gradient is %g, want %g", (long long)n, (long long)i, (double)g[i],
                         weights[i % 3]);
        free(g);
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_tensor_free(idx);
        dc_tensor_free(w);
        free(index);
        free(ones);
    }
    dc_ctx_free(ctx);
}

/* Maxima and minima by segment over rows in pieces (more rows than a
 * piece, few segments), where the CPU finds the extrema first and the
 * winners after, unless a piece holds a NaN: zeros of both signs (the
 * first row's zero, its sign kept), a segment of -inf, ties of the extremum
 * across pieces, a NaN in the last piece only (it wins, the earlier pieces
 * found their extrema the fast way), an empty segment; float32 and float64,
 * one column and three. Against a reference that steps the documented rule
 * row by row: values exactly, the adjoint at the winner only. */
static void test_segment_extrema_in_pieces(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    enum { S = 5 };
    const int64_t n = 70001;
    for (int wc = 0; wc < 2; ++wc) {
        const int64_t width = wc ? 3 : 1, numel = n * width;
        double *v = malloc((size_t)numel * sizeof *v), *index = malloc((size_t)n * sizeof *index);
        unsigned h = 12345u;
        for (int64_t i = 0; i < n; ++i) {
            const int seg = (int)(i % 4); /* segment 4 stays empty */
            index[i] = seg;
            for (int64_t c = 0; c < width; ++c) {
                h = h * 1103515245u + 12345u;
                const unsigned r = h >> 16;
                double x;
                if (seg == 0)
                    x = r & 1u ? -0.0 : 0.0;
                else if (seg == 1)
                    x = -INFINITY;
                else if (seg == 2)
                    x = r % 3 == 0 ? -1.0 : r % 3 == 1 ? 0.5 : 2.0;
                else
                    x = (double)(r % 20000) / 10000.0 - 1.0;
                v[i * width + c] = x;
            }
        }
        v[(66001 - 66001 % 4 + 3) * width] = NAN; /* segment 3, column 0, the last piece */
        v[(69001 - 69001 % 4 + 3) * width] = NAN;
        const int64_t shape[2] = {n, width}, ishape[1] = {n};
        for (int dt = 0; dt < 2; ++dt) {
            const dc_dtype dtype = dt ? DC_F32 : DC_F64;
            dc_tensor *x = make(ctx, dtype, wc ? 2 : 1, shape, v), *idx = make_const(ctx, dtype, 1, ishape, index);
            for (int op = DC_REDUCE_MAX; op <= DC_REDUCE_MIN; ++op) {
                double want[S * 3];
                int64_t win[S * 3];
                for (int64_t k = 0; k < S * width; ++k) {
                    want[k] = op == DC_REDUCE_MAX ? -INFINITY : INFINITY;
                    win[k] = -1;
                }
                for (int64_t i = 0; i < n; ++i)
                    for (int64_t c = 0; c < width; ++c) {
                        const int64_t k = (int64_t)index[i] * width + c;
                        const double e = dt ? (double)(float)v[i * width + c] : v[i * width + c], w = want[k];
                        const bool takes =
                            win[k] < 0 || (!isnan(w) && (isnan(e) || (op == DC_REDUCE_MAX ? e > w : e < w)));
                        if (takes) {
                            want[k] = e;
                            win[k] = i;
                        }
                    }
                segment_arg a = {idx, S, (dc_reduction)op};
                run_result r = run(ctx, x, build_segment, &a, false);
                char what[96];
                snprintf(what, sizeof what, "%s by segment in pieces, %s, width %lld",
                         dc_reduction_name((dc_reduction)op), dt ? "f32" : "f64", (long long)width);
                assert_int_equal(r.ny, S * width);
                assert_exact(r.y, want, S * width, what);
                for (int64_t e = 0; e < numel; ++e) {
                    const int64_t k = (int64_t)index[e / width] * width + e % width;
                    const double g = win[k] == e / width ? 1.0 : 0.0;
                    if (r.gx[e] != g)
                        fail_msg("%s: element %lld: gradient %g, want %g", what, (long long)e, r.gx[e], g);
                }
                free_result(&r);
            }
            dc_tensor_free(x);
            dc_tensor_free(idx);
        }
        free(v);
        free(index);
    }
    dc_ctx_free(ctx);
}

/* Products of float32 elements accumulate in double: 10^6 factors near 1,
 * where float32 lanes drift by about 10^-4, within float32's rounding of
 * the exact product; over axes and by segment (one segment, in pieces). */
static void test_float32_products_accumulate_in_double(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 1000000, shape[1] = {n};
    double *v = series(n, 0.999, 1.001, 70), *zero = calloc((size_t)n, sizeof *zero);
    double exact = 1;
    for (int64_t i = 0; i < n; ++i) {
        v[i] = (float)v[i];
        exact *= v[i];
    }
    dc_tensor *x = make(ctx, DC_F32, 1, shape, v), *idx = make_const(ctx, DC_F32, 1, shape, zero);
    axes_arg a = {0, 0, {0}, false, VIEW_NONE}; /* prod over every axis */
    segment_arg s = {idx, 1, DC_REDUCE_PROD};
    run_result r1 = run(ctx, x, build_axes, &a, false), r2 = run(ctx, x, build_segment, &s, false);
    assert_close(r1.y, &exact, 1, 0, 1e-7, "prod of 10^6 float32 factors");
    assert_close(r2.y, &exact, 1, 0, 1e-7, "segment prod of 10^6 float32 factors");
    free_result(&r1);
    free_result(&r2);
    dc_tensor_free(x);
    dc_tensor_free(idx);
    free(v);
    free(zero);
    dc_ctx_free(ctx);
}

static dc_tensor *build_mean_plus_max(dc_tape *tape, dc_tensor *x, const void *arg)
{
    (void)arg;
    return dc_op_add(tape, dc_op_mean(tape, x, 0, NULL, false), dc_op_max(tape, x, 0, NULL, false));
}

static dc_tensor *build_mean(dc_tape *tape, dc_tensor *x, const void *arg)
{
    (void)arg;
    return dc_op_mean(tape, x, 0, NULL, false);
}

/* The first gradient of a whole sum, or around max's winner, is written in
 * one pass (past 8 MiB with non-temporal stores, and a tail); a second
 * contribution adds to it. */
static void test_whole_reduction_gradients_fill(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = ((int64_t)8 << 20) / 4 + 7, shape[1] = {n}, top = n / 3;
    double *v = series(n, -1, 1, 80);
    v[top] = 5;
    dc_tensor *x = make(ctx, DC_F32, 1, shape, v);
    const float m = (float)(1.0 / (double)n);
    /* the backward sweep meets max first (zeros and the winner's 1
     * assigned), then the mean (added) */
    run_result r = run(ctx, x, build_mean_plus_max, NULL, false);
    for (int64_t i = 0; i < n; ++i) {
        const double want = i == top ? (double)(1.0f + m) : (double)m;
        if (r.gx[i] != want)
            fail_msg("mean + max: gradient[%lld] is %.9g, want %.9g", (long long)i, r.gx[i], want);
    }
    free_result(&r);
    r = run(ctx, x, build_mean, NULL, false);
    for (int64_t i = 0; i < n; ++i)
        if (r.gx[i] != (double)m)
            fail_msg("mean: gradient[%lld] is %.9g, want %.9g", (long long)i, r.gx[i], (double)m);
    free_result(&r);
    dc_tensor_free(x);
    free(v);
    dc_ctx_free(ctx);
}

/* ---- determinism on the CPU ---- */

static void test_same_bits_on_one_and_two_threads(void **state)
{
    (void)state;
    dc_ctx *one = test_cpu_ctx_threads(1, 1), *two = test_cpu_ctx_threads(2, 1);
    /* tall: columns cut in three (reduce_kinds.h) */
    const int64_t rows[2] = {64, 1000}, cols[2] = {1000, 70}, longs[2] = {3, 40000}, tall[2] = {4100, 29},
                  seg[2] = {1000, 100}, ishape[1] = {1000}, pieces[1] = {100003};
    double *v = series(120000, 0.9999, 1.0001, 11);
    double *index = series(1000, 0, 37, 12);
    for (int i = 0; i < 1000; ++i)
        index[i] = floor(index[i]);
    for (int op = 0; op < N_REDUCE; ++op)
        for (int shape = 0; shape < 4; ++shape) {
            const int64_t *s = shape == 0 ? rows : shape == 1 ? cols : shape == 2 ? longs : tall;
            dc_tensor *x1 = make(one, DC_F32, 2, s, v), *x2 = make(two, DC_F32, 2, s, v);
            axes_arg a = {op, 1, {shape == 1 || shape == 3 ? 0 : 1}, false, VIEW_NONE};
            run_result r1 = run(one, x1, build_axes, &a, true), r2 = run(two, x2, build_axes, &a, true);
            assert_same_bits(r1.y, r2.y, r1.ny, reduce_names[op]);
            assert_same_bits(r1.gx, r2.gx, r1.nx, reduce_names[op]);
            free_result(&r1);
            free_result(&r2);
            dc_tensor_free(x1);
            dc_tensor_free(x2);
        }
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        dc_tensor *x1 = make(one, DC_F32, 2, seg, v), *x2 = make(two, DC_F32, 2, seg, v);
        dc_tensor *i1 = make_const(one, DC_F32, 1, ishape, index), *i2 = make_const(two, DC_F32, 1, ishape, index);
        segment_arg a1 = {i1, 37, (dc_reduction)op}, a2 = {i2, 37, (dc_reduction)op};
        run_result r1 = run(one, x1, build_segment, &a1, true), r2 = run(two, x2, build_segment, &a2, true);
        assert_same_bits(r1.y, r2.y, r1.ny, "segment");
        assert_same_bits(r1.gx, r2.gx, r1.nx, "segment");
        free_result(&r1);
        free_result(&r2);
        dc_tensor *frees[] = {x1, x2, i1, i2};
        for (int i = 0; i < 4; ++i)
            dc_tensor_free(frees[i]);
    }
    /* many rows into few segments: in pieces of rows, each with its bins */
    double *pindex = series(pieces[0], 0, 7, 13);
    for (int64_t i = 0; i < pieces[0]; ++i)
        pindex[i] = floor(pindex[i]);
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        dc_tensor *x1 = make(one, DC_F32, 1, pieces, v), *x2 = make(two, DC_F32, 1, pieces, v);
        dc_tensor *i1 = make_const(one, DC_F32, 1, pieces, pindex), *i2 = make_const(two, DC_F32, 1, pieces, pindex);
        segment_arg a1 = {i1, 7, (dc_reduction)op}, a2 = {i2, 7, (dc_reduction)op};
        run_result r1 = run(one, x1, build_segment, &a1, true), r2 = run(two, x2, build_segment, &a2, true);
        assert_same_bits(r1.y, r2.y, r1.ny, "segment in pieces");
        assert_same_bits(r1.gx, r2.gx, r1.nx, "segment in pieces");
        free_result(&r1);
        free_result(&r2);
        dc_tensor *frees[] = {x1, x2, i1, i2};
        for (int i = 0; i < 4; ++i)
            dc_tensor_free(frees[i]);
    }
    free(pindex);
    /* sums and means over two axes that are not one run, and along the
     * middle axis of a transposed view, in float64 */
    const int64_t cube[3] = {5, 3001, 4};
    for (int op = 0; op < 2; ++op)
        for (int tr = 0; tr < 2; ++tr) {
            dc_tensor *x1 = make(one, DC_F64, 3, cube, v), *x2 = make(two, DC_F64, 3, cube, v);
            axes_arg a = {op, tr ? 1 : 2, {tr ? 1 : 0, 2}, false, tr ? VIEW_TRANSPOSE : VIEW_NONE};
            run_result r1 = run(one, x1, build_sums, &a, true), r2 = run(two, x2, build_sums, &a, true);
            assert_same_bits(r1.y, r2.y, r1.ny, op ? "mean" : "sum");
            assert_same_bits(r1.gx, r2.gx, r1.nx, op ? "mean" : "sum");
            free_result(&r1);
            free_result(&r2);
            dc_tensor_free(x1);
            dc_tensor_free(x2);
        }
    free(v);
    free(index);
    dc_ctx_free(one);
    dc_ctx_free(two);
}

/* ---- CUDA against the CPU ---- */

static bool have_gpu(void)
{
    if (!gpu)
        printf("skipped: no usable CUDA device: %s\n", no_gpu_reason);
    return gpu != NULL;
}

/* The op on both backends from the same values; values and gradients
 * compared (max and min exactly: they pick elements), and the CUDA run
 * repeated for its bits. */
static void compare_backends(dc_ctx *cpu, int ndim, const int64_t *shape, const double *v, build_fn build,
                             const void *cpu_arg, const void *gpu_arg, dc_dtype dtype, bool exact, const char *what)
{
    dc_tensor *xc = make(cpu, dtype, ndim, shape, v), *xg = make(gpu, dtype, ndim, shape, v);
    run_result rc = run(cpu, xc, build, cpu_arg, true);
    run_result rg = run(gpu, xg, build, gpu_arg, true);
    run_result again = run(gpu, xg, build, gpu_arg, true);
    assert_int_equal(rc.ny, rg.ny);
    const double tol = exact ? 0 : dtype == DC_F32 ? 2e-5 : 1e-12;
    assert_close(rg.y, rc.y, rc.ny, tol, tol, what);
    assert_close(rg.gx, rc.gx, rc.nx, tol, tol, what);
    assert_same_bits(again.y, rg.y, rg.ny, what);
    assert_same_bits(again.gx, rg.gx, rg.nx, what);
    free_result(&rc);
    free_result(&rg);
    free_result(&again);
    dc_tensor_free(xc);
    dc_tensor_free(xg);
}

static void test_cuda_reductions_match_cpu(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    /* rows longer than a block of threads; columns; every axis of a length
     * beyond a block; two axes apart (the block copy); a transposed input */
    const struct {
        int ndim;
        int64_t shape[3];
        int n_axes;
        int axes[2];
        bool transpose;
    } cases[] = {{2, {2, 40000}, 1, {1}, false}, {2, {3, 1000}, 1, {1}, false},     {3, {7, 300, 5}, 1, {1}, false},
                 {1, {2049}, 0, {0}, false},     {3, {5, 6, 70}, 2, {0, 2}, false}, {2, {37, 3}, 1, {0}, false},
                 {2, {9, 300}, 1, {0}, true},    {2, {4, 1}, 1, {1}, false},        {2, {4, 0}, 1, {1}, false},
                 /* columns cut (reduce_kinds.h): three cuts; two, and two chunks of columns on the CPU
                  * (kFirstCut on: the products too the same bits as the CPU's, the same cuts in the same
                  * order) */
                 {2, {4100, 3}, 1, {0}, false},  {3, {2, 2049, 65}, 1, {1}, false}};
    enum { kFirstCut = 9 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        int64_t n = 1;
        for (int d = 0; d < cases[c].ndim; ++d)
            n *= cases[c].shape[d];
        double *v = series(n, -3, 3, (unsigned)c), *pv = series(n, 0.995, 1.005, (unsigned)c);
        /* signs, and a few zeros: one in the first output, two in the middle */
        for (int64_t i = 0; i < n; i += 97)
            pv[i] = -pv[i];
        if (n > 8) {
            pv[5] = 0;
            pv[n / 2] = pv[n / 2 + 1] = 0;
        }
        for (int op = 0; op < N_REDUCE; ++op)
            for (int dt = 0; dt < 2; ++dt) {
                axes_arg a = {op, cases[c].n_axes, {cases[c].axes[0], cases[c].axes[1]}, false,
                              cases[c].transpose ? VIEW_TRANSPOSE : VIEW_NONE};
                char what[96];
                snprintf(what, sizeof what, "case %zu, %s, %s", c, reduce_names[op], dt ? "float32" : "float64");
                const bool exact = op == R_MAX || op == R_MIN || (op == R_PROD && c >= kFirstCut);
                compare_backends(cpu, cases[c].ndim, cases[c].shape, op == R_PROD ? pv : v, build_axes, &a, &a,
                                 dt ? DC_F32 : DC_F64, exact, what);
            }
        free(v);
        free(pv);
    }
    /* ties and NaN: the same winners */
    const int64_t edge_shape[2] = {N_EDGE_ROWS, 4};
    for (int op = R_MAX; op <= R_MIN; ++op) {
        axes_arg a = {op, 1, {1}, false, VIEW_NONE};
        compare_backends(cpu, 2, edge_shape, &edge_rows[0][0], build_axes, &a, &a, DC_F64, true, "edges");
        a.axes[0] = 0;
        compare_backends(cpu, 2, edge_shape, &edge_rows[0][0], build_axes, &a, &a, DC_F32, true, "edges");
    }
    dc_ctx_free(cpu);
}

static void test_cuda_segments_match_cpu(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    const struct {
        int ndim;
        int64_t shape[2];
        int64_t n_segments;
    } cases[] = {{2, {1000, 3}, 37},
                 {1, {700, 1}, 5},
                 {2, {300, 260}, 1},
                 {2, {0, 4}, 3},
                 {1, {33000, 1}, 3}}; /* the last in pieces of rows (dc_segment_piece_rows) */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const int64_t n = cases[c].shape[0], numel = n * (cases[c].ndim == 2 ? cases[c].shape[1] : 1);
        double *v = series(numel, -2, 2, (unsigned)c + 20), *pv = series(numel, 0.995, 1.005, (unsigned)c + 20);
        for (int64_t i = 0; i < numel; i += 89)
            pv[i] = -pv[i];
        if (numel > 8)
            pv[3] = pv[numel / 2] = 0;
        double *index = series(n, 0, (double)cases[c].n_segments, (unsigned)c + 30);
        for (int64_t i = 0; i < n; ++i)
            index[i] = floor(index[i]);
        const int64_t ishape[1] = {n};
        for (int dt = 0; dt < 2; ++dt) {
            const dc_dtype dtype = dt ? DC_F32 : DC_F64;
            dc_tensor *ic = make_const(cpu, dtype, 1, ishape, index), *ig = make_const(gpu, dtype, 1, ishape, index);
            for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
                /* in pieces: float32 sums and products, whose bits depend on
                 * the order (the emulation walks 33000 rows slowly) */
                if (cases[c].shape[0] > 32768 && (dtype != DC_F32 || op > DC_REDUCE_PROD))
                    continue;
                segment_arg ac = {ic, cases[c].n_segments, (dc_reduction)op};
                segment_arg ag = {ig, cases[c].n_segments, (dc_reduction)op};
                char what[96];
                snprintf(what, sizeof what, "segments case %zu, %s, %s", c, dc_reduction_name((dc_reduction)op),
                         dc_dtype_name(dtype));
                /* the same order of the same operations: the same bits */
                compare_backends(cpu, cases[c].ndim, cases[c].shape, op == DC_REDUCE_PROD ? pv : v, build_segment, &ac,
                                 &ag, dtype, true, what);
            }
            dc_tensor_free(ic);
            dc_tensor_free(ig);
        }
        free(v);
        free(pv);
        free(index);
    }
    dc_ctx_free(cpu);
}

/* Kernels the forward of an axis reduction launches on the device. */
static uint64_t forward_launches(dc_tensor *x, const axes_arg *a)
{
    dc_tape *tape = dc_tape_new(gpu);
    const uint64_t before = dc_ctx_device_counters(gpu).kernel_launches;
    TEST_NONNULL(gpu, build_axes(tape, x, a));
    const uint64_t launches = dc_ctx_device_counters(gpu).kernel_launches - before;
    dc_tape_free(tape);
    return launches;
}

/* Whole reductions about CUDA's pieces of a row (16384 elements): one short
 * of a piece, two pieces, two and one element, against the CPU. The
 * maximum's and minimum's ties between the first piece's last element and
 * the last piece, won by the first; a NaN in a later piece beating every
 * number, the first NaN winning; -0.0 and +0.0 in different pieces, the
 * first winning with its sign. The launches: one kernel for a piece, two
 * for pieces (log-sum-exp four: its maximum, then its sum). */
static void test_cuda_whole_reductions_in_pieces(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    enum { kPiece = 16384 };
    const int64_t lens[3] = {kPiece - 1, 2 * kPiece, 2 * kPiece + 1};
    for (int c = 0; c < 3; ++c) {
        const int64_t len = lens[c], last = len - 1, first = len > kPiece ? kPiece - 1 : 5;
        const bool pieces = len > kPiece;
        double *v = series(len, -3, 3, 70 + (unsigned)c), *pv = series(len, 0.9995, 1.0005, 70 + (unsigned)c);
        double *nan = series(len, -3, 3, 75 + (unsigned)c), *zeros = series(len, -3, -1, 80 + (unsigned)c);
        v[first] = v[last] = 3.5;
        v[first - 1] = v[last - 1] = -3.5;
        for (int64_t i = 0; i < len; i += 101)
            pv[i] = -pv[i];
        pv[len / 2] = 0;
        nan[pieces ? kPiece + 10 : 100] = nan[last - 2] = NAN;
        zeros[first] = -0.0;
        zeros[last] = 0.0;
        const int64_t shape[1] = {len};
        for (int op = 0; op < N_REDUCE; ++op)
            for (int dt = 0; dt < 2; ++dt) {
                const dc_dtype dtype = dt ? DC_F32 : DC_F64;
                const bool exact = op == R_MAX || op == R_MIN;
                axes_arg a = {op, 1, {0}, false, VIEW_NONE};
                char what[96];
                snprintf(what, sizeof what, "length %lld, %s, %s", (long long)len, reduce_names[op],
                         dc_dtype_name(dtype));
                compare_backends(cpu, 1, shape, op == R_PROD ? pv : v, build_axes, &a, &a, dtype, exact, what);
                compare_backends(cpu, 1, shape, nan, build_axes, &a, &a, dtype, exact, what);
                if (!exact)
                    continue;
                /* the signed zeros (the minimum's negated): the sign of the first */
                double *z = malloc((size_t)len * sizeof *z);
                for (int64_t i = 0; i < len; ++i)
                    z[i] = op == R_MAX ? zeros[i] : -zeros[i];
                dc_tensor *xc = make(cpu, dtype, 1, shape, z), *xg = make(gpu, dtype, 1, shape, z);
                run_result rc = run(cpu, xc, build_axes, &a, false), rg = run(gpu, xg, build_axes, &a, false);
                assert_exact(rg.y, rc.y, 1, what);
                assert_exact(rg.gx, rc.gx, len, what);
                if (signbit(rg.y[0]) != (op == R_MAX) || rg.gx[first] != 1)
                    fail_msg("%s: signed zeros: %g, not the first", what, rg.y[0]);
                free_result(&rc);
                free_result(&rg);
                dc_tensor_free(xc);
                dc_tensor_free(xg);
                free(z);
            }
        /* the kernels of the forward */
        dc_tensor *x = make(gpu, DC_F32, 1, shape, pv);
        for (int op = 0; op < N_REDUCE; ++op) {
            axes_arg a = {op, 1, {0}, false, VIEW_NONE};
            const uint64_t want = !pieces ? 1 : op == R_LSE ? 4 : 2, got = forward_launches(x, &a);
            if (got != want)
                fail_msg("length %lld, %s: %llu launches, want %llu", (long long)len, reduce_names[op],
                         (unsigned long long)got, (unsigned long long)want);
        }
        dc_tensor_free(x);
        free(v);
        free(pv);
        free(nan);
        free(zeros);
    }
    dc_ctx_free(cpu);
}

/* Segment reductions in three pieces of rows (dc_segment_piece_rows: 32768
 * rows) with segments that have no rows in some pieces (segment 0 in the
 * first and last only, segment 1 in the middle one only, segment 2 in
 * none), ties across pieces won by the first row, and NaN in two pieces:
 * the same results as the CPU (float32, whose sums and products show the
 * order in their bits; the emulation walks these rows slowly). */
static void test_cuda_segments_in_pieces(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    enum { kRows = 32768, kSegments = 5 };
    const int64_t n = 2 * kRows + 3;
    double *index = malloc((size_t)n * sizeof *index);
    for (int64_t i = 0; i < n; ++i) /* 3 and 4 in every piece */
        index[i] = i % 3 == 0 ? (i / kRows == 1 ? 1 : 0) : i % 3 == 1 ? 3 : 4;
    double *v = series(n, -2, 2, 90), *pv = series(n, 0.9995, 1.0005, 90);
    for (int64_t i = 0; i < n; i += 89)
        pv[i] = -pv[i];
    pv[3] = 0;
    /* the maximum of segment 0 tied in rows 3 and n - 1 (the last piece),
     * the minimum of segment 4 in rows 2 and n - 2; segment 3 NaN in rows
     * 40000 and n - 3 (pieces 1 and 2) */
    v[3] = v[n - 1] = 2.5;
    v[2] = v[n - 2] = -2.5;
    v[40000] = v[n - 3] = NAN;
    const int64_t shape[1] = {n};
    dc_tensor *ic = make_const(cpu, DC_F32, 1, shape, index), *ig = make_const(gpu, DC_F32, 1, shape, index);
    for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
        segment_arg ac = {ic, kSegments, (dc_reduction)op}, ag = {ig, kSegments, (dc_reduction)op};
        char what[96];
        snprintf(what, sizeof what, "segments in pieces, %s", dc_reduction_name((dc_reduction)op));
        compare_backends(cpu, 1, shape, op == DC_REDUCE_PROD ? pv : v, build_segment, &ac, &ag, DC_F32, true, what);
    }
    dc_tensor_free(ic);
    dc_tensor_free(ig);
    free(index);
    free(v);
    free(pv);
    dc_ctx_free(cpu);
}

/* ids for the grouping: pseudo-random in 0..limit-1 but none of them 2
 * modulo 4 (empty ids, the last of 7 among them), and a run of zeros across
 * several tiles of the sort. */
static double *grouping_ids(int64_t n, int64_t limit)
{
    double *ids = malloc((size_t)n * sizeof *ids);
    uint64_t s = 0x2545F4914F6CDD1Dull ^ (uint64_t)limit;
    for (int64_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int64_t v = (int64_t)((s >> 33) % (uint64_t)limit);
        if (v % 4 == 2)
            --v;
        ids[i] = (double)(i >= 50000 && i < 60000 ? 0 : v);
    }
    return ids;
}

/* The grouping on CUDA (dc_group_indices, a radix sort over many blocks)
 * against a stable counting sort on the host, over limits that take one to
 * three passes, and a segment sum over the same ids with the CPU's bits. */
static void test_cuda_grouping_matches_stable_sort(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    dc_ctx *cpu = test_cpu_ctx();
    const int64_t n = 200003, limits[] = {1, 7, 1000, 70000};
    const int64_t ishape[1] = {n}, vshape[2] = {n, 1};
    int64_t *start = malloc((size_t)(limits[3] + 1) * sizeof *start);
    int64_t *want_start = malloc((size_t)(limits[3] + 1) * sizeof *want_start);
    int64_t *positions = malloc((size_t)n * sizeof *positions), *want = malloc((size_t)n * sizeof *want);
    double *v = series(n, -2, 2, 60);
    for (size_t c = 0; c < sizeof limits / sizeof limits[0]; ++c) {
        const int64_t limit = limits[c];
        double *ids = grouping_ids(n, limit);
        /* the reference: counts, their exclusive sums, then each position in order */
        memset(want_start, 0, (size_t)(limit + 1) * sizeof *want_start);
        for (int64_t i = 0; i < n; ++i)
            ++want_start[(int64_t)ids[i] + 1];
        for (int64_t u = 0; u < limit; ++u)
            want_start[u + 1] += want_start[u];
        for (int64_t i = 0; i < n; ++i)
            want[want_start[(int64_t)ids[i]]++] = i;
        memmove(want_start + 1, want_start, (size_t)limit * sizeof *want_start);
        want_start[0] = 0;

        dc_tensor *ig = make_const(gpu, DC_F32, 1, ishape, ids);
        dc_tape *tape = dc_tape_new(gpu);
        TEST_NONNULL(gpu, tape);
        const int64_t *rows = dc_read_indices(tape, "grouping test", "ids", DC_SITE_SEGMENT_INDEX, ig, limit);
        TEST_NONNULL(gpu, rows);
        const dc_index_groups *g = dc_group_indices(tape, rows, n, limit);
        TEST_NONNULL(gpu, g);
        TEST_OK(gpu, dc_cuda_to_host(gpu, start, g->start, (size_t)(limit + 1) * sizeof *start));
        TEST_OK(gpu, dc_cuda_to_host(gpu, positions, g->positions, (size_t)n * sizeof *positions));
        for (int64_t u = 0; u <= limit; ++u)
            if (start[u] != want_start[u])
                fail_msg("limit %lld: start[%lld] is %lld, want %lld", (long long)limit, (long long)u,
                         (long long)start[u], (long long)want_start[u]);
        for (int64_t k = 0; k < n; ++k)
            if (positions[k] != want[k])
                fail_msg("limit %lld: positions[%lld] is %lld, want %lld", (long long)limit, (long long)k,
                         (long long)positions[k], (long long)want[k]);
        dc_tape_free(tape);

        /* a float32 segment sum over these ids: the CPU's bits */
        dc_tensor *ic = make_const(cpu, DC_F32, 1, ishape, ids);
        segment_arg ac = {ic, limit, DC_REDUCE_SUM}, ag = {ig, limit, DC_REDUCE_SUM};
        char what[64];
        snprintf(what, sizeof what, "grouped segment sum, limit %lld", (long long)limit);
        compare_backends(cpu, 2, vshape, v, build_segment, &ac, &ag, DC_F32, true, what);
        dc_tensor_free(ic);
        dc_tensor_free(ig);
        free(ids);
    }
    free(v);
    free(start);
    free(want_start);
    free(positions);
    free(want);
    dc_ctx_free(cpu);
}

/* On CUDA a bad index is found on the device and reported by the next call
 * that waits for it, naming dc_op_segment_reduce and its index. */
static void test_cuda_bad_index_reported_at_the_next_wait(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    const int64_t vs[2] = {4, 2}, is[1] = {4};
    const double v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bad[4] = {0, 1, 7, 1};
    dc_tensor *x = make(gpu, DC_F64, 2, vs, v), *idx = make_const(gpu, DC_F64, 1, is, bad);
    dc_tape *tape = dc_tape_new(gpu);
    dc_tensor *y = dc_op_segment_reduce(tape, x, idx, 3, DC_REDUCE_SUM);
    TEST_NONNULL(gpu, y); /* the host did not wait */
    double out[6];
    const dc_status st = dc_tensor_to_host(y, out, sizeof out);
    assert_int_equal(st, DC_ERR_ARG);
    const char *parts[] = {"dc_op_segment_reduce", "index[2] is 7", "0..2", "segment 0"};
    for (int i = 0; i < 4; ++i)
        if (!strstr(dc_last_error(gpu), parts[i]))
            fail_msg("the message \"%s\" does not name \"%s\"", dc_last_error(gpu), parts[i]);
    /* reported once: the next wait is clean, and the row went to segment 0 */
    TEST_OK(gpu, dc_tensor_to_host(y, out, sizeof out));
    assert_true(out[0] == 1 + 5 && out[1] == 2 + 6);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(idx);
}

/* A step of every op and its backward on CUDA neither waits for the
 * device nor, once warm, calls cudaMalloc or cudaFree: it can be captured
 * as a CUDA graph. */
static void test_cuda_step_never_waits(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    const int64_t shape[3] = {6, 300, 4}, vshape[2] = {300, 24}, ishape[1] = {300};
    double *v = series(7200, 0.99, 1.01, 40), *index = series(300, 0, 9, 41);
    for (int i = 0; i < 300; ++i)
        index[i] = floor(index[i]);
    dc_tensor *x = make(gpu, DC_F32, 3, shape, v), *values = make(gpu, DC_F32, 2, vshape, v);
    dc_tensor *idx = make_const(gpu, DC_F32, 1, ishape, index);
    dc_tape *tape = dc_tape_new(gpu);
    TEST_OK(gpu, dc_ctx_synchronize(gpu));
    dc_device_counters warm = {0, 0, 0, 0, 0, 0};
    const int axes[2] = {0, 2}, row[1] = {1};
    for (int step = 0; step < 4; ++step) {
        const dc_device_counters at_start = dc_ctx_device_counters(gpu);
        dc_tape_reset(tape);
        dc_tensor *loss = NULL;
        for (int op = 0; op < N_REDUCE; ++op) {
            dc_tensor *a = reduce_fns[op](tape, x, 2, axes, false), *b = reduce_fns[op](tape, x, 1, row, true);
            dc_tensor *t = dc_op_add(tape, dc_op_sum(tape, a, 0, NULL, false), dc_op_sum(tape, b, 0, NULL, false));
            loss = loss ? dc_op_add(tape, loss, t) : t;
        }
        for (int op = DC_REDUCE_SUM; op <= DC_REDUCE_MIN; ++op) {
            dc_tensor *y = dc_op_segment_reduce(tape, values, idx, 9, (dc_reduction)op);
            loss = dc_op_add(tape, loss, dc_op_sum(tape, y, 0, NULL, false));
        }
        TEST_NONNULL(gpu, loss);
        TEST_OK(gpu, dc_backward(tape, loss));
        const dc_device_counters c = dc_ctx_device_counters(gpu);
        if (c.host_waits != at_start.host_waits)
            fail_msg("step %d: %llu host waits", step, (unsigned long long)(c.host_waits - at_start.host_waits));
        if (step == 1)
            warm = c;
        if (step > 1 && (c.malloc_calls != warm.malloc_calls || c.free_calls != warm.free_calls))
            fail_msg("step %d: cudaMalloc or cudaFree in a warm step", step);
        dc_tensor_zero_grad(x);
        dc_tensor_zero_grad(values);
    }
    TEST_OK(gpu, dc_ctx_synchronize(gpu));
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(values);
    dc_tensor_free(idx);
    free(v);
    free(index);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    o.seed = 1;
    dc_status st = DC_OK;
    gpu = dc_ctx_new(&o, &st);
    if (!gpu) {
        snprintf(no_gpu_reason, sizeof no_gpu_reason, "%s", dc_last_error(NULL));
        const char *require = getenv("DC_REQUIRE_CUDA");
        if (require && strcmp(require, "1") == 0) {
            printf("test_reduce: failed (DC_REQUIRE_CUDA=1): no usable CUDA device: %s\n", no_gpu_reason);
            return 1;
        }
        printf("test_reduce: the CUDA tests are skipped: no usable CUDA device: %s\n", no_gpu_reason);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_over_axes),
        cmocka_unit_test(test_result_shapes),
        cmocka_unit_test(test_prod_zeros),
        cmocka_unit_test(test_extremum_edges),
        cmocka_unit_test(test_logsumexp_edges),
        cmocka_unit_test(test_logsumexp_large_inputs),
        cmocka_unit_test(test_mean_of_huge_float32),
        cmocka_unit_test(test_empty_and_size_one_axes),
        cmocka_unit_test(test_float32_matches_float64),
        cmocka_unit_test(test_long_rows),
        cmocka_unit_test(test_long_columns),
        cmocka_unit_test(test_reduce_dispatch),
        cmocka_unit_test(test_bad_axes),
        cmocka_unit_test(test_segment_values_and_gradients),
        cmocka_unit_test(test_winners_gradient_accumulates),
        cmocka_unit_test(test_gradients_accumulate_across_reductions),
        cmocka_unit_test(test_segment_shapes_and_edges),
        cmocka_unit_test(test_segment_bad_arguments),
        cmocka_unit_test(test_segment_pieces_and_one_piece),
        cmocka_unit_test(test_segment_extrema_in_pieces),
        cmocka_unit_test(test_segment_index_written_after_the_op),
        cmocka_unit_test(test_float32_products_accumulate_in_double),
        cmocka_unit_test(test_whole_reduction_gradients_fill),
        cmocka_unit_test(test_same_bits_on_one_and_two_threads),
        cmocka_unit_test(test_cuda_reductions_match_cpu),
        cmocka_unit_test(test_cuda_segments_match_cpu),
        cmocka_unit_test(test_cuda_whole_reductions_in_pieces),
        cmocka_unit_test(test_cuda_segments_in_pieces),
        cmocka_unit_test(test_cuda_grouping_matches_stable_sort),
        cmocka_unit_test(test_cuda_bad_index_reported_at_the_next_wait),
        cmocka_unit_test(test_cuda_step_never_waits),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(gpu);
    return failed;
}
