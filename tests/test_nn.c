/* The pieces a model is built from: slice, concat, embedding, cross entropy,
 * the hard sigmoid and the straight-through step (gradients against central
 * differences and by hand, float32 against float64, bad input), the
 * optimizers and gradient clipping (one step against the update worked out
 * here, many steps on a quadratic), and checkpoints (round trip, and every
 * refusal leaves the tensors and the files as they were). */
#define _GNU_SOURCE /* memmem; and mkdtemp, opendir, mkfifo, truncate */

#include <dirent.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/test_support.h"

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
        if (st_ != (want))                                                                                             \
            fail_msg("%s: expected %s, got %s (message \"%s\")", #expr, dc_status_name(want), dc_status_name(st_),     \
                     dc_last_error(ctx));                                                                              \
        expect_words(#expr, dc_last_error(ctx), __VA_ARGS__, (const char *)NULL);                                      \
    } while (0)

/* xorshift64*: the same ids and targets on every run and platform. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static int64_t rng_below(int64_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (int64_t)((rng_state * 0x2545f4914f6cdd1dull >> 11) % (uint64_t)n);
}

static void unravel(int64_t e, int ndim, const int64_t *shape, int64_t *c)
{
    for (int d = ndim; d-- > 0;) {
        c[d] = e % shape[d];
        e /= shape[d];
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *c)
{
    int64_t e = 0;
    for (int d = 0; d < ndim; ++d)
        e = e * shape[d] + c[d];
    return e;
}

static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

/* sum(y * w): a loss whose gradient with respect to y is exactly w. */
static dc_tensor *weighted_sum(dc_tape *tape, dc_tensor *y, dc_tensor *w)
{
    return dc_op_sum(tape, dc_op_mul(tape, y, w), 0, NULL, false);
}

/* A float64 tensor of uniform values in [lo, hi). */
static dc_tensor *f64_random(dc_ctx *ctx, int ndim, const int64_t *shape, double lo, double hi, bool requires_grad)
{
    dc_tensor *t = test_random(ctx, DC_F64, ndim, shape, lo, hi);
    TEST_OK(ctx, dc_tensor_set_requires_grad(t, requires_grad));
    return t;
}

/* dc_gradcheck with the default tolerances; fails with its message. */
static void gradcheck_ok(dc_ctx *ctx, const char *what, dc_gradcheck_fn fn, void *user, int n, dc_tensor *const *inputs,
                         int64_t want_checked)
{
    dc_gradcheck_report r;
    dc_status st = dc_gradcheck(ctx, fn, user, n, inputs, NULL, &r);
    if (st != DC_OK)
        fail_msg("%s: dc_gradcheck -> %s: %s", what, dc_status_name(st), dc_last_error(ctx));
    if (r.checked != want_checked)
        fail_msg("%s: dc_gradcheck compared %lld elements, expected %lld", what, (long long)r.checked,
                 (long long)want_checked);
}

/* One recorded evaluation of fn and its backward pass on a fresh tape; with
 * `zero` the inputs' gradients are zeroed first. Returns the loss. */
static double backward_once(dc_ctx *ctx, dc_gradcheck_fn fn, void *user, int n, dc_tensor *const *inputs, bool zero)
{
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    for (int i = 0; zero && i < n; ++i)
        dc_tensor_zero_grad(inputs[i]);
    dc_tensor *loss = fn(tape, inputs, user);
    TEST_NONNULL(ctx, loss);
    double value;
    TEST_OK(ctx, dc_tensor_item(loss, &value));
    TEST_OK(ctx, dc_backward(tape, loss));
    dc_tape_free(tape);
    return value;
}

/* The gradient's values; fails if no gradient reached t. */
static double *grad_values(dc_ctx *ctx, const dc_tensor *t, const char *what)
{
    const dc_tensor *g = dc_tensor_grad(t);
    if (!g)
        fail_msg("%s: expected a gradient, got none (%s)", what, dc_last_error(ctx));
    return test_values(g);
}

/* A copy of the tensor's bytes (malloc'd; free it). */
static unsigned char *tensor_bytes(dc_ctx *ctx, const dc_tensor *t, size_t *size)
{
    const size_t n = (size_t)dc_tensor_numel(t) * dc_dtype_size(dc_tensor_dtype(t));
    unsigned char *p = malloc(n ? n : 1);
    assert_non_null(p);
    TEST_OK(ctx, dc_tensor_to_host(t, p, n));
    *size = n;
    return p;
}

/* Fails unless the two tensors hold the same bytes. */
static void expect_same_bytes(dc_ctx *ctx, const dc_tensor *got, const dc_tensor *want, const char *what)
{
    size_t ng, nw;
    unsigned char *g = tensor_bytes(ctx, got, &ng), *w = tensor_bytes(ctx, want, &nw);
    if (ng != nw)
        fail_msg("%s: %zu bytes, expected %zu", what, ng, nw);
    for (size_t i = 0; i < ng; ++i)
        if (g[i] != w[i])
            fail_msg("%s: byte %zu is 0x%02x, expected 0x%02x", what, i, g[i], w[i]);
    free(g);
    free(w);
}

/* Rounds every element to the nearest float, so that float32 and float64
 * copies start from the same values. */
static void round_to_float(dc_ctx *ctx, dc_tensor *t)
{
    for (int64_t i = 0; i < dc_tensor_numel(t); ++i) {
        double v;
        TEST_OK(ctx, dc_tensor_get(t, i, &v));
        TEST_OK(ctx, dc_tensor_set(t, i, (double)(float)v));
    }
}

/* A float32 copy of a float64 tensor (values already float-representable). */
static dc_tensor *to_f32(dc_ctx *ctx, const dc_tensor *t)
{
    double *v = test_values(t);
    dc_tensor *f = test_tensor(ctx, DC_F32, dc_tensor_ndim(t), dc_tensor_shape(t), v);
    free(v);
    return f;
}

static void expect_shape(const dc_tensor *t, int ndim, const int64_t *shape, const char *what)
{
    char got[128];
    bool same = dc_tensor_ndim(t) == ndim;
    for (int d = 0; same && d < ndim; ++d)
        same = dc_tensor_shape(t)[d] == shape[d];
    if (!same) {
        char want[128];
        size_t at = 0;
        want[0] = '\0';
        at += (size_t)snprintf(want + at, sizeof want - at, "[");
        for (int d = 0; d < ndim; ++d)
            at += (size_t)snprintf(want + at, sizeof want - at, d ? ", %lld" : "%lld", (long long)shape[d]);
        snprintf(want + at, sizeof want - at, "]");
        fail_msg("%s: shape %s, expected %s", what, dc_tensor_shape_str(t, got, sizeof got), want);
    }
}

/* ---- slice ---- */

typedef struct slice_case {
    int axis;
    int64_t start, length;
    bool transposed; /* slice transpose(x, 0, 2), a strided view, instead of x */
    dc_tensor *w;
} slice_case;

static dc_tensor *slice_of(dc_tape *tape, dc_tensor *x, const slice_case *k)
{
    dc_tensor *src = k->transposed ? dc_op_transpose(tape, x, 0, 2) : x;
    return dc_op_slice(tape, src, k->axis, k->start, k->length);
}

static dc_tensor *slice_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const slice_case *k = user;
    return weighted_sum(tape, slice_of(tape, x[0], k), k->w);
}

/* Every axis, from the start and from the middle, of x and of a strided view
 * of it: central differences agree, the forward copies each element, and the
 * backward puts w exactly into the slice and exact zeros elsewhere. */
static void test_slice_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t xshape[3] = {4, 5, 6};
    dc_tensor *x = f64_random(ctx, 3, xshape, -1.0, 1.0, true);
    double *xv = test_values(x);
    const slice_case cases[] = {
        {0, 0, 2, false, NULL},  {0, 1, 2, false, NULL}, {1, 0, 3, false, NULL},  {1, 2, 2, false, NULL},
        {2, 0, 1, false, NULL},  {2, 3, 2, false, NULL}, {-1, 2, 3, false, NULL}, {-2, 4, 1, false, NULL},
        {-3, 0, 4, false, NULL}, {1, 1, 3, true, NULL},  {0, 2, 3, true, NULL},   {-1, 1, 2, true, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        slice_case k = cases[i];
        const int a = k.axis < 0 ? k.axis + 3 : k.axis;
        int64_t sshape[3] = {xshape[0], xshape[1], xshape[2]};
        if (k.transposed) {
            sshape[0] = xshape[2];
            sshape[2] = xshape[0];
        }
        int64_t wshape[3] = {sshape[0], sshape[1], sshape[2]};
        wshape[a] = k.length;
        k.w = f64_random(ctx, 3, wshape, -1.0, 1.0, false);
        char what[96];
        snprintf(what, sizeof what, "slice axis %d start %lld length %lld%s", k.axis, (long long)k.start,
                 (long long)k.length, k.transposed ? " of a transposed view" : "");
        gradcheck_ok(ctx, what, slice_loss, &k, 1, &x, 4 * 5 * 6);

        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor_zero_grad(x);
        dc_tensor *y = slice_of(tape, x, &k);
        TEST_NONNULL(ctx, y);
        expect_shape(y, 3, wshape, what);
        TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, y, k.w)));
        double *yv = test_values(y), *wv = test_values(k.w), *gv = grad_values(ctx, x, what);
        for (int64_t e = 0; e < 4 * 5 * 6; ++e) {
            int64_t c[3], sc[3];
            unravel(e, 3, xshape, c);
            sc[0] = k.transposed ? c[2] : c[0];
            sc[1] = c[1];
            sc[2] = k.transposed ? c[0] : c[2];
            if (sc[a] >= k.start && sc[a] < k.start + k.length) {
                sc[a] -= k.start;
                const int64_t j = ravel(3, wshape, sc);
                if (yv[j] != xv[e])
                    fail_msg("%s: output %lld is %.17g, expected x[%lld] = %.17g", what, (long long)j, yv[j],
                             (long long)e, xv[e]);
                if (gv[e] != wv[j])
                    fail_msg("%s: gradient of x[%lld] is %.17g, expected w[%lld] = %.17g", what, (long long)e, gv[e],
                             (long long)j, wv[j]);
            } else if (gv[e] != 0.0) {
                fail_msg("%s: x[%lld] is outside the slice but its gradient is %.17g, expected 0", what, (long long)e,
                         gv[e]);
            }
        }
        free(yv);
        free(wv);
        free(gv);
        dc_tape_free(tape);
        dc_tensor_free(k.w);
    }
    free(xv);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* Length 0 (at the start, in the middle, at the very end) gives an empty
 * tensor of the right shape; summed into a loss it adds nothing. */
static void test_slice_empty(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t xshape[3] = {4, 5, 6};
    dc_tensor *x = f64_random(ctx, 3, xshape, -1.0, 1.0, true);
    dc_tensor *w = f64_random(ctx, 3, xshape, -1.0, 1.0, false);
    const struct {
        int axis;
        int64_t start;
    } cases[] = {{0, 0}, {1, 2}, {1, 5}, {-1, 6}, {-3, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        dc_tape *tape = dc_tape_new(ctx);
        const int a = cases[i].axis < 0 ? cases[i].axis + 3 : cases[i].axis;
        dc_tensor *y = dc_op_slice(tape, x, cases[i].axis, cases[i].start, 0);
        TEST_NONNULL(ctx, y);
        int64_t want[3] = {xshape[0], xshape[1], xshape[2]};
        want[a] = 0;
        expect_shape(y, 3, want, "empty slice");
        assert_int_equal(dc_tensor_numel(y), 0);
        double dummy = 0;
        TEST_OK(ctx, dc_tensor_to_host(y, &dummy, 0));
        dc_tensor *empty_sum = dc_op_sum(tape, y, 0, NULL, false);
        TEST_NONNULL(ctx, empty_sum);
        double s = -1;
        TEST_OK(ctx, dc_tensor_item(empty_sum, &s));
        if (s != 0.0)
            fail_msg("sum of an empty slice at axis %d start %lld is %g, expected 0", cases[i].axis,
                     (long long)cases[i].start, s);
        dc_tensor_zero_grad(x);
        TEST_OK(ctx, dc_backward(tape, dc_op_add(tape, weighted_sum(tape, x, w), empty_sum)));
        double *g = grad_values(ctx, x, "x beside an empty slice"), *wv = test_values(w);
        test_assert_close(g, wv, 4 * 5 * 6, 0, 0, "gradient of x beside an empty slice");
        free(g);
        free(wv);
        dc_tape_free(tape);
    }
    dc_tensor_free(w);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* One [B, 5H] pre-activation cut into five gates, as a model does. */
typedef struct gates_case {
    int64_t h;
    unsigned used;     /* bit p: part p enters the loss */
    bool slice_unused; /* also slice the unused parts (dead nodes on the tape) */
    bool linear;       /* each used part enters as sum(part * w[p]) */
    dc_tensor *w[5];
    dc_tensor *c; /* the cell state of the LSTM-like loss */
} gates_case;

static dc_tensor *gates_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const gates_case *k = user;
    dc_tensor *loss = NULL;
    for (int p = 0; p < 5; ++p) {
        const bool used = k->used & (1u << p);
        if (!used && !k->slice_unused)
            continue;
        dc_tensor *s = dc_op_slice(tape, x[0], 1, p * k->h, k->h);
        if (!s)
            return NULL;
        if (!used)
            continue;
        if (!k->linear)
            s = p == 3 ? dc_op_tanh(tape, s) : dc_op_sigmoid(tape, s);
        dc_tensor *term = weighted_sum(tape, s, k->w[p]);
        loss = loss ? dc_op_add(tape, loss, term) : term;
    }
    return loss;
}

/* i, f, o, g and a boundary gate z: c' = f c + i g, h = o tanh(c'). */
static dc_tensor *lstm_like_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const gates_case *k = user;
    dc_tensor *s[5];
    for (int p = 0; p < 5; ++p)
        s[p] = dc_op_slice(tape, x[0], 1, p * k->h, k->h);
    dc_tensor *i = dc_op_sigmoid(tape, s[0]), *f = dc_op_sigmoid(tape, s[1]), *o = dc_op_sigmoid(tape, s[2]);
    dc_tensor *g = dc_op_tanh(tape, s[3]), *z = dc_op_sigmoid(tape, s[4]);
    dc_tensor *c_next = dc_op_add(tape, dc_op_mul(tape, f, k->c), dc_op_mul(tape, i, g));
    dc_tensor *h_next = dc_op_mul(tape, o, dc_op_tanh(tape, c_next));
    return dc_op_add(tape, weighted_sum(tape, h_next, k->w[0]), weighted_sum(tape, z, k->w[1]));
}

static void test_slice_gates_all_used(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t b = 3, h = 4;
    const int64_t xshape[2] = {b, 5 * h}, pshape[2] = {b, h};
    dc_tensor *x = f64_random(ctx, 2, xshape, -2.0, 2.0, true);
    gates_case k = {.h = h, .used = 0x1f};
    for (int p = 0; p < 5; ++p)
        k.w[p] = f64_random(ctx, 2, pshape, -1.0, 1.0, false);
    k.c = f64_random(ctx, 2, pshape, -1.0, 1.0, false);

    /* every element of the parent gets its gradient, through every gate */
    gradcheck_ok(ctx, "LSTM-like use of five slices", lstm_like_loss, &k, 1, &x, b * 5 * h);
    backward_once(ctx, lstm_like_loss, &k, 1, &x, true);
    double *g = grad_values(ctx, x, "LSTM-like use of five slices");
    for (int64_t e = 0; e < b * 5 * h; ++e)
        if (g[e] == 0.0 || !isfinite(g[e]))
            fail_msg("LSTM-like use of five slices: gradient of x[%lld] is %g, expected a finite nonzero value",
                     (long long)e, g[e]);
    free(g);

    /* linear use: the parent's gradient is the five weights side by side */
    k.linear = true;
    gradcheck_ok(ctx, "five slices used linearly", gates_loss, &k, 1, &x, b * 5 * h);
    backward_once(ctx, gates_loss, &k, 1, &x, true);
    g = grad_values(ctx, x, "five slices used linearly");
    for (int p = 0; p < 5; ++p) {
        double *wv = test_values(k.w[p]);
        for (int64_t r = 0; r < b; ++r)
            for (int64_t j = 0; j < h; ++j)
                if (g[r * 5 * h + p * h + j] != wv[r * h + j])
                    fail_msg("five slices used linearly: gradient [%lld, %lld] is %.17g, expected w%d = %.17g",
                             (long long)r, (long long)(p * h + j), g[r * 5 * h + p * h + j], p, wv[r * h + j]);
        free(wv);
    }
    free(g);
    for (int p = 0; p < 5; ++p)
        dc_tensor_free(k.w[p]);
    dc_tensor_free(k.c);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* Parts that never reach the loss (sliced or not) get exact zeros, the used
 * ones their gradient. */
static void test_slice_gates_some_used(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t b = 3, h = 4;
    const int64_t xshape[2] = {b, 5 * h}, pshape[2] = {b, h};
    dc_tensor *x = f64_random(ctx, 2, xshape, -2.0, 2.0, true);
    gates_case k = {.h = h};
    for (int p = 0; p < 5; ++p)
        k.w[p] = f64_random(ctx, 2, pshape, 0.5, 1.0, false); /* nonzero */
    const unsigned masks[] = {0x15, 0x02, 0x10, 0x01, 0x0f};
    for (size_t m = 0; m < sizeof masks / sizeof masks[0]; ++m) {
        for (int dead = 0; dead < 2; ++dead) {
            k.used = masks[m];
            k.slice_unused = dead;
            char what[96];
            snprintf(what, sizeof what, "parts 0x%02x of five used%s", masks[m],
                     dead ? ", the others sliced and dropped" : "");
            gradcheck_ok(ctx, what, gates_loss, &k, 1, &x, b * 5 * h);
            backward_once(ctx, gates_loss, &k, 1, &x, true);
            double *g = grad_values(ctx, x, what);
            for (int64_t r = 0; r < b; ++r)
                for (int64_t j = 0; j < 5 * h; ++j) {
                    const int p = (int)(j / h);
                    const double v = g[r * 5 * h + j];
                    if (!(masks[m] & (1u << p)) && v != 0.0)
                        fail_msg("%s: gradient [%lld, %lld] in unused part %d is %.17g, expected exactly 0", what,
                                 (long long)r, (long long)j, p, v);
                    if ((masks[m] & (1u << p)) && v == 0.0)
                        fail_msg("%s: gradient [%lld, %lld] in used part %d is 0", what, (long long)r, (long long)j, p);
                }
            free(g);
        }
    }
    for (int p = 0; p < 5; ++p)
        dc_tensor_free(k.w[p]);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* x used whole and through overlapping slices, recorded in either order;
 * gradients also accumulate over two backward passes. */
typedef struct overlap_case {
    bool slices_first;
    dc_tensor *w0, *w1, *w2;
} overlap_case;

static dc_tensor *overlap_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const overlap_case *k = user;
    dc_tensor *whole = NULL;
    if (!k->slices_first)
        whole = weighted_sum(tape, x[0], k->w0);
    dc_tensor *s1 = weighted_sum(tape, dc_op_slice(tape, x[0], 1, 0, 5), k->w1);
    dc_tensor *s2 = weighted_sum(tape, dc_op_slice(tape, x[0], 1, 3, 5), k->w2);
    if (k->slices_first)
        whole = weighted_sum(tape, x[0], k->w0);
    return dc_op_add(tape, whole, dc_op_add(tape, s1, s2));
}

static void test_slice_accumulates(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t xshape[2] = {3, 8}, sshape[2] = {3, 5};
    dc_tensor *x = f64_random(ctx, 2, xshape, -1.0, 1.0, true);
    overlap_case k;
    k.w0 = f64_random(ctx, 2, xshape, -1.0, 1.0, false);
    k.w1 = f64_random(ctx, 2, sshape, -1.0, 1.0, false);
    k.w2 = f64_random(ctx, 2, sshape, -1.0, 1.0, false);
    double *w0 = test_values(k.w0), *w1 = test_values(k.w1), *w2 = test_values(k.w2);
    double want[24];
    for (int64_t r = 0; r < 3; ++r)
        for (int64_t j = 0; j < 8; ++j) {
            long double v = w0[r * 8 + j];
            if (j < 5)
                v += w1[r * 5 + j];
            if (j >= 3)
                v += w2[r * 5 + j - 3];
            want[r * 8 + j] = (double)v;
        }
    for (int order = 0; order < 2; ++order) {
        k.slices_first = order;
        const char *what = order ? "slices recorded before the whole" : "whole recorded before the slices";
        gradcheck_ok(ctx, what, overlap_loss, &k, 1, &x, 24);
        backward_once(ctx, overlap_loss, &k, 1, &x, true);
        double *g = grad_values(ctx, x, what);
        test_assert_close(g, want, 24, 1e-15, 1e-15, what);
        free(g);
        backward_once(ctx, overlap_loss, &k, 1, &x, false);
        g = grad_values(ctx, x, what);
        double twice[24];
        for (int e = 0; e < 24; ++e)
            twice[e] = 2 * want[e];
        test_assert_close(g, twice, 24, 1e-15, 1e-15, "gradient after two backward passes");
        free(g);
    }
    free(w0);
    free(w1);
    free(w2);
    dc_tensor_free(k.w0);
    dc_tensor_free(k.w1);
    dc_tensor_free(k.w2);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* ---- concat ---- */

typedef struct concat_case {
    int n;
    int axis;
    dc_tensor *w;
} concat_case;

static dc_tensor *concat_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const concat_case *k = user;
    return weighted_sum(tape, dc_op_concat(tape, k->n, x, k->axis), k->w);
}

typedef struct concat_spec {
    int ndim, axis, n;
    int64_t shapes[3][3];
    bool frozen[3]; /* does not require a gradient */
} concat_spec;

static void test_concat_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const concat_spec specs[] = {
        {2, 0, 2, {{2, 3}, {3, 3}}, {false, false}},
        {2, 1, 3, {{2, 3}, {2, 1}, {2, 4}}, {false, false, false}},
        {3, -1, 2, {{2, 3, 2}, {2, 3, 3}}, {false, false}},
        {3, 1, 3, {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}}, {false, true, false}},
        {2, -2, 3, {{1, 4}, {2, 4}, {3, 4}}, {true, false, false}},
        {3, 0, 2, {{1, 2, 3}, {2, 2, 3}}, {false, false}},
        {1, 0, 2, {{3}, {4}}, {false, true}},
    };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; ++s) {
        const concat_spec *sp = &specs[s];
        const int a = sp->axis < 0 ? sp->axis + sp->ndim : sp->axis;
        dc_tensor *x[3];
        double *xv[3];
        int64_t yshape[3], want_checked = 0;
        memcpy(yshape, sp->shapes[0], sizeof yshape);
        yshape[a] = 0;
        for (int i = 0; i < sp->n; ++i) {
            x[i] = f64_random(ctx, sp->ndim, sp->shapes[i], -1.0, 1.0, !sp->frozen[i]);
            xv[i] = test_values(x[i]);
            yshape[a] += sp->shapes[i][a];
            if (!sp->frozen[i])
                want_checked += shape_numel(sp->ndim, sp->shapes[i]);
        }
        concat_case k = {sp->n, sp->axis, f64_random(ctx, sp->ndim, yshape, -1.0, 1.0, false)};
        char what[64];
        snprintf(what, sizeof what, "concat of %d on axis %d (rank %d)", sp->n, sp->axis, sp->ndim);
        gradcheck_ok(ctx, what, concat_loss, &k, sp->n, x, want_checked);

        dc_tape *tape = dc_tape_new(ctx);
        for (int i = 0; i < sp->n; ++i)
            dc_tensor_zero_grad(x[i]);
        dc_tensor *y = dc_op_concat(tape, sp->n, x, sp->axis);
        TEST_NONNULL(ctx, y);
        expect_shape(y, sp->ndim, yshape, what);
        TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, y, k.w)));
        double *yv = test_values(y), *wv = test_values(k.w), *gv[3] = {NULL, NULL, NULL};
        for (int i = 0; i < sp->n; ++i) {
            if (sp->frozen[i]) {
                if (dc_tensor_grad(x[i]))
                    fail_msg("%s: input %d requires no gradient but got one", what, i);
            } else {
                gv[i] = grad_values(ctx, x[i], what);
            }
        }
        for (int64_t e = 0; e < shape_numel(sp->ndim, yshape); ++e) {
            int64_t c[3] = {0, 0, 0};
            unravel(e, sp->ndim, yshape, c);
            int p = 0;
            while (c[a] >= sp->shapes[p][a]) {
                c[a] -= sp->shapes[p][a];
                ++p;
            }
            const int64_t j = ravel(sp->ndim, sp->shapes[p], c);
            if (yv[e] != xv[p][j])
                fail_msg("%s: output %lld is %.17g, expected input %d element %lld = %.17g", what, (long long)e, yv[e],
                         p, (long long)j, xv[p][j]);
            if (gv[p] && gv[p][j] != wv[e])
                fail_msg("%s: gradient of input %d element %lld is %.17g, expected w[%lld] = %.17g", what, p,
                         (long long)j, gv[p][j], (long long)e, wv[e]);
        }
        free(yv);
        free(wv);
        for (int i = 0; i < sp->n; ++i) {
            free(gv[i]);
            free(xv[i]);
            dc_tensor_free(x[i]);
        }
        dc_tape_free(tape);
        dc_tensor_free(k.w);
    }
    dc_ctx_free(ctx);
}

/* Concat of views of one tensor (the halves swapped) and of a tensor with
 * itself: every contribution reaches the parent. */
typedef struct concat_views_case {
    bool self; /* concat(x, x) on axis 0, else the column halves swapped */
    dc_tensor *w;
} concat_views_case;

static dc_tensor *concat_views_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const concat_views_case *k = user;
    dc_tensor *parts[2];
    if (k->self) {
        parts[0] = x[0];
        parts[1] = x[0];
        return weighted_sum(tape, dc_op_concat(tape, 2, parts, 0), k->w);
    }
    parts[0] = dc_op_slice(tape, x[0], 1, 2, 2);
    parts[1] = dc_op_slice(tape, x[0], 1, 0, 2);
    return weighted_sum(tape, dc_op_concat(tape, 2, parts, 1), k->w);
}

static void test_concat_views(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t xshape[2] = {3, 4}, selfshape[2] = {6, 4};
    dc_tensor *x = f64_random(ctx, 2, xshape, -1.0, 1.0, true);
    for (int self = 0; self < 2; ++self) {
        concat_views_case k = {self, f64_random(ctx, 2, self ? selfshape : xshape, -1.0, 1.0, false)};
        const char *what = self ? "concat(x, x)" : "concat of swapped halves of x";
        gradcheck_ok(ctx, what, concat_views_loss, &k, 1, &x, 12);
        backward_once(ctx, concat_views_loss, &k, 1, &x, true);
        double *g = grad_values(ctx, x, what), *wv = test_values(k.w), want[12];
        for (int64_t r = 0; r < 3; ++r)
            for (int64_t j = 0; j < 4; ++j)
                want[r * 4 + j] = self ? wv[r * 4 + j] + wv[(r + 3) * 4 + j] : wv[r * 4 + (j + 2) % 4];
        test_assert_close(g, want, 12, 0, 0, what);
        free(g);
        free(wv);
        dc_tensor_free(k.w);
    }
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* ---- embedding ---- */

typedef struct emb_case {
    dc_tensor *ids, *w;
} emb_case;

static dc_tensor *emb_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const emb_case *k = user;
    return weighted_sum(tape, dc_op_embedding(tape, x[0], k->ids), k->w);
}

/* The table's gradient summed in id order, as the op promises (exactly). */
static void emb_reference_grad(const double *ids, int64_t n, const double *w, int64_t rows, int64_t width, double *out)
{
    for (int64_t e = 0; e < rows * width; ++e)
        out[e] = 0.0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < width; ++j)
            out[(int64_t)ids[i] * width + j] += w[i * width + j];
}

static void test_embedding_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t v = 7, width = 5;
    const int64_t tshape[2] = {v, width};
    dc_tensor *table = f64_random(ctx, 2, tshape, -1.0, 1.0, true);
    double *tv = test_values(table);
    const double ids_n[10] = {3, 1, 3, 0, 5, 3, 1, 0, 5, 3};        /* rows 2, 4, 6 never picked */
    const double ids_tb[12] = {6, 0, 6, 1, 1, 1, 6, 0, 0, 6, 1, 1}; /* rows 2..5 never picked */
    const int64_t shape_n[1] = {10}, shape_tb[2] = {3, 4};
    for (int form = 0; form < 2; ++form) {
        const int ndim = form ? 2 : 1;
        const int64_t *ishape = form ? shape_tb : shape_n;
        const double *ids = form ? ids_tb : ids_n;
        const int64_t n = form ? 12 : 10;
        int64_t yshape[3] = {ishape[0], form ? ishape[1] : width, width};
        emb_case k;
        k.ids = test_tensor(ctx, DC_F64, ndim, ishape, ids);
        k.w = f64_random(ctx, ndim + 1, yshape, -1.0, 1.0, false);
        const char *what = form ? "embedding with ids [T, B]" : "embedding with ids [N]";
        gradcheck_ok(ctx, what, emb_loss, &k, 1, &table, v * width);

        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor_zero_grad(table);
        dc_tensor *y = dc_op_embedding(tape, table, k.ids);
        TEST_NONNULL(ctx, y);
        expect_shape(y, ndim + 1, yshape, what);
        TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, y, k.w)));
        double *yv = test_values(y), *wv = test_values(k.w), *gv = grad_values(ctx, table, what);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < width; ++j)
                if (yv[i * width + j] != tv[(int64_t)ids[i] * width + j])
                    fail_msg("%s: output [%lld, %lld] is %.17g, expected table[%g, %lld] = %.17g", what, (long long)i,
                             (long long)j, yv[i * width + j], ids[i], (long long)j, tv[(int64_t)ids[i] * width + j]);
        double want[35];
        emb_reference_grad(ids, n, wv, v, width, want);
        test_assert_close(gv, want, v * width, 0, 0, "table gradient (sum in id order)");
        for (int64_t r = 0; r < v; ++r) {
            bool picked = false;
            for (int64_t i = 0; i < n; ++i)
                picked = picked || (int64_t)ids[i] == r;
            for (int64_t j = 0; j < width; ++j)
                if (picked == (gv[r * width + j] == 0.0))
                    fail_msg("%s: gradient of table row %lld (%s) is %.17g", what, (long long)r,
                             picked ? "picked" : "never picked, expected exactly 0", gv[r * width + j]);
        }
        free(yv);
        free(wv);
        free(gv);
        dc_tape_free(tape);
        dc_tensor_free(k.ids);
        dc_tensor_free(k.w);
    }
    free(tv);
    dc_tensor_free(table);
    dc_ctx_free(ctx);
}

/* A table [50, 512] and 3000 ids: wide enough for the threaded adjoint. Two
 * passes give the same bits, equal to the sum in id order; a third pass
 * without zeroing doubles it. */
/* ids read on the host (float32 and float64): a strided view (transposed)
 * picks the rows its values name, as the same values laid out contiguously;
 * ids beyond one conversion chunk (1024) are all read, and a bad id in a
 * later chunk is reported at its flat position, strided or not. */
static void test_embedding_ids_strided_and_long(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t tshape[2] = {5, 3}, rshape[2] = {2, 3}, tview[2] = {3, 2}, lshape[1] = {2500};
    const double raw[6] = {4, 0, 2, 1, 3, 4}; /* [2, 3]; its transpose [3, 2] is {4, 1, 0, 3, 2, 4} */
    const double flat[6] = {4, 1, 0, 3, 2, 4};
    double *lng = malloc(2500 * sizeof *lng);
    assert_non_null(lng);
    for (int64_t i = 0; i < 2500; ++i)
        lng[i] = (double)(i * 7 % 5);
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        dc_tensor *table = test_random(ctx, dtype, 2, tshape, -1.0, 1.0);
        dc_tensor *ids = test_tensor(ctx, dtype, 2, rshape, raw);
        dc_tensor *dense = test_tensor(ctx, dtype, 2, tview, flat);
        dc_tensor *longer = test_tensor(ctx, dtype, 1, lshape, lng);
        dc_tape *tape = dc_tape_new(ctx);
        TEST_NONNULL(ctx, tape);
        dc_tensor *view = dc_op_transpose(tape, ids, 0, 1);
        TEST_NONNULL(ctx, view);
        dc_tensor *a = dc_op_embedding(tape, table, view), *b = dc_op_embedding(tape, table, dense);
        dc_tensor *c = dc_op_embedding(tape, table, longer);
        TEST_NONNULL(ctx, a);
        TEST_NONNULL(ctx, b);
        TEST_NONNULL(ctx, c);
        double *av = test_values(a), *bv = test_values(b), *cv = test_values(c), *tv = test_values(table);
        test_assert_close(av, bv, 18, 0, 0, "embedding with transposed ids");
        for (int64_t i = 0; i < 2500; ++i)
            for (int64_t k = 0; k < 3; ++k)
                if (cv[i * 3 + k] != tv[(int64_t)lng[i] * 3 + k])
                    fail_msg("embedding %s with 2500 ids: row %lld column %lld is %g, expected %g",
                             dc_dtype_name(dtype), (long long)i, (long long)k, cv[i * 3 + k],
                             tv[(int64_t)lng[i] * 3 + k]);
        free(av);
        free(bv);
        free(cv);
        free(tv);
        /* a bad id in the third chunk, then one in the strided view */
        lng[2100] = 5;
        dc_tensor *bad = test_tensor(ctx, dtype, 1, lshape, lng);
        lng[2100] = (double)(2100 * 7 % 5);
        EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, bad), "dc_op_embedding", "ids[2100]", "5", "0..4");
        const double raw_bad[6] = {4, 0, 2, 1, 3.5, 4}; /* transposed: flat position 3 */
        dc_tensor *ids_bad = test_tensor(ctx, dtype, 2, rshape, raw_bad);
        dc_tensor *view_bad = dc_op_transpose(tape, ids_bad, 0, 1);
        TEST_NONNULL(ctx, view_bad);
        EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, view_bad), "dc_op_embedding", "ids[3]", "3.5");
        dc_tape_free(tape);
        dc_tensor *frees[] = {table, ids, dense, longer, bad, ids_bad};
        for (size_t i = 0; i < sizeof frees / sizeof frees[0]; ++i)
            dc_tensor_free(frees[i]);
    }
    free(lng);
    dc_ctx_free(ctx);
}

static void test_embedding_deterministic(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx_threads(4, 3);
    const int64_t rows = 50, width = 512, n = 3000;
    double *ids = malloc((size_t)n * sizeof *ids);
    assert_non_null(ids);
    for (int64_t i = 0; i < n; ++i)
        ids[i] = (double)rng_below(rows - 2); /* the last two rows are never picked */
    const int64_t tshape[2] = {rows, width}, ishape[1] = {n}, yshape[2] = {n, width};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        dc_tensor *table = test_random(ctx, dtype, 2, tshape, -1.0, 1.0);
        TEST_OK(ctx, dc_tensor_set_requires_grad(table, true));
        emb_case k = {test_tensor(ctx, dtype, 1, ishape, ids), test_random(ctx, dtype, 2, yshape, -1.0, 1.0)};
        size_t nb[3];
        unsigned char *runs[3];
        for (int run = 0; run < 3; ++run) {
            backward_once(ctx, emb_loss, &k, 1, &table, run < 2);
            const dc_tensor *g = dc_tensor_grad(table);
            if (!g)
                fail_msg("embedding %s: no table gradient after pass %d", dc_dtype_name(dtype), run + 1);
            runs[run] = tensor_bytes(ctx, g, &nb[run]);
        }
        if (nb[0] != nb[1] || memcmp(runs[0], runs[1], nb[0]) != 0)
            fail_msg("embedding %s with %d threads: two backward passes gave different table gradients",
                     dc_dtype_name(dtype), dc_ctx_num_threads(ctx));
        /* the sum in id order, in the table's precision */
        double *wv = test_values(k.w);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < width; ++j) {
                double want64 = 0.0, got;
                float want32 = 0.0f;
                for (int64_t i = 0; i < n; ++i)
                    if ((int64_t)ids[i] == r) {
                        want64 += wv[i * width + j];
                        want32 += (float)wv[i * width + j];
                    }
                const double want = dt ? want64 : (double)want32;
                if (dt) {
                    memcpy(&got, runs[0] + (size_t)(r * width + j) * 8, 8);
                } else {
                    float f;
                    memcpy(&f, runs[0] + (size_t)(r * width + j) * 4, 4);
                    got = f;
                }
                if (got != want)
                    fail_msg("embedding %s: gradient [%lld, %lld] is %.17g, expected the sum in id order %.17g",
                             dc_dtype_name(dtype), (long long)r, (long long)j, got, want);
                double third;
                if (dt) {
                    memcpy(&third, runs[2] + (size_t)(r * width + j) * 8, 8);
                } else {
                    float f;
                    memcpy(&f, runs[2] + (size_t)(r * width + j) * 4, 4);
                    third = f;
                }
                if (!(fabs(third - 2 * want) <= (dt ? 1e-12 : 1e-4)))
                    fail_msg("embedding %s: gradient [%lld, %lld] after a pass without zeroing is %.17g, "
                             "expected %.17g",
                             dc_dtype_name(dtype), (long long)r, (long long)j, third, 2 * want);
            }
        free(wv);
        for (int run = 0; run < 3; ++run)
            free(runs[run]);
        dc_tensor_free(k.ids);
        dc_tensor_free(k.w);
        dc_tensor_free(table);
    }
    free(ids);
    dc_ctx_free(ctx);
}

/* ---- cross entropy ---- */

typedef struct ce_case {
    dc_tensor *targets, *w; /* w: a scalar weight */
    dc_tensor *targets2;    /* if not NULL, + cross_entropy(x, targets2): the gradient accumulates */
    bool transposed;        /* the input is [C, N]; its transpose (a strided view) is the logits */
    bool sliced;            /* the input is [N, C + 3]; its columns 1..C are the logits */
} ce_case;

static dc_tensor *ce_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const ce_case *k = user;
    dc_tensor *logits = k->transposed ? dc_op_transpose(tape, x[0], 0, 1)
                        : k->sliced   ? dc_op_slice(tape, x[0], 1, 1, dc_tensor_dim(x[0], 1) - 3)
                                      : x[0];
    dc_tensor *loss = dc_op_mul(tape, dc_op_cross_entropy(tape, logits, k->targets), k->w);
    return k->targets2 ? dc_op_add(tape, loss, dc_op_cross_entropy(tape, logits, k->targets2)) : loss;
}

/* Mean of lse - l[target] in long double, and the gradient of w * that. */
static double ce_reference(const double *l, const double *t, int64_t n, int64_t c, double w, double *grad)
{
    long double total = 0;
    for (int64_t r = 0; r < n; ++r) {
        const double *row = l + r * c;
        long double m = row[0], s = 0;
        for (int64_t k = 1; k < c; ++k)
            m = row[k] > m ? row[k] : m;
        for (int64_t k = 0; k < c; ++k)
            s += expl((long double)row[k] - m);
        /* m + log s would round to m at logits of 1e300, even in long double */
        const long double ls = logl(s);
        total += (m - row[(int64_t)t[r]]) + ls;
        for (int64_t k = 0; grad && k < c; ++k)
            grad[r * c + k] = (double)((long double)w / n *
                                       (expl(((long double)row[k] - m) - ls) - (k == (int64_t)t[r] ? 1 : 0)));
    }
    return (double)(total / n);
}

static void test_cross_entropy_gradcheck(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 6, c = 5;
    const int64_t lshape[2] = {n, c}, tshape[1] = {n};
    const double targets[6] = {0, 4, 2, 2, 1, 3};
    dc_tensor *logits = f64_random(ctx, 2, lshape, -3.0, 3.0, true);
    ce_case k = {test_tensor(ctx, DC_F64, 1, tshape, targets), NULL, NULL, false, false};
    const double wval = 0.7;
    k.w = test_tensor(ctx, DC_F64, 0, NULL, &wval);
    gradcheck_ok(ctx, "cross entropy", ce_loss, &k, 1, &logits, n * c);

    /* used twice (the gradient accumulates), and of a strided view */
    const double targets2[6] = {4, 4, 0, 1, 1, 2};
    k.targets2 = test_tensor(ctx, DC_F64, 1, tshape, targets2);
    gradcheck_ok(ctx, "cross entropy used twice", ce_loss, &k, 1, &logits, n * c);
    const int64_t lshape_t[2] = {c, n};
    dc_tensor *logits_t = f64_random(ctx, 2, lshape_t, -3.0, 3.0, true);
    k.transposed = true;
    gradcheck_ok(ctx, "cross entropy of transposed logits", ce_loss, &k, 1, &logits_t, n * c);
    dc_tensor_free(logits_t);
    /* a slice of a wider tensor: the gradient is a view into that tensor's,
     * whose rows are longer than the logits' */
    const int64_t lshape_s[2] = {n, c + 3};
    dc_tensor *logits_s = f64_random(ctx, 2, lshape_s, -3.0, 3.0, true);
    k.transposed = false;
    k.sliced = true;
    gradcheck_ok(ctx, "cross entropy of sliced logits", ce_loss, &k, 1, &logits_s, n * (c + 3));
    dc_tensor_free(logits_s);
    dc_tensor_free(k.targets2);
    k.targets2 = NULL;
    k.sliced = false;

    double *lv = test_values(logits), want_grad[30];
    const double want = ce_reference(lv, targets, n, c, wval, want_grad);
    const double got = backward_once(ctx, ce_loss, &k, 1, &logits, true) / wval;
    test_assert_close(&got, &want, 1, 0, 1e-14, "cross entropy against log-sum-exp in long double");
    double *g = grad_values(ctx, logits, "cross entropy");
    test_assert_close(g, want_grad, n * c, 1e-16, 1e-12, "cross entropy gradient against softmax - one-hot");
    free(g);
    free(lv);
    dc_tensor_free(k.targets);
    dc_tensor_free(k.w);
    dc_tensor_free(logits);
    dc_ctx_free(ctx);
}

/* Logits of +-1000 give finite losses and gradients equal to the reference,
 * in float64 and float32; one class gives a loss of exactly 0. */
static void test_cross_entropy_large_logits(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 4, c = 5;
    const double logits[20] = {1000,  -1000, 0,     999.5, -999,  /* target -1000: loss about 2000 */
                               -1000, -1000, -1000, -1000, -1000, /* log 5 */
                               1000,  1000,  1000,  1000,  1000,  /* log 5 */
                               -1000, 1000,  -1000, 1000,  0};
    const double targets[4] = {1, 2, 0, 3};
    const int64_t lshape[2] = {n, c}, tshape[1] = {n};
    double want_grad[20];
    const double want = ce_reference(logits, targets, n, c, 1.0, want_grad);
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        dc_tensor *l = test_tensor(ctx, dtype, 2, lshape, logits);
        TEST_OK(ctx, dc_tensor_set_requires_grad(l, true));
        dc_tensor *t = test_tensor(ctx, dtype, 1, tshape, targets);
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *loss = dc_op_cross_entropy(tape, l, t);
        TEST_NONNULL(ctx, loss);
        assert_int_equal(dc_tensor_ndim(loss), 0);
        double got;
        TEST_OK(ctx, dc_tensor_item(loss, &got));
        if (!isfinite(got))
            fail_msg("cross entropy %s of logits +-1000 is %g, expected %.17g", dc_dtype_name(dtype), got, want);
        test_assert_close(&got, &want, 1, 0, dt ? 1e-14 : 1e-6, "cross entropy of logits +-1000");
        TEST_OK(ctx, dc_backward(tape, loss));
        double *g = grad_values(ctx, l, "cross entropy of logits +-1000");
        for (int e = 0; e < 20; ++e)
            if (!isfinite(g[e]))
                fail_msg("cross entropy %s: gradient %d of logits +-1000 is %g", dc_dtype_name(dtype), e, g[e]);
        /* (float32 precision at large logits: test_cross_entropy_f32_gradient_precision) */
        test_assert_close(g, want_grad, 20, dt ? 1e-15 : 1e-6, dt ? 1e-12 : 1e-4,
                          dt ? "f64 gradient of logits +-1000" : "f32 gradient of logits +-1000");
        free(g);
        dc_tape_free(tape);
        dc_tensor_free(t);
        dc_tensor_free(l);
    }
    /* a single class: log softmax is 0 */
    const int64_t one[2] = {2, 1}, two[1] = {2};
    const double lone[2] = {5.0, -700.0}, tone[2] = {0, 0};
    dc_tensor *l = test_tensor(ctx, DC_F64, 2, one, lone), *t = test_tensor(ctx, DC_F64, 1, two, tone);
    dc_tape *tape = dc_tape_new(ctx);
    double got = -1;
    TEST_OK(ctx, dc_tensor_item(dc_op_cross_entropy(tape, l, t), &got));
    if (got != 0.0)
        fail_msg("cross entropy with one class is %.17g, expected 0", got);
    dc_tape_free(tape);
    dc_tensor_free(l);
    dc_tensor_free(t);
    dc_ctx_free(ctx);
}

/* In float32 the gradient keeps float precision when the logits are large:
 * softmax = exp(l - lse) loses it if lse (about max(l)) is rounded to float
 * first, by up to half an ulp of max(l): 3e-5 relative at 1000, 1e-3 at 2e4. */
static void test_cross_entropy_f32_gradient_precision(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 3, c = 4;
    const double logits[12] = {
        1000, 999.5, 998, 1000.25, -5000, -5001, -4999.5, -5000.75, 20000.5, 20001, 20000, 19999.25,
    };
    const double targets[3] = {1, 0, 3};
    const int64_t lshape[2] = {n, c}, tshape[1] = {n};
    double want_grad[12];
    ce_reference(logits, targets, n, c, 1.0, want_grad);
    dc_tensor *l = test_tensor(ctx, DC_F32, 2, lshape, logits);
    TEST_OK(ctx, dc_tensor_set_requires_grad(l, true));
    dc_tensor *t = test_tensor(ctx, DC_F32, 1, tshape, targets);
    dc_tape *tape = dc_tape_new(ctx);
    TEST_OK(ctx, dc_backward(tape, dc_op_cross_entropy(tape, l, t)));
    double *g = grad_values(ctx, l, "f32 cross entropy");
    for (int64_t r = 0; r < n; ++r)
        for (int64_t k = 0; k < c; ++k) {
            const double got = g[r * c + k], want = want_grad[r * c + k];
            if (!(fabs(got - want) <= 1e-8 + 1e-6 * fabs(want)))
                fail_msg("f32 cross entropy: gradient [%lld, %lld] (logit %g) is %.9g, expected %.9g "
                         "(relative error %.2g; float32 allows about 1e-7)",
                         (long long)r, (long long)k, logits[r * c + k], got, want, fabs(got - want) / fabs(want));
        }
    free(g);
    dc_tape_free(tape);
    dc_tensor_free(t);
    dc_tensor_free(l);
    dc_ctx_free(ctx);
}

/* Logits so large that their maximum plus the log of the sum of terms
 * rounds to the maximum, even in double: two tied at 1e30 (float32) or
 * 1e300 (float64) and one at 0, the target one of the tied (loss log 2,
 * gradient -1/2 and 1/2 over the rows), and a row of 1e17 + (0, 16, 32)
 * (exact in double). Before the loss was taken as (m - l_t) + log(sum), it
 * came out 0 there and the target's partial 0. */
static void test_cross_entropy_tied_huge_logits(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t lshape[2] = {2, 3}, tshape[1] = {2};
    const double targets[2] = {0, 2};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        const double big = dt ? 1e300 : 1e30;
        /* row 1 in float32: 1e30 less its small differences is 1e30 (three ties) */
        const double logits[6] = {big, big, 0, dt ? 1e17 : big, dt ? 1e17 + 16 : big, dt ? 1e17 + 32 : big};
        double want_grad[6];
        const double want = ce_reference(logits, targets, 2, 3, 1.0, want_grad);
        dc_tensor *l = test_tensor(ctx, dtype, 2, lshape, logits), *t = test_tensor(ctx, dtype, 1, tshape, targets);
        TEST_OK(ctx, dc_tensor_set_requires_grad(l, true));
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *loss = dc_op_cross_entropy(tape, l, t);
        double got;
        TEST_OK(ctx, dc_tensor_item(loss, &got));
        test_assert_close(&got, &want, 1, 0, dt ? 1e-14 : 1e-6, "cross entropy of tied huge logits");
        TEST_OK(ctx, dc_backward(tape, loss));
        double *g = grad_values(ctx, l, "cross entropy of tied huge logits");
        test_assert_close(g, want_grad, 6, 1e-12, dt ? 1e-12 : 1e-6, "gradient of tied huge logits");
        free(g);
        dc_tape_free(tape);
        dc_tensor_free(t);
        dc_tensor_free(l);
    }
    dc_ctx_free(ctx);
}

/* ---- hard sigmoid and the straight-through step ---- */

typedef struct gate_case {
    double slope;
    dc_tensor *w;
} gate_case;

static dc_tensor *hard_sigmoid_loss(dc_tape *tape, dc_tensor *const *x, void *user)
{
    const gate_case *k = user;
    return weighted_sum(tape, dc_op_hard_sigmoid(tape, x[0], k->slope), k->w);
}

static double hard_sigmoid_ref(double x, double slope)
{
    const double y = (slope * x + 1) * 0.5;
    return y < 0 ? 0 : y > 1 ? 1 : y;
}

/* Values in [-2, 2] kept 1e-3 away from the kinks at +-1/slope, with some in
 * each of the three pieces. */
static dc_tensor *hard_sigmoid_inputs(dc_ctx *ctx, double slope)
{
    const int64_t shape[2] = {4, 6};
    dc_tensor *x = f64_random(ctx, 2, shape, -2.0, 2.0, true);
    for (int64_t e = 0; e < 24; ++e) {
        double v;
        TEST_OK(ctx, dc_tensor_get(x, e, &v));
        if (e < 3)
            v = (e == 0 ? 0.3 : e == 1 ? 3.0 : -3.0) / slope; /* inside, above, below */
        if (fabs(fabs(v) - 1 / slope) < 1e-3)
            v += 0.01;
        TEST_OK(ctx, dc_tensor_set(x, e, v));
    }
    return x;
}

static void test_hard_sigmoid(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double slopes[2] = {1.0, 3.5};
    const int64_t shape[2] = {4, 6};
    for (int s = 0; s < 2; ++s) {
        gate_case k = {slopes[s], f64_random(ctx, 2, shape, -1.0, 1.0, false)};
        dc_tensor *x = hard_sigmoid_inputs(ctx, k.slope);
        char what[64];
        snprintf(what, sizeof what, "hard sigmoid with slope %g", k.slope);
        gradcheck_ok(ctx, what, hard_sigmoid_loss, &k, 1, &x, 24);

        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor_zero_grad(x);
        dc_tensor *y = dc_op_hard_sigmoid(tape, x, k.slope);
        TEST_NONNULL(ctx, y);
        TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, y, k.w)));
        double *xv = test_values(x), *yv = test_values(y), *wv = test_values(k.w), *gv = grad_values(ctx, x, what);
        int inside = 0, outside = 0;
        for (int e = 0; e < 24; ++e) {
            const double want = hard_sigmoid_ref(xv[e], k.slope);
            const bool in = want > 0 && want < 1;
            inside += in;
            outside += !in;
            const double want_g = in ? wv[e] * (k.slope * 0.5) : 0.0;
            if (fabs(yv[e] - want) > 1e-15)
                fail_msg("%s: f(%.17g) is %.17g, expected %.17g", what, xv[e], yv[e], want);
            if (gv[e] != want_g)
                fail_msg("%s: gradient at %.17g is %.17g, expected %.17g", what, xv[e], gv[e], want_g);
        }
        if (!inside || !outside)
            fail_msg("%s: %d inputs inside and %d outside (0, 1); expected both", what, inside, outside);
        free(xv);
        free(yv);
        free(wv);
        free(gv);
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_tensor_free(k.w);
    }
    /* at the kinks of slope 1 the value is exactly 0 and 1 */
    const int64_t two[1] = {2};
    const double kinks[2] = {-1.0, 1.0};
    dc_tensor *x = test_tensor(ctx, DC_F64, 1, two, kinks);
    dc_tape *tape = dc_tape_new(ctx);
    double *yv = test_values(dc_op_hard_sigmoid(tape, x, 1.0));
    const double want[2] = {0.0, 1.0};
    test_assert_close(yv, want, 2, 0, 0, "hard sigmoid at its kinks");
    free(yv);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_ctx_free(ctx);
}

/* Forward: x > threshold (strictly); backward: the gradient unchanged. */
static void test_step_st(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const double xs[9] = {-1.0, 0.0, 0.5, 0.5000001, 0.4999999, 2.0, -0.0, 1e300, -1e300};
    const double ws[9] = {0.25, -1.5, 3.0, 0.125, -0.75, 1e-3, 2.5, -4.0, 7.0};
    const int64_t shape[1] = {9};
    const struct {
        double threshold;
        double want[9];
    } cases[] = {
        {0.5, {0, 0, 0, 1, 0, 1, 0, 1, 0}},
        {-0.25, {0, 1, 1, 1, 1, 1, 1, 1, 0}},
        {0.0, {0, 0, 1, 1, 1, 1, 0, 1, 0}},
    };
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            dc_tensor *x = test_tensor(ctx, dtype, 1, shape, xs), *w = test_tensor(ctx, dtype, 1, shape, ws);
            TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *y = dc_op_step_st(tape, x, cases[i].threshold);
            TEST_NONNULL(ctx, y);
            double *yv = test_values(y);
            for (int e = 0; e < 9; ++e)
                if (yv[e] != cases[i].want[e])
                    fail_msg("step %s at threshold %g: step(%.17g) is %g, expected %g", dc_dtype_name(dtype),
                             cases[i].threshold, xs[e], yv[e], cases[i].want[e]);
            /* d/dx sum(step(x) * w) = w, and 3 w through step(x) * 3 */
            TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, dc_op_affine(tape, y, 3.0, 1.0), w)));
            double *gv = grad_values(ctx, x, "step"), want_g[9];
            for (int e = 0; e < 9; ++e)
                want_g[e] = dt ? 3.0 * ws[e] : (double)((float)ws[e] * 3.0f);
            test_assert_close(gv, want_g, 9, 0, 0, "straight-through gradient of the step");
            free(yv);
            free(gv);
            dc_tape_free(tape);
            dc_tensor_free(x);
            dc_tensor_free(w);
        }
    }
    dc_ctx_free(ctx);
}

/* ---- float32 against float64 ---- */

/* Each op on the same values in both precisions. */
static void test_f32_matches_f64(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t xshape[2] = {6, 10}, bshape[2] = {6, 3}, tshape[2] = {9, 16}, ishape[2] = {4, 5}, nshape[1] = {6};
    dc_tensor *x64 = f64_random(ctx, 2, xshape, -4.0, 4.0, false), *b64 = f64_random(ctx, 2, bshape, -4, 4, false);
    dc_tensor *t64 = f64_random(ctx, 2, tshape, -1.0, 1.0, false);
    round_to_float(ctx, x64);
    round_to_float(ctx, b64);
    round_to_float(ctx, t64);
    double ids[20], targets[6];
    for (int i = 0; i < 20; ++i)
        ids[i] = (double)rng_below(9);
    for (int i = 0; i < 6; ++i)
        targets[i] = (double)rng_below(10);
    dc_tensor *x32 = to_f32(ctx, x64), *b32 = to_f32(ctx, b64), *t32 = to_f32(ctx, t64);
    dc_tensor *i64 = test_tensor(ctx, DC_F64, 2, ishape, ids), *i32 = test_tensor(ctx, DC_F32, 2, ishape, ids);
    dc_tensor *c64 = test_tensor(ctx, DC_F64, 1, nshape, targets), *c32 = test_tensor(ctx, DC_F32, 1, nshape, targets);
    dc_tape *tape = dc_tape_new(ctx);
    for (int op = 0; op < 7; ++op) {
        dc_tensor *y[2];
        for (int dt = 0; dt < 2; ++dt) {
            dc_tensor *x = dt ? x64 : x32, *b = dt ? b64 : b32;
            dc_tensor *pair[2] = {x, b};
            switch (op) {
            case 0:
                y[dt] = dc_op_slice(tape, x, 1, 3, 4);
                break;
            case 1:
                y[dt] = dc_op_concat(tape, 2, pair, -1);
                break;
            case 2:
                y[dt] = dc_op_embedding(tape, dt ? t64 : t32, dt ? i64 : i32);
                break;
            case 3:
                y[dt] = dc_op_cross_entropy(tape, x, dt ? c64 : c32);
                break;
            case 4:
                y[dt] = dc_op_hard_sigmoid(tape, x, 1.0);
                break;
            case 5:
                y[dt] = dc_op_hard_sigmoid(tape, x, 3.5);
                break;
            default:
                y[dt] = dc_op_step_st(tape, x, 0.25);
                break;
            }
            TEST_NONNULL(ctx, y[dt]);
        }
        static const char *const names[7] = {"slice",          "concat",           "embedding", "cross entropy",
                                             "hard sigmoid 1", "hard sigmoid 3.5", "step"};
        assert_int_equal(dc_tensor_dtype(y[0]), DC_F32);
        assert_int_equal(dc_tensor_dtype(y[1]), DC_F64);
        assert_int_equal(dc_tensor_numel(y[0]), dc_tensor_numel(y[1]));
        double *v32 = test_values(y[0]), *v64 = test_values(y[1]);
        /* layout ops and the step are exact; the rest within float rounding */
        const bool exact = op <= 2 || op == 6;
        char what[64];
        snprintf(what, sizeof what, "%s in f32 against f64", names[op]);
        test_assert_close(v32, v64, dc_tensor_numel(y[0]), exact ? 0 : 2e-7, exact ? 0 : 1e-6, what);
        free(v32);
        free(v64);
    }
    dc_tape_free(tape);
    dc_tensor *all[10] = {x64, b64, t64, x32, b32, t32, i64, i32, c64, c32};
    for (int i = 0; i < 10; ++i)
        dc_tensor_free(all[i]);
    dc_ctx_free(ctx);
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int64_t tshape[2] = {7, 3}, four[1] = {4}, grid[2] = {2, 2};
    dc_tensor *table = f64_random(ctx, 2, tshape, -1.0, 1.0, true);

    /* embedding: out of range, negative, not an integer; the index named */
    const double too_big[4] = {0, 6, 7, 1}, negative[4] = {0, 1, 2, -1}, fraction[4] = {1, 2.5, 0, 0};
    dc_tensor *ids = test_tensor(ctx, DC_F64, 1, four, too_big);
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "dc_op_embedding", "ids[2]", "7", "0..6");
    dc_tensor_free(ids);
    ids = test_tensor(ctx, DC_F64, 1, four, negative);
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "dc_op_embedding", "ids[3]", "-1");
    dc_tensor_free(ids);
    ids = test_tensor(ctx, DC_F64, 1, four, fraction);
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "dc_op_embedding", "ids[1]", "2.5");
    dc_tensor_free(ids);
    ids = test_tensor(ctx, DC_F64, 2, grid, too_big); /* flat index of [1, 0] */
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "ids[2]", "7");
    dc_tensor_free(ids);
    ids = test_tensor(ctx, DC_F32, 1, four, negative);
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, table, ids), "dc_op_embedding", "f64", "f32");
    dc_tensor_free(ids);
    const int64_t vec[1] = {5};
    dc_tensor *flat = f64_random(ctx, 1, vec, -1.0, 1.0, false);
    ids = test_tensor(ctx, DC_F64, 1, four, fraction);
    EXPECT_OP_FAILS(ctx, dc_op_embedding(tape, flat, ids), "dc_op_embedding", "[5]");
    dc_tensor_free(ids);
    dc_tensor_free(flat);

    /* cross entropy: shapes named, targets out of range */
    const int64_t lshape[2] = {3, 4}, t2[1] = {2}, t3[1] = {3}, t31[2] = {3, 1};
    dc_tensor *logits = f64_random(ctx, 2, lshape, -1.0, 1.0, true);
    const double tv[3] = {0, 1, 2}, tbad[3] = {0, 4, 1}, tneg[3] = {-1, 0, 0}, tfrac[3] = {0, 0, 0.5};
    dc_tensor *t = test_tensor(ctx, DC_F64, 1, t2, tv);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, t), "dc_op_cross_entropy", "[3, 4]", "[2]");
    dc_tensor_free(t);
    t = test_tensor(ctx, DC_F64, 2, t31, tv);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, t), "dc_op_cross_entropy", "[3, 4]", "[3, 1]");
    dc_tensor_free(t);
    t = test_tensor(ctx, DC_F64, 1, t3, tbad);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, t), "dc_op_cross_entropy", "targets[1]", "4", "0..3");
    dc_tensor_free(t);
    t = test_tensor(ctx, DC_F64, 1, t3, tneg);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, t), "targets[0]", "-1");
    dc_tensor_free(t);
    t = test_tensor(ctx, DC_F64, 1, t3, tfrac);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, t), "targets[2]", "0.5");
    dc_tensor_free(t);
    EXPECT_OP_FAILS(ctx, dc_op_cross_entropy(tape, logits, table), "dc_op_cross_entropy", "[3, 4]", "[7, 3]");

    /* slice out of range */
    const int64_t xshape[3] = {4, 5, 6};
    dc_tensor *x = f64_random(ctx, 3, xshape, -1.0, 1.0, true);
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 3, 3), "dc_op_slice", "3..5", "[4, 5, 6]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 1, 5, 1), "dc_op_slice", "[4, 5, 6]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 0, -1, 2), "dc_op_slice", "-1", "[4, 5, 6]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 2, 0, -1), "dc_op_slice", "[4, 5, 6]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, 3, 0, 1), "dc_op_slice", "axis 3", "[4, 5, 6]");
    EXPECT_OP_FAILS(ctx, dc_op_slice(tape, x, -4, 0, 1), "dc_op_slice", "axis -4");

    /* concat: other sizes, rank, dtype, axis */
    const int64_t s23[2] = {2, 3}, s34[2] = {3, 4}, s231[3] = {2, 3, 1};
    dc_tensor *a = f64_random(ctx, 2, s23, -1, 1, true), *b = f64_random(ctx, 2, s34, -1, 1, true);
    dc_tensor *c = f64_random(ctx, 3, s231, -1, 1, true), *d = test_random(ctx, DC_F32, 2, s23, -1, 1);
    dc_tensor *ab[2] = {a, b}, *ac[2] = {a, c}, *ad[2] = {a, d}, *aab[3] = {a, a, b};
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, ab, 0), "dc_op_concat", "[2, 3]", "[3, 4]");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 3, aab, 1), "dc_op_concat", "[2, 3]", "[3, 4]", "xs[2]");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, ac, 0), "dc_op_concat", "[2, 3]", "[2, 3, 1]");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, ad, 0), "dc_op_concat", "f64", "f32");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 2, ab, 2), "dc_op_concat", "axis 2");
    EXPECT_OP_FAILS(ctx, dc_op_concat(tape, 0, ab, 0), "dc_op_concat");

    /* the tape still works after all that: d sum(slice(x) * 2) */
    dc_tape_reset(tape);
    const int64_t sl[3] = {4, 1, 6};
    dc_tensor *two = dc_tensor_new(ctx, DC_F64, 3, sl);
    TEST_NONNULL(ctx, two);
    TEST_OK(ctx, dc_tensor_fill(two, 2.0));
    dc_tensor_zero_grad(x);
    TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, dc_op_slice(tape, x, 1, 4, 1), two)));
    double *g = grad_values(ctx, x, "slice after failed calls");
    for (int64_t e = 0; e < 120; ++e)
        if (g[e] != (e % 30 / 6 == 4 ? 2.0 : 0.0))
            fail_msg("gradient %lld after failed calls is %g", (long long)e, g[e]);
    free(g);
    dc_tensor *all[9] = {table, logits, x, a, b, c, d, two, NULL};
    for (int i = 0; i < 9; ++i)
        dc_tensor_free(all[i]);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* ---- optimizers ---- */

/* loss = sum(a (w - c)^2) / 2, gradient a (w - c). */
typedef struct quad {
    dc_tensor *a, *c;
} quad;

static dc_tensor *quad_loss(dc_tape *tape, dc_tensor *const *w, void *user)
{
    const quad *q = user;
    dc_tensor *d = dc_op_sub(tape, w[0], q->c);
    return dc_op_affine(tape, dc_op_sum(tape, dc_op_mul(tape, dc_op_mul(tape, d, d), q->a), 0, NULL, false), 0.5, 0.0);
}

static void quad_make(dc_ctx *ctx, dc_dtype dtype, int64_t n, quad *q, dc_tensor **w)
{
    const int64_t shape[1] = {n};
    q->a = test_random(ctx, dtype, 1, shape, 0.5, 2.0);
    q->c = test_random(ctx, dtype, 1, shape, -1.0, 1.0);
    *w = test_random(ctx, dtype, 1, shape, -2.0, 2.0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(*w, true));
}

static void quad_free(quad *q)
{
    dc_tensor_free(q->a);
    dc_tensor_free(q->c);
}

/* Fails unless the update w_after - w_before is the expected one to within
 * atol + rtol * |update|. */
static void expect_update(const double *before, const double *after, const double *want_after, int64_t n, double atol,
                          double rtol, const char *what)
{
    for (int64_t e = 0; e < n; ++e) {
        const double got = after[e] - before[e], want = want_after[e] - before[e];
        if (!(fabs(got - want) <= atol + rtol * fabs(want)))
            fail_msg("%s: element %lld moved by %.17g, expected %.17g", what, (long long)e, got, want);
    }
}

static void test_sgd_step(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 6;
    const double momenta[2] = {0.0, 0.9};
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        for (int mi = 0; mi < 2; ++mi) {
            quad q;
            dc_tensor *w;
            quad_make(ctx, dtype, n, &q, &w);
            const double lr = 0.1, mu = momenta[mi];
            dc_optimizer *opt = dc_optimizer_sgd(ctx, 1, &w, lr, mu);
            TEST_NONNULL(ctx, opt);
            assert_true(dc_optimizer_lr(opt) == lr);
            double buf[6] = {0};
            double *av = test_values(q.a), *cv = test_values(q.c);
            char what[64];
            snprintf(what, sizeof what, "SGD %s momentum %g", dc_dtype_name(dtype), mu);
            for (int step = 1; step <= 3; ++step) {
                backward_once(ctx, quad_loss, &q, 1, &w, true);
                double *wv = test_values(w), *g = grad_values(ctx, w, what), want[6], hand[6];
                for (int64_t e = 0; e < n; ++e)
                    hand[e] = av[e] * (wv[e] - cv[e]);
                test_assert_close(g, hand, n, 1e-6, dt ? 1e-12 : 1e-5, "gradient of the quadratic");
                for (int64_t e = 0; e < n; ++e) {
                    buf[e] = mu * buf[e] + g[e];
                    want[e] = wv[e] - lr * buf[e];
                }
                TEST_OK(ctx, dc_optimizer_step(opt));
                double *after = test_values(w);
                expect_update(wv, after, want, n, dt ? 1e-15 : 1e-6, dt ? 1e-12 : 1e-5, what);
                free(wv);
                free(g);
                free(after);
            }
            /* many steps bring the loss down */
            const double first = backward_once(ctx, quad_loss, &q, 1, &w, true);
            double last = first;
            for (int step = 0; step < 150; ++step) {
                TEST_OK(ctx, dc_optimizer_step(opt));
                last = backward_once(ctx, quad_loss, &q, 1, &w, true);
            }
            if (!(last < 1e-4 * first))
                fail_msg("%s: loss %g after 150 more steps, from %g; expected below 1e-4 of it", what, last, first);
            free(av);
            free(cv);
            dc_optimizer_free(opt);
            dc_tensor_free(w);
            quad_free(&q);
        }
    }
    dc_ctx_free(ctx);
}

static void test_adam_step(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t n = 6;
    dc_adam_options configs[3] = {dc_adam_options_default(), dc_adam_options_default(), dc_adam_options_default()};
    configs[0].lr = 0.05;
    configs[1].lr = 0.05; /* large eps and other betas: their bias corrections show */
    configs[1].beta1 = 0.8;
    configs[1].beta2 = 0.99;
    configs[1].eps = 0.1;
    configs[2].lr = 0.05; /* decoupled weight decay */
    configs[2].weight_decay = 0.1;
    configs[2].eps = 1e-3;
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F64 : DC_F32;
        for (int ci = 0; ci < 3; ++ci) {
            const dc_adam_options o = configs[ci];
            quad q;
            dc_tensor *w;
            quad_make(ctx, dtype, n, &q, &w);
            double cv0;
            TEST_OK(ctx, dc_tensor_get(w, 0, &cv0));
            TEST_OK(ctx, dc_tensor_set(q.c, 0, cv0)); /* element 0 starts at its minimum: gradient 0 */
            dc_optimizer *opt = dc_optimizer_adam(ctx, 1, &w, &o);
            TEST_NONNULL(ctx, opt);
            char what[96];
            snprintf(what, sizeof what, "Adam %s betas %g %g eps %g decay %g", dc_dtype_name(dtype), o.beta1, o.beta2,
                     o.eps, o.weight_decay);
            double m[6] = {0}, v[6] = {0};
            for (int t = 1; t <= 4; ++t) {
                backward_once(ctx, quad_loss, &q, 1, &w, true);
                double *wv = test_values(w), *g = grad_values(ctx, w, what), want[6];
                for (int64_t e = 0; e < n; ++e) {
                    m[e] = o.beta1 * m[e] + (1 - o.beta1) * g[e];
                    v[e] = o.beta2 * v[e] + (1 - o.beta2) * g[e] * g[e];
                    const double mhat = m[e] / (1 - pow(o.beta1, t)), vhat = v[e] / (1 - pow(o.beta2, t));
                    want[e] = wv[e] - o.lr * mhat / (sqrt(vhat) + o.eps) - o.lr * o.weight_decay * wv[e];
                }
                TEST_OK(ctx, dc_optimizer_step(opt));
                double *after = test_values(w);
                char at[128];
                snprintf(at, sizeof at, "%s, step %d", what, t);
                expect_update(wv, after, want, n, dt ? 1e-15 : 1e-6, dt ? 1e-6 : 1e-4, at);
                free(wv);
                free(g);
                free(after);
            }
            /* many steps, the step size lowered half way */
            const double first = backward_once(ctx, quad_loss, &q, 1, &w, true);
            double last = first;
            for (int step = 0; step < 400; ++step) {
                if (step == 200) {
                    dc_optimizer_set_lr(opt, o.lr / 10);
                    assert_true(dc_optimizer_lr(opt) == o.lr / 10);
                }
                TEST_OK(ctx, dc_optimizer_step(opt));
                last = backward_once(ctx, quad_loss, &q, 1, &w, true);
            }
            const double goal = o.weight_decay > 0 ? 0.2 : 1e-3;
            if (!(last < goal * first))
                fail_msg("%s: loss %g after 400 more steps, from %g; expected below %g of it", what, last, first, goal);
            dc_optimizer_free(opt);
            dc_tensor_free(w);
            quad_free(&q);
        }
    }
    dc_ctx_free(ctx);
}

/* A parameter that no gradient reached (never, or since zero_grad) stays
 * as it is, under SGD with momentum and under Adam with weight decay. */
static void test_optimizer_skips_and_zero_grad(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    for (int kind = 0; kind < 2; ++kind) {
        quad q;
        dc_tensor *w;
        quad_make(ctx, DC_F64, 5, &q, &w);
        const int64_t shape[2] = {2, 3};
        dc_tensor *unused = f64_random(ctx, 2, shape, -1.0, 1.0, true);
        dc_tensor *params[2] = {w, unused};
        dc_adam_options o = dc_adam_options_default();
        o.lr = 0.1;
        o.weight_decay = 0.5;
        dc_optimizer *opt = kind ? dc_optimizer_adam(ctx, 2, params, &o) : dc_optimizer_sgd(ctx, 2, params, 0.1, 0.9);
        TEST_NONNULL(ctx, opt);
        const char *what = kind ? "Adam" : "SGD";
        dc_tensor *unused_before = f64_random(ctx, 2, shape, 0, 1, false);
        TEST_OK(ctx, dc_tensor_copy(unused_before, unused));
        dc_tensor *w_before = f64_random(ctx, 1, (const int64_t[1]){5}, 0, 1, false);
        for (int step = 0; step < 3; ++step) {
            backward_once(ctx, quad_loss, &q, 1, &w, true);
            TEST_OK(ctx, dc_tensor_copy(w_before, w));
            TEST_OK(ctx, dc_optimizer_step(opt));
            if (dc_tensor_grad(unused))
                fail_msg("%s: a parameter outside the loss has a gradient", what);
            expect_same_bytes(ctx, unused, unused_before, "a parameter without a gradient after a step");
            double *a = test_values(w), *b = test_values(w_before);
            bool moved = false;
            for (int e = 0; e < 5; ++e)
                moved = moved || a[e] != b[e];
            if (!moved)
                fail_msg("%s: the parameter with a gradient did not move in step %d", what, step + 1);
            free(a);
            free(b);
        }
        /* zero_grad: no gradient, so a step moves nothing (not even momentum
         * or weight decay); the next backward starts from zero */
        dc_optimizer_zero_grad(opt);
        if (dc_tensor_grad(w) || dc_tensor_grad(unused))
            fail_msg("%s: a gradient is left after dc_optimizer_zero_grad", what);
        TEST_OK(ctx, dc_tensor_copy(w_before, w));
        TEST_OK(ctx, dc_optimizer_step(opt));
        expect_same_bytes(ctx, w, w_before, "a parameter after a step with zeroed gradients");
        backward_once(ctx, quad_loss, &q, 1, &w, false);
        double *g = grad_values(ctx, w, what), *wv = test_values(w), *av = test_values(q.a), *cv = test_values(q.c);
        double hand[5];
        for (int e = 0; e < 5; ++e)
            hand[e] = av[e] * (wv[e] - cv[e]);
        test_assert_close(g, hand, 5, 1e-15, 1e-12, "gradient after dc_optimizer_zero_grad (not accumulated)");
        free(g);
        free(wv);
        free(av);
        free(cv);
        dc_optimizer_free(opt);
        dc_tensor_free(unused_before);
        dc_tensor_free(w_before);
        dc_tensor_free(unused);
        dc_tensor_free(w);
        quad_free(&q);
    }
    dc_ctx_free(ctx);
}

/* A parameter that first gets a gradient at step 3 takes a first Adam step:
 * its moments have seen one gradient, so its bias correction is that of
 * t = 1 (as in PyTorch, where the step count is per parameter), a move of
 * lr * g / (|g| + eps), about lr. */
static void test_adam_late_parameter(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    quad q, q_late;
    dc_tensor *w, *late;
    quad_make(ctx, DC_F64, 4, &q, &w);
    quad_make(ctx, DC_F64, 4, &q_late, &late);
    dc_tensor *params[2] = {w, late};
    dc_adam_options o = dc_adam_options_default();
    o.lr = 0.05;
    dc_optimizer *opt = dc_optimizer_adam(ctx, 2, params, &o);
    TEST_NONNULL(ctx, opt);
    for (int step = 1; step <= 2; ++step) {
        backward_once(ctx, quad_loss, &q, 1, &w, true);
        dc_tensor_zero_grad(late);
        TEST_OK(ctx, dc_optimizer_step(opt));
    }
    backward_once(ctx, quad_loss, &q, 1, &w, true);
    backward_once(ctx, quad_loss, &q_late, 1, &late, true);
    double *before = test_values(late), *g = grad_values(ctx, late, "late parameter"), want[4];
    for (int e = 0; e < 4; ++e)
        want[e] = before[e] - o.lr * g[e] / (fabs(g[e]) + o.eps);
    TEST_OK(ctx, dc_optimizer_step(opt));
    double *after = test_values(late);
    expect_update(before, after, want, 4, 1e-15, 1e-6, "Adam: first step of a parameter without gradients before");
    free(before);
    free(g);
    free(after);
    dc_optimizer_free(opt);
    dc_tensor_free(w);
    dc_tensor_free(late);
    quad_free(&q);
    quad_free(&q_late);
    dc_ctx_free(ctx);
}

static void test_optimizer_bad_options(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t shape[1] = {3};
    dc_tensor *w = f64_random(ctx, 1, shape, -1.0, 1.0, true);
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &w, -0.1, 0.0), "dc_optimizer_sgd", "-0.1");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &w, 0.1, 1.0), "dc_optimizer_sgd", "momentum");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &w, NAN, 0.0), "dc_optimizer_sgd");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 1, &w, INFINITY, 0.0), "dc_optimizer_sgd", "inf");
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 0, &w, 0.1, 0.0), "dc_optimizer_sgd");
    /* one parameter twice would be updated twice a step, or count twice in a norm */
    dc_tensor *twice[3] = {w, f64_random(ctx, 1, shape, -1.0, 1.0, true), w};
    EXPECT_OP_FAILS(ctx, dc_optimizer_sgd(ctx, 3, twice, 0.1, 0.0), "dc_optimizer_sgd", "parameter 2", "twice");
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 3, twice, NULL), "dc_optimizer_adam", "parameter 2", "twice");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 3, twice, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "twice");
    dc_tensor_free(twice[1]);
    const struct {
        double lr, b1, b2, eps, decay;
        const char *word;
    } bad[] = {
        {-0.1, 0.9, 0.999, 1e-8, 0, "-0.1"},      {1e-3, 1.0, 0.999, 1e-8, 0, "betas 1 "},
        {1e-3, 1.5, 0.999, 1e-8, 0, "1.5"},       {1e-3, 0.9, 1.0, 1e-8, 0, "0.9 1"},
        {1e-3, -0.1, 0.999, 1e-8, 0, "-0.1"},     {1e-3, 0.9, 0.999, 0.0, 0, "eps 0"},
        {1e-3, 0.9, 0.999, 1e-8, -1, "decay -1"}, {INFINITY, 0.9, 0.999, 1e-8, 0, "lr inf"},
        {1e-3, 0.9, 0.999, INFINITY, 0, "eps inf"}, {1e-3, 0.9, 0.999, 1e-8, INFINITY, "decay inf"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        dc_adam_options o = {bad[i].lr, bad[i].b1, bad[i].b2, bad[i].eps, bad[i].decay};
        EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, &w, &o), "dc_optimizer_adam", bad[i].word);
    }
    /* a tape tensor is no parameter */
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *tt = dc_op_affine(tape, w, 2.0, 0.0);
    EXPECT_OP_FAILS(ctx, dc_optimizer_adam(ctx, 1, &tt, NULL), "dc_optimizer_adam", "persistent");
    dc_tape_free(tape);
    /* and good options work; a schedule's rate out of range is refused */
    dc_optimizer *opt = dc_optimizer_adam(ctx, 1, &w, NULL);
    TEST_NONNULL(ctx, opt);
    assert_true(dc_optimizer_lr(opt) == 1e-3);
    const double bad_rates[3] = {-1.0, INFINITY, NAN};
    for (int i = 0; i < 3; ++i) {
        dc_clear_error(ctx);
        dc_optimizer_set_lr(opt, bad_rates[i]);
        assert_true(dc_last_status(ctx) == DC_ERR_ARG && dc_optimizer_lr(opt) == 1e-3);
    }
    dc_optimizer_free(opt);
    dc_tensor_free(w);
    dc_ctx_free(ctx);
}

/* ---- gradient clipping ---- */

/* Gives each tensor the gradient `grads[i]` (sum(t * grads[i]) backward). */
static void set_grads(dc_ctx *ctx, int n, dc_tensor *const *ts, dc_tensor *const *grads)
{
    for (int i = 0; i < n; ++i) {
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor_zero_grad(ts[i]);
        TEST_OK(ctx, dc_backward(tape, weighted_sum(tape, ts[i], grads[i])));
        dc_tape_free(tape);
    }
}

static void test_clip_grad_norm(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s1[1] = {3}, s2[2] = {2, 2}, s3[1] = {5};
    dc_tensor *p[4] = {f64_random(ctx, 1, s1, -1, 1, true), f64_random(ctx, 2, s2, -1, 1, true),
                       test_random(ctx, DC_F32, 1, s3, -1, 1), f64_random(ctx, 1, s3, -1, 1, true)};
    TEST_OK(ctx, dc_tensor_set_requires_grad(p[2], true));
    dc_tensor *gsrc[3] = {f64_random(ctx, 1, s1, -3, 3, false), f64_random(ctx, 2, s2, -3, 3, false),
                          test_random(ctx, DC_F32, 1, s3, -3, 3)};
    /* p[3] never gets a gradient */
    long double sq = 0;
    for (int i = 0; i < 3; ++i) {
        double *v = test_values(gsrc[i]);
        for (int64_t e = 0; e < dc_tensor_numel(gsrc[i]); ++e)
            sq += (long double)v[e] * v[e];
        free(v);
    }
    const double want_norm = (double)sqrtl(sq);

    double lib_norm = want_norm;
    for (int mode = 0; mode < 3; ++mode) {
        set_grads(ctx, 3, p, gsrc);
        /* a limit above the norm, or equal to it: nothing changes */
        const double max_norm = mode == 0 ? 2 * want_norm : mode == 1 ? lib_norm : want_norm / 4;
        double norm = -1;
        TEST_OK(ctx, dc_clip_grad_norm(ctx, 4, p, max_norm, &norm));
        if (mode == 0)
            lib_norm = norm;
        test_assert_close(&norm, &want_norm, 1, 0, 1e-14, "global L2 norm over all gradients");
        if (dc_tensor_grad(p[3]))
            fail_msg("clip: a tensor without a gradient got one");
        long double after = 0;
        for (int i = 0; i < 3; ++i) {
            double *g = grad_values(ctx, p[i], "clip"), *src = test_values(gsrc[i]);
            const int64_t n = dc_tensor_numel(p[i]);
            for (int64_t e = 0; e < n; ++e) {
                after += (long double)g[e] * g[e];
                if (mode < 2 && g[e] != src[e])
                    fail_msg("clip to %g with norm %g: gradient %d element %lld changed from %.17g to %.17g", max_norm,
                             want_norm, i, (long long)e, src[e], g[e]);
                const double want = src[e] * (max_norm / want_norm);
                const double tol = i == 2 ? 2.5e-7 * fabs(want) : 1e-15 * fabs(want);
                if (mode == 2 && !(fabs(g[e] - want) <= tol))
                    fail_msg("clip to %g: gradient %d element %lld is %.17g, expected %.17g", max_norm, i, (long long)e,
                             g[e], want);
            }
            free(g);
            free(src);
        }
        if (mode == 2) {
            const double got = (double)sqrtl(after);
            test_assert_close(&got, &max_norm, 1, 0, 1e-7, "norm after clipping");
        }
    }
    /* a zeroed gradient is skipped like a missing one */
    set_grads(ctx, 3, p, gsrc);
    dc_tensor_zero_grad(p[0]);
    double norm = -1, want_rest = 0;
    for (int i = 1; i < 3; ++i) {
        double *v = test_values(gsrc[i]);
        for (int64_t e = 0; e < dc_tensor_numel(gsrc[i]); ++e)
            want_rest += v[e] * v[e];
        free(v);
    }
    want_rest = sqrt(want_rest);
    TEST_OK(ctx, dc_clip_grad_norm(ctx, 4, p, 1e9, &norm));
    test_assert_close(&norm, &want_rest, 1, 0, 1e-12, "norm with one gradient zeroed");
    /* no gradients at all: norm 0 */
    for (int i = 0; i < 4; ++i)
        dc_tensor_zero_grad(p[i]);
    TEST_OK(ctx, dc_clip_grad_norm(ctx, 4, p, 1.0, &norm));
    if (norm != 0.0)
        fail_msg("clip: the norm without gradients is %g, expected 0", norm);
    /* bad arguments */
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 4, p, 0.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm");
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 4, p, -1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm");
    dc_tensor *with_null[2] = {p[0], NULL};
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 2, with_null, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "NULL");
    for (int i = 0; i < 4; ++i)
        dc_tensor_free(p[i]);
    for (int i = 0; i < 3; ++i)
        dc_tensor_free(gsrc[i]);
    dc_ctx_free(ctx);
}

/* A norm that is not finite leaves the gradients as they are: an infinite or
 * NaN element, and float64 elements whose norm is beyond the double range. */
/* Clipping scales gradients in place, so it refuses a gradient that lies in
 * another tensor's numbers: a slice's, in its base's gradient (contiguous
 * or not), and an output's that is the adjoint given to dc_backward_with;
 * and a tape tensor whose tape was reset since, whose numbers now belong to
 * the next step. Each refusal leaves every gradient as it was. */
static void test_clip_grad_norm_refuses_borrowed_gradients(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    assert_non_null(tape);
    const int64_t two = 2;
    const double xv[2] = {1.5, 2.0};
    dc_tensor *x = dc_tensor_from_host(ctx, DC_F64, 1, &two, xv);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    /* x's gradient (3, 4) + (1, 0): the slice s = x[0:1] sends its 1 into x's */
    dc_tensor *s = dc_op_slice(tape, x, 0, 0, 1);
    dc_tensor *loss =
        dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, x, x), 0, NULL, false), dc_op_sum(tape, s, 0, NULL, false));
    TEST_OK(ctx, dc_backward(tape, loss));
    dc_tensor *with_slice[2] = {x, s};
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 2, with_slice, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "tensor 1",
                  "view");
    double *g = test_values(dc_tensor_grad(x));
    assert_true(g[0] == 4.0 && g[1] == 4.0);
    free(g);

    /* y's gradient is the caller's adjoint, read in place */
    dc_tape_reset(tape);
    dc_tensor_zero_grad(x);
    dc_tensor *adjoint = dc_tensor_from_host(ctx, DC_F64, 1, &two, (const double[]){3.0, 4.0});
    dc_tensor *y = dc_op_affine(tape, x, 2.0, 0.0);
    TEST_OK(ctx, dc_backward_with(tape, y, adjoint));
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, &y, 1.0, NULL), DC_ERR_ARG, "dc_clip_grad_norm", "tensor 0",
                  "dc_backward_with");
    double *a = test_values(adjoint);
    assert_true(a[0] == 3.0 && a[1] == 4.0);
    free(a);

    /* h's numbers after the reset are the next step's */
    dc_tape_reset(tape);
    dc_tensor *h = dc_op_mul(tape, x, x);
    TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, h, 0, NULL, false)));
    dc_tape_reset(tape);
    dc_tensor *next = dc_tape_tensor_new(tape, DC_F64, 1, &two, NULL);
    TEST_OK(ctx, dc_tensor_fill(next, 100.0));
    EXPECT_STATUS(ctx, dc_clip_grad_norm(ctx, 1, &h, 1e-3, NULL), DC_ERR_STATE, "dc_clip_grad_norm", "tensor 0",
                  "reset");
    double *n = test_values(next);
    assert_true(n[0] == 100.0 && n[1] == 100.0);
    free(n);
    dc_tensor_free(adjoint);
    dc_tensor_free(x);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

static void test_clip_grad_norm_not_finite(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s4[1] = {4};
    const struct {
        const char *what;
        double values[4];
        bool norm_is_nan;
    } cases[] = {
        {"an infinite element", {INFINITY, 1.0, 1.0, 0.0}, false},
        {"a NaN element", {NAN, 1.0, 1.0, 0.0}, true},
        {"a norm of 2e308", {1e308, 1e308, -1e308, 1e308}, false},
    };
    dc_tensor *p = f64_random(ctx, 1, s4, -1, 1, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        dc_tensor *g = test_tensor(ctx, DC_F64, 1, s4, cases[i].values);
        set_grads(ctx, 1, &p, &g);
        double norm = 0;
        TEST_OK(ctx, dc_clip_grad_norm(ctx, 1, &p, 1.0, &norm));
        if (cases[i].norm_is_nan ? !isnan(norm) : norm != INFINITY)
            fail_msg("clip with %s: norm %g, expected %s", cases[i].what, norm, cases[i].norm_is_nan ? "NaN" : "inf");
        double *after = grad_values(ctx, p, "clip");
        for (int e = 0; e < 4; ++e) {
            const double want = cases[i].values[e];
            if (!(after[e] == want || (isnan(after[e]) && isnan(want))))
                fail_msg("clip with %s: element %d changed from %g to %g", cases[i].what, e, want, after[e]);
        }
        free(after);
        dc_tensor_free(g);
    }
    dc_tensor_free(p);
    dc_ctx_free(ctx);
}

/* Gradients whose squares overflow or underflow a double still get their
 * norm to the last bits, and are clipped: float64 elements near 1e200, many
 * near 1e153 whose squares are each finite but whose sum is not, elements
 * near 1e-170 whose squares vanish, subnormal elements (a scale of 2^-e would
 * overflow there), and a float32 clip whose scale is below
 * the float32 range while the clipped elements are not. The reference is a
 * long double sum (its exponent reaches 1e4932). */
static void test_clip_grad_norm_extreme_magnitudes(void **state)
{
    (void)state;
    enum { N = 1000 };
    static double many[N];
    for (int e = 0; e < N; ++e)
        many[e] = (e % 3 ? 1e153 : -7e152) * (1.0 + e / (double)N);
    const double big[3] = {1e200, 1.0, -2.5e199}, tiny[3] = {1e-170, -3e-170, 0.0};
    const double subnormal[3] = {4e-320, -1e-320, 0.0}, near_min[3] = {1e-310, 2e-308, -3e-311};
    const float f32_huge[3] = {3e38f, 0.0f, -1.5f};
    const struct {
        const char *what;
        dc_dtype dtype;
        int64_t n;
        const double *f64;
        const float *f32;
        double max_norm;
    } cases[] = {
        {"float64 near 1e200", DC_F64, 3, big, NULL, 1.0},
        {"float64, many near 1e153", DC_F64, N, many, NULL, 1e100},
        {"float64 near 1e-170", DC_F64, 3, tiny, NULL, 1e-171},
        {"float64 near 1e-170, not clipped", DC_F64, 3, tiny, NULL, 1.0},
        {"float64 subnormal", DC_F64, 3, subnormal, NULL, 1e-321},
        {"float64 near the smallest normal", DC_F64, 3, near_min, NULL, 1e-309},
        {"float32 clipped to 1e-10", DC_F32, 3, NULL, f32_huge, 1e-10},
    };
    dc_ctx *ctx = test_cpu_ctx();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const int64_t n = cases[c].n;
        double *src = malloc((size_t)n * sizeof *src);
        assert_non_null(src);
        long double sq = 0;
        for (int64_t e = 0; e < n; ++e) {
            src[e] = cases[c].f64 ? cases[c].f64[e] : (double)cases[c].f32[e];
            sq += (long double)src[e] * src[e];
        }
        const long double want_norm = sqrtl(sq);
        dc_tensor *p = test_random(ctx, cases[c].dtype, 1, &n, -1, 1);
        TEST_OK(ctx, dc_tensor_set_requires_grad(p, true));
        dc_tensor *g = test_tensor(ctx, cases[c].dtype, 1, &n, src);
        set_grads(ctx, 1, &p, &g);
        double norm = 0;
        TEST_OK(ctx, dc_clip_grad_norm(ctx, 1, &p, cases[c].max_norm, &norm));
        /* plus one unit of the subnormals, the spacing of results down there */
        if (!(fabsl((long double)norm - want_norm) <= 1e-15L * want_norm + 0x1p-1074L))
            fail_msg("clip, %s: norm %.17g, expected %.17Lg", cases[c].what, norm, want_norm);
        const bool clipped = want_norm > cases[c].max_norm;
        /* relative, and one unit of the subnormals of the dtype absolute */
        const double tol = cases[c].dtype == DC_F32 ? 1.2e-7 : 1e-15;
        const double abs_tol = cases[c].dtype == DC_F32 ? 0x1p-149 : 0x1p-1074;
        double *after = grad_values(ctx, p, "clip");
        for (int64_t e = 0; e < n; ++e) {
            const long double want = clipped ? src[e] * (cases[c].max_norm / want_norm) : src[e];
            if (!(fabsl((long double)after[e] - want) <= tol * fabsl(want) + abs_tol))
                fail_msg("clip, %s: element %lld is %.17g, expected %.17Lg", cases[c].what, (long long)e, after[e],
                         want);
        }
        free(after);
        free(src);
        dc_tensor_free(g);
        dc_tensor_free(p);
    }
    dc_ctx_free(ctx);
}

/* A thousand float64 gradients of one element each, near 1e306: their
 * squares overflow, and so would the sum of the tensors' largest magnitudes
 * (about 1.5e309), while the norm (about 5e307) and the largest magnitude
 * are finite. Only the largest over all tensors, not a sum of the
 * tensors' own, gives a finite rescaled norm. */
static void test_clip_grad_norm_rescaled_by_the_largest(void **state)
{
    (void)state;
    enum { N = 1000 };
    const int64_t one[1] = {1};
    dc_ctx *ctx = test_cpu_ctx();
    dc_tensor *p[N], *g[N];
    double a[N];
    long double squares = 0;
    for (int i = 0; i < N; ++i) {
        a[i] = (i % 2 ? -1e306 : 1e306) * (1.0 + i / (double)N);
        squares += (long double)a[i] * a[i];
        p[i] = f64_random(ctx, 1, one, -1, 1, true);
        g[i] = test_tensor(ctx, DC_F64, 1, one, &a[i]);
    }
    set_grads(ctx, N, p, g);
    const long double want_norm = sqrtl(squares);
    const double max_norm = 1e300;
    double norm = 0;
    TEST_OK(ctx, dc_clip_grad_norm(ctx, N, p, max_norm, &norm));
    if (!(fabsl((long double)norm - want_norm) <= 1e-15L * want_norm))
        fail_msg("clip of %d gradients near 1e306: norm %.17g, expected %.17Lg", N, norm, want_norm);
    for (int i = 0; i < N; ++i) {
        const double want = (double)(a[i] * (max_norm / want_norm));
        double got;
        TEST_OK(ctx, dc_tensor_get(dc_tensor_grad(p[i]), 0, &got));
        if (!(fabs(got - want) <= 1e-15 * fabs(want)))
            fail_msg("clip of %d gradients near 1e306: gradient %d is %.17g, expected %.17g", N, i, got, want);
    }
    for (int i = 0; i < N; ++i) {
        dc_tensor_free(p[i]);
        dc_tensor_free(g[i]);
    }
    dc_ctx_free(ctx);
}

/* Sums whose order could follow the threads (the clip's global norm, the
 * cross-entropy loss) give the same bits on 1 and 2 threads and from run to
 * run. */
static void test_sums_independent_of_threads(void **state)
{
    (void)state;
    enum { N_GRAD = 300000, ROWS = 4096, CLASSES = 64, RUNS = 5 };
    double *grad_values_host = malloc(N_GRAD * sizeof *grad_values_host);
    double *logits_host = malloc((size_t)ROWS * CLASSES * sizeof *logits_host);
    double *targets_host = malloc(ROWS * sizeof *targets_host);
    assert_non_null(grad_values_host);
    assert_non_null(logits_host);
    assert_non_null(targets_host);
    for (int64_t e = 0; e < N_GRAD; ++e)
        grad_values_host[e] = sin(0.7 * (double)e) * (1.0 + (double)(e % 97));
    for (int64_t e = 0; e < (int64_t)ROWS * CLASSES; ++e)
        logits_host[e] = 3.0 * sin(0.37 * (double)e + 0.1);
    for (int r = 0; r < ROWS; ++r)
        targets_host[r] = (double)(r * 7 % CLASSES);
    double norms[2][RUNS], losses[2][RUNS];
    for (int threads = 1; threads <= 2; ++threads) {
        dc_ctx *ctx = test_cpu_ctx_threads(threads, 1);
        const int64_t sg[1] = {N_GRAD}, sl[2] = {ROWS, CLASSES}, st[1] = {ROWS};
        dc_tensor *p = test_random(ctx, DC_F32, 1, sg, -1, 1);
        TEST_OK(ctx, dc_tensor_set_requires_grad(p, true));
        dc_tensor *g = test_tensor(ctx, DC_F32, 1, sg, grad_values_host);
        dc_tensor *logits = test_tensor(ctx, DC_F64, 2, sl, logits_host);
        dc_tensor *targets = test_tensor(ctx, DC_F64, 1, st, targets_host);
        for (int run = 0; run < RUNS; ++run) {
            set_grads(ctx, 1, &p, &g);
            TEST_OK(ctx, dc_clip_grad_norm(ctx, 1, &p, 1e30, &norms[threads - 1][run]));
            dc_tape *tape = dc_tape_new(ctx);
            dc_tensor *loss = dc_op_cross_entropy(tape, logits, targets);
            TEST_NONNULL(ctx, loss);
            TEST_OK(ctx, dc_tensor_item(loss, &losses[threads - 1][run]));
            dc_tape_free(tape);
        }
        dc_tensor_free(p);
        dc_tensor_free(g);
        dc_tensor_free(logits);
        dc_tensor_free(targets);
        dc_ctx_free(ctx);
    }
    for (int t = 0; t < 2; ++t)
        for (int run = 0; run < RUNS; ++run) {
            if (memcmp(&norms[t][run], &norms[0][0], sizeof(double)) != 0)
                fail_msg("clip norm on %d thread(s), run %d: %.17g, first run on 1 thread %.17g", t + 1, run,
                         norms[t][run], norms[0][0]);
            if (memcmp(&losses[t][run], &losses[0][0], sizeof(double)) != 0)
                fail_msg("cross-entropy loss on %d thread(s), run %d: %.17g, first run on 1 thread %.17g", t + 1, run,
                         losses[t][run], losses[0][0]);
        }
    free(grad_values_host);
    free(logits_host);
    free(targets_host);
}

/* ---- checkpoints ---- */

typedef struct ckpt_dir {
    char dir[64];
} ckpt_dir;

static void ckpt_dir_make(ckpt_dir *d)
{
    snprintf(d->dir, sizeof d->dir, "/tmp/dc_test_nn_XXXXXX");
    if (!mkdtemp(d->dir))
        fail_msg("mkdtemp failed");
}

static void path_in(const ckpt_dir *d, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", d->dir, name);
}

/* Removes the directory and the files in it. */
static void ckpt_dir_remove(const ckpt_dir *d)
{
    DIR *dir = opendir(d->dir);
    assert_non_null(dir);
    for (struct dirent *e = readdir(dir); e; e = readdir(dir)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[512];
        path_in(d, e->d_name, p, sizeof p);
        if (remove(p) != 0)
            fail_msg("cannot remove %s", p);
    }
    closedir(dir);
    if (rmdir(d->dir) != 0)
        fail_msg("cannot remove %s", d->dir);
}

/* Fails if any name in the directory contains ".tmp". */
static void expect_no_tmp(const ckpt_dir *d, const char *what)
{
    DIR *dir = opendir(d->dir);
    assert_non_null(dir);
    for (struct dirent *e = readdir(dir); e; e = readdir(dir))
        if (strstr(e->d_name, ".tmp"))
            fail_msg("%s: %s is left behind in %s", what, e->d_name, d->dir);
    closedir(dir);
}

static unsigned char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t cap = 1 << 16, n = 0;
    unsigned char *p = malloc(cap);
    assert_non_null(p);
    for (size_t got; (got = fread(p + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            cap *= 2;
            p = realloc(p, cap);
            assert_non_null(p);
        }
    }
    fclose(f);
    *len = n;
    return p;
}

static void file_write(const char *path, const unsigned char *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0)
        fail_msg("cannot write %s", path);
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Rewrites the trailing checksum so that only the edited field is wrong. */
static void fix_checksum(unsigned char *p, size_t len)
{
    const uint64_t h = fnv1a(p, len - 8);
    for (int i = 0; i < 8; ++i)
        p[len - 8 + (size_t)i] = (unsigned char)(h >> (8 * i));
}

/* The tensors the checkpoint tests save: f32 and f64, rank 0 to 3. */
enum { N_SAVED = 6 };
static const char *const saved_names[N_SAVED] = {"scalar", "special", "weights.f32",
                                                 "cube",   "empty",   "a name of 255 bytes"};

static void make_saved(dc_ctx *ctx, dc_tensor **t)
{
    const double scalar = 3.25;
    const double special[6] = {1.0, -0.0, INFINITY, -INFINITY, NAN, 4.9406564584124654e-324};
    const int64_t s6[1] = {6}, s23[2] = {2, 3}, s234[3] = {2, 3, 4}, s03[2] = {0, 3}, s4[1] = {4};
    t[0] = test_tensor(ctx, DC_F32, 0, NULL, &scalar);
    t[1] = test_tensor(ctx, DC_F64, 1, s6, special);
    t[2] = test_random(ctx, DC_F32, 2, s23, -10, 10);
    t[3] = test_random(ctx, DC_F64, 3, s234, -1e6, 1e6);
    t[4] = dc_tensor_new(ctx, DC_F64, 2, s03);
    TEST_NONNULL(ctx, t[4]);
    t[5] = test_random(ctx, DC_F32, 1, s4, -1, 1);
}

/* Fresh tensors of the same dtypes and shapes, filled with 7. */
static void make_targets(dc_ctx *ctx, dc_tensor *const *like, dc_tensor **t, int n)
{
    for (int i = 0; i < n; ++i) {
        t[i] = dc_tensor_new(ctx, dc_tensor_dtype(like[i]), dc_tensor_ndim(like[i]), dc_tensor_shape(like[i]));
        TEST_NONNULL(ctx, t[i]);
        TEST_OK(ctx, dc_tensor_fill(t[i], 7.0));
    }
}

static void free_all(dc_tensor **t, int n)
{
    for (int i = 0; i < n; ++i)
        dc_tensor_free(t[i]);
}

static char long_name[256];

static const char *const *names_with_long(void)
{
    static const char *names[N_SAVED];
    memset(long_name, 'n', 255);
    long_name[255] = '\0';
    for (int i = 0; i < N_SAVED; ++i)
        names[i] = saved_names[i];
    names[N_SAVED - 1] = long_name;
    return names;
}

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    ckpt_dir d;
    ckpt_dir_make(&d);
    char path[512];
    path_in(&d, "model.ckpt", path, sizeof path);
    dc_tensor *src[N_SAVED], *dst[N_SAVED];
    make_saved(ctx, src);
    const char *const *names = names_with_long();
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, N_SAVED, src, names));
    expect_no_tmp(&d, "after a save");

    make_targets(ctx, src, dst, N_SAVED);
    TEST_OK(ctx, dc_checkpoint_load(ctx, path, N_SAVED, dst, names));
    for (int i = 0; i < N_SAVED; ++i)
        expect_same_bytes(ctx, dst[i], src[i], names[i]);

    /* a subset, in another order */
    dc_tensor *sub[2] = {dst[3], dst[0]};
    const char *sub_names[2] = {names[3], names[0]};
    TEST_OK(ctx, dc_tensor_fill(dst[3], 0.0));
    TEST_OK(ctx, dc_tensor_fill(dst[0], 0.0));
    TEST_OK(ctx, dc_checkpoint_load(ctx, path, 2, sub, sub_names));
    expect_same_bytes(ctx, dst[3], src[3], "cube loaded alone");
    expect_same_bytes(ctx, dst[0], src[0], "scalar loaded alone");

    /* saving over it replaces it, and leaves no temporary file */
    dc_tensor *other[N_SAVED];
    make_saved(ctx, other);
    TEST_OK(ctx, dc_tensor_fill(other[3], -2.5));
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, N_SAVED, other, names));
    expect_no_tmp(&d, "after saving over a checkpoint");
    TEST_OK(ctx, dc_checkpoint_load(ctx, path, N_SAVED, dst, names));
    for (int i = 0; i < N_SAVED; ++i)
        expect_same_bytes(ctx, dst[i], other[i], "after saving over the file");

    /* bad names are refused and write nothing */
    char bad_path[512];
    path_in(&d, "bad.ckpt", bad_path, sizeof bad_path);
    const char *dup[2] = {"w", "w"}, *empty[1] = {""};
    char too_long[257];
    memset(too_long, 'x', 256);
    too_long[256] = '\0';
    const char *longer[1] = {too_long};
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, bad_path, 2, src, dup), DC_ERR_ARG, "dc_checkpoint_save", "\"w\"");
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, bad_path, 1, src, empty), DC_ERR_ARG, "dc_checkpoint_save");
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, bad_path, 1, src, longer), DC_ERR_ARG, "dc_checkpoint_save", "255");
    if (access(bad_path, F_OK) == 0)
        fail_msg("a refused save wrote %s", bad_path);

    free_all(src, N_SAVED);
    free_all(dst, N_SAVED);
    free_all(other, N_SAVED);
    ckpt_dir_remove(&d);
    dc_ctx_free(ctx);
}

/* Loads `path` into copies of the targets, expects the refusal, and checks
 * that no target changed. */
static void expect_load_refused(dc_ctx *ctx, const char *path, int n, dc_tensor *const *targets,
                                const char *const *names, dc_status want, const char *what, const char *word1,
                                const char *word2)
{
    size_t sizes[N_SAVED + 1];
    unsigned char *before[N_SAVED + 1];
    for (int i = 0; i < n; ++i)
        before[i] = tensor_bytes(ctx, targets[i], &sizes[i]);
    dc_clear_error(ctx);
    const dc_status st = dc_checkpoint_load(ctx, path, n, targets, names);
    if (st != want)
        fail_msg("%s: expected %s, got %s (message \"%s\")", what, dc_status_name(want), dc_status_name(st),
                 dc_last_error(ctx));
    expect_words(what, dc_last_error(ctx), "dc_checkpoint_load", word1, word2, (const char *)NULL);
    for (int i = 0; i < n; ++i) {
        size_t size;
        unsigned char *after = tensor_bytes(ctx, targets[i], &size);
        if (size != sizes[i] || memcmp(after, before[i], size) != 0)
            fail_msg("%s: the refused load changed tensor \"%s\"", what, names[i]);
        free(after);
        free(before[i]);
    }
}

/* What a file system can hand the loader that is not a checkpoint file: a
 * device and a FIFO are refused at once (a read of /dev/zero never ends), a
 * file far longer than its header describes (a sparse terabyte) is refused
 * without being read, and a file naming one tensor twice is refused. */
static void test_checkpoint_load_refuses_what_is_no_file(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    ckpt_dir d;
    ckpt_dir_make(&d);
    dc_tensor *src[N_SAVED], *dst[N_SAVED];
    make_saved(ctx, src);
    make_targets(ctx, src, dst, N_SAVED);
    const char *const *names = names_with_long();
    expect_load_refused(ctx, "/dev/zero", N_SAVED, dst, names, DC_ERR_IO, "/dev/zero", "not a regular file", NULL);
    char fifo[512];
    path_in(&d, "fifo", fifo, sizeof fifo);
    if (mkfifo(fifo, 0600) != 0)
        fail_msg("cannot make the FIFO %s", fifo);
    expect_load_refused(ctx, fifo, N_SAVED, dst, names, DC_ERR_IO, "a FIFO", "not a regular file", NULL);
    remove(fifo);

    /* a valid checkpoint of one scalar, then a terabyte of holes */
    char path[512];
    path_in(&d, "huge.ckpt", path, sizeof path);
    const char *one_name[1] = {"scalar"};
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, 1, src, one_name));
    if (truncate(path, (off_t)1 << 40) != 0) {
        print_message("this file system cannot hold a sparse terabyte; that part is not checked\n");
    } else {
        expect_load_refused(ctx, path, 1, dst, one_name, DC_ERR_FORMAT, "a sparse terabyte", "unexpected bytes",
                            NULL);
        remove(path);
    }

    /* two entries named alike, with a valid checksum */
    const char *twice[2] = {"first", "secnd"};
    dc_tensor *pair[2] = {src[0], src[0]};
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, 2, pair, twice));
    size_t len;
    unsigned char *bytes = file_read(path, &len);
    unsigned char *second = memmem(bytes, len, "secnd", 5);
    assert_non_null(second);
    memcpy(second, "first", 5);
    fix_checksum(bytes, len);
    file_write(path, bytes, len);
    free(bytes);
    dc_tensor *one[1] = {dst[0]};
    const char *first[1] = {"first"};
    expect_load_refused(ctx, path, 1, one, first, DC_ERR_FORMAT, "a name twice", "two tensors", "\"first\"");
    for (int i = 0; i < N_SAVED; ++i) {
        dc_tensor_free(src[i]);
        dc_tensor_free(dst[i]);
    }
    ckpt_dir_remove(&d);
    dc_ctx_free(ctx);
}

/* A load checks every tensor before it writes any: a tape tensor whose
 * tape was reset since (after a live one in the list), the same tensor
 * under two names (one load would be lost), and a file whose entry has an
 * empty name (no save writes one) leave every tensor as it was. */
static void test_checkpoint_load_checks_every_tensor_first(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    assert_non_null(tape);
    ckpt_dir d;
    ckpt_dir_make(&d);
    char path[512];
    path_in(&d, "pair.ckpt", path, sizeof path);
    const int64_t six = 6;
    dc_tensor *saved[2] = {dc_tensor_new(ctx, DC_F32, 1, &six), dc_tensor_new(ctx, DC_F32, 1, &six)};
    TEST_OK(ctx, dc_tensor_fill(saved[0], 1.0));
    TEST_OK(ctx, dc_tensor_fill(saved[1], 2.0));
    const char *names[2] = {"a", "b"};
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, 2, saved, names));
    dc_tensor *target = dc_tensor_new(ctx, DC_F32, 1, &six);
    TEST_OK(ctx, dc_tensor_fill(target, -1.0));

    dc_tensor *stale = dc_tape_tensor_new(tape, DC_F32, 1, &six, NULL);
    assert_non_null(stale);
    dc_tape_reset(tape);
    dc_tensor *with_stale[2] = {target, stale};
    EXPECT_STATUS(ctx, dc_checkpoint_load(ctx, path, 2, with_stale, names), DC_ERR_STATE, "dc_checkpoint_load",
                  "tensor 1", "\"b\"");
    dc_tensor *twice[2] = {target, target};
    EXPECT_STATUS(ctx, dc_checkpoint_load(ctx, path, 2, twice, names), DC_ERR_ARG, "dc_checkpoint_load", "tensor 1",
                  "twice");
    double *v = test_values(target);
    for (int i = 0; i < 6; ++i)
        assert_true(v[i] == -1.0);
    free(v);

    /* one tensor named "a", its name cut to nothing, the checksum made good */
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, 1, saved, names));
    size_t len;
    unsigned char *bytes = file_read(path, &len);
    assert_true(len > 21 && bytes[16] == 1 && bytes[20] == 'a');
    bytes[16] = 0;
    memmove(bytes + 20, bytes + 21, len - 21);
    fix_checksum(bytes, len - 1);
    file_write(path, bytes, len - 1);
    free(bytes);
    const char *empty[1] = {""};
    expect_load_refused(ctx, path, 1, &target, empty, DC_ERR_FORMAT, "an empty name", path, NULL);
    for (int i = 0; i < 2; ++i)
        dc_tensor_free(saved[i]);
    dc_tensor_free(target);
    ckpt_dir_remove(&d);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

typedef struct saver {
    dc_ctx *ctx;
    const char *path;
    dc_tensor *t;
    int failures;
} saver;

static void *save_many(void *arg)
{
    saver *s = arg;
    const char *names[1] = {"w"};
    for (int round = 0; round < 40; ++round)
        if (dc_checkpoint_save(s->ctx, s->path, 1, &s->t, names) != DC_OK)
            s->failures++;
    return NULL;
}

/* Saves from several threads to one path each succeed, and the file left
 * is whole (one of theirs); no temporary file is left behind. A save over
 * a checkpoint keeps its permission bits; a new file gets the process's
 * default (0666 less the umask). A name of 255 bytes, the longest a file
 * system takes, can be saved (the temporary name does not grow with it). */
static void test_checkpoint_saves_concurrent_durable(void **state)
{
    (void)state;
    ckpt_dir d;
    ckpt_dir_make(&d);
    char path[512];
    path_in(&d, "shared.ckpt", path, sizeof path);
    enum { THREADS = 4 };
    saver savers[THREADS];
    pthread_t threads[THREADS];
    const int64_t shape[1] = {1000};
    for (int i = 0; i < THREADS; ++i) {
        savers[i] = (saver){test_cpu_ctx(), path, NULL, 0};
        savers[i].t = dc_tensor_new(savers[i].ctx, DC_F32, 1, shape);
        TEST_OK(savers[i].ctx, dc_tensor_fill(savers[i].t, (double)(i + 1)));
    }
    for (int i = 0; i < THREADS; ++i)
        assert_int_equal(pthread_create(&threads[i], NULL, save_many, &savers[i]), 0);
    for (int i = 0; i < THREADS; ++i)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < THREADS; ++i)
        if (savers[i].failures)
            fail_msg("thread %d: %d of 40 saves failed: %s", i, savers[i].failures, dc_last_error(savers[i].ctx));
    dc_tensor *back = dc_tensor_new(savers[0].ctx, DC_F32, 1, shape);
    const char *names[1] = {"w"};
    TEST_OK(savers[0].ctx, dc_checkpoint_load(savers[0].ctx, path, 1, &back, names));
    double first, last;
    TEST_OK(savers[0].ctx, dc_tensor_get(back, 0, &first));
    TEST_OK(savers[0].ctx, dc_tensor_get(back, 999, &last));
    if (first != last || first < 1 || first > THREADS)
        fail_msg("the file left holds %g ... %g: not one thread's tensor", first, last);
    expect_no_tmp(&d, "after concurrent saves");

    /* permissions kept, and a new file's */
    if (chmod(path, 0640) != 0)
        fail_msg("cannot chmod %s", path);
    TEST_OK(savers[0].ctx, dc_checkpoint_save(savers[0].ctx, path, 1, &back, names));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if ((st.st_mode & 07777) != 0640)
        fail_msg("saving over a 0640 checkpoint left mode %04o", (unsigned)(st.st_mode & 07777));
    const mode_t mask = umask(022);
    umask(mask);
    char fresh[512];
    path_in(&d, "fresh.ckpt", fresh, sizeof fresh);
    TEST_OK(savers[0].ctx, dc_checkpoint_save(savers[0].ctx, fresh, 1, &back, names));
    assert_int_equal(stat(fresh, &st), 0);
    if ((st.st_mode & 07777) != (0666 & ~mask))
        fail_msg("a new checkpoint has mode %04o, want %04o (0666 less the umask)", (unsigned)(st.st_mode & 07777),
                 (unsigned)(0666 & ~mask));

    /* the longest name a file system takes */
    char longest[256], long_path[512];
    memset(longest, 'n', 255);
    longest[255] = '\0';
    path_in(&d, longest, long_path, sizeof long_path);
    TEST_OK(savers[0].ctx, dc_checkpoint_save(savers[0].ctx, long_path, 1, &back, names));
    TEST_OK(savers[0].ctx, dc_checkpoint_load(savers[0].ctx, long_path, 1, &back, names));
    expect_no_tmp(&d, "after the saves");
    dc_tensor_free(back);
    for (int i = 0; i < THREADS; ++i) {
        dc_tensor_free(savers[i].t);
        dc_ctx_free(savers[i].ctx);
    }
    ckpt_dir_remove(&d);
}

static void test_checkpoint_refusals(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    ckpt_dir d;
    ckpt_dir_make(&d);
    char path[512], bad[512];
    path_in(&d, "good.ckpt", path, sizeof path);
    path_in(&d, "bad.ckpt", bad, sizeof bad);
    dc_tensor *src[N_SAVED], *dst[N_SAVED];
    make_saved(ctx, src);
    const char *const *names = names_with_long();
    TEST_OK(ctx, dc_checkpoint_save(ctx, path, N_SAVED, src, names));
    make_targets(ctx, src, dst, N_SAVED);
    size_t len;
    unsigned char *good = file_read(path, &len);
    unsigned char *edit = malloc(len + 16);
    assert_non_null(edit);

    /* truncated by one byte, by half, to a few bytes, to nothing */
    const size_t cuts[4] = {len - 1, len / 2, 10, 0};
    for (int i = 0; i < 4; ++i) {
        file_write(bad, good, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "a checkpoint cut to %zu of %zu bytes", cuts[i], len);
        expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, what, bad, NULL);
    }
    /* a byte flipped in the data, in a name, in the checksum; bytes appended */
    const size_t flips[3] = {len - 8 - 13, 16 + 4 + 2, len - 3};
    for (int i = 0; i < 3; ++i) {
        memcpy(edit, good, len);
        edit[flips[i]] ^= 0x10;
        file_write(bad, edit, len);
        char what[64];
        snprintf(what, sizeof what, "a checkpoint with byte %zu flipped", flips[i]);
        expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, what, "corrupt", NULL);
    }
    memcpy(edit, good, len);
    memset(edit + len, 0, 16);
    file_write(bad, edit, len + 16);
    expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, "bytes appended", bad, NULL);
    /* the wrong magic */
    memcpy(edit, good, len);
    edit[0] = 'X';
    file_write(bad, edit, len);
    expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, "wrong magic", "not a dualcast checkpoint", NULL);
    /* a future format version, nothing else changed */
    memcpy(edit, good, len);
    const uint32_t future = DC_CHECKPOINT_VERSION + 1;
    for (int i = 0; i < 4; ++i)
        edit[8 + i] = (unsigned char)(future >> (8 * i));
    file_write(bad, edit, len);
    char future_str[16];
    snprintf(future_str, sizeof future_str, "%u", future);
    expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, "a future version", "version", future_str);
    /* valid checksums over malformed contents: a huge name length, a huge
     * rank, an unknown dtype, a count beyond the entries */
    const struct {
        size_t at;
        uint32_t value;
        const char *what;
    } fields[] = {
        {16, 0xfffffff0u, "a name length past the end"},
        {16 + 4 + 6 + 4, 99, "a rank of 99"},
        {16 + 4 + 6, 7, "dtype 7"},
        {12, N_SAVED + 1, "one entry more claimed than stored"},
        {12, N_SAVED - 1, "one entry fewer claimed than stored"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
        memcpy(edit, good, len);
        for (int b = 0; b < 4; ++b)
            edit[fields[i].at + (size_t)b] = (unsigned char)(fields[i].value >> (8 * b));
        fix_checksum(edit, len);
        file_write(bad, edit, len);
        expect_load_refused(ctx, bad, N_SAVED, dst, names, DC_ERR_FORMAT, fields[i].what, bad, NULL);
    }
    /* a missing name; the tensors before it in the list are not loaded */
    const char *missing[2] = {"scalar", "nope"};
    expect_load_refused(ctx, path, 2, dst, missing, DC_ERR_SHAPE, "a missing name", "\"nope\"", NULL);
    /* a shape, rank or dtype mismatch names both */
    const int64_t s432[3] = {4, 3, 2}, s1[1] = {1}, s23[2] = {2, 3};
    dc_tensor *wrong[3] = {dc_tensor_new(ctx, DC_F64, 3, s432), dc_tensor_new(ctx, DC_F32, 1, s1),
                           dc_tensor_new(ctx, DC_F64, 2, s23)};
    for (int i = 0; i < 3; ++i)
        TEST_OK(ctx, dc_tensor_fill(wrong[i], 7.0));
    dc_tensor *pair[2] = {dst[1], wrong[0]};
    const char *cube[2] = {"special", "cube"};
    expect_load_refused(ctx, path, 2, pair, cube, DC_ERR_SHAPE, "a shape mismatch", "[2, 3, 4]", "[4, 3, 2]");
    pair[1] = wrong[1];
    const char *scalar[2] = {"special", "scalar"};
    expect_load_refused(ctx, path, 2, pair, scalar, DC_ERR_SHAPE, "a rank mismatch", "[]", "[1]");
    pair[1] = wrong[2];
    const char *f32[2] = {"special", "weights.f32"};
    expect_load_refused(ctx, path, 2, pair, f32, DC_ERR_DTYPE, "a dtype mismatch", "f32 [2, 3]", "f64 [2, 3]");
    /* no file */
    char nowhere[512];
    path_in(&d, "absent.ckpt", nowhere, sizeof nowhere);
    expect_load_refused(ctx, nowhere, N_SAVED, dst, names, DC_ERR_IO, "a missing file", nowhere, NULL);

    /* saving into a missing directory or over a directory: DC_ERR_IO, and
     * the checkpoint beside it keeps its bytes */
    char unwritable[512], subdir[512];
    path_in(&d, "no/such/dir/model.ckpt", unwritable, sizeof unwritable);
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, unwritable, N_SAVED, src, names), DC_ERR_IO, "dc_checkpoint_save",
                  unwritable);
    size_t len_after;
    unsigned char *after = file_read(path, &len_after);
    if (len_after != len || memcmp(after, good, len) != 0)
        fail_msg("a failed save to %s changed the checkpoint %s", unwritable, path);
    free(after);
    expect_no_tmp(&d, "after a save into a missing directory");
    /* over a directory: the file is written, the rename fails and the
     * temporary file is removed */
    path_in(&d, "subdir", subdir, sizeof subdir);
    if (mkdir(subdir, 0700) != 0)
        fail_msg("cannot make %s", subdir);
    EXPECT_STATUS(ctx, dc_checkpoint_save(ctx, subdir, N_SAVED, src, names), DC_ERR_IO, "dc_checkpoint_save", subdir);
    expect_no_tmp(&d, "after a save over a directory");
    after = file_read(path, &len_after);
    if (len_after != len || memcmp(after, good, len) != 0)
        fail_msg("a failed save to %s changed the checkpoint %s", subdir, path);
    free(after);
    /* and the good file still loads */
    TEST_OK(ctx, dc_checkpoint_load(ctx, path, N_SAVED, dst, names));
    for (int i = 0; i < N_SAVED; ++i)
        expect_same_bytes(ctx, dst[i], src[i], "the checkpoint after the refusals");
    free_all(wrong, 3);
    free(edit);
    free(good);
    free_all(src, N_SAVED);
    free_all(dst, N_SAVED);
    ckpt_dir_remove(&d);
    dc_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_gradcheck),
        cmocka_unit_test(test_slice_empty),
        cmocka_unit_test(test_slice_gates_all_used),
        cmocka_unit_test(test_slice_gates_some_used),
        cmocka_unit_test(test_slice_accumulates),
        cmocka_unit_test(test_concat_gradcheck),
        cmocka_unit_test(test_concat_views),
        cmocka_unit_test(test_embedding_gradcheck),
        cmocka_unit_test(test_embedding_deterministic),
        cmocka_unit_test(test_embedding_ids_strided_and_long),
        cmocka_unit_test(test_cross_entropy_gradcheck),
        cmocka_unit_test(test_cross_entropy_large_logits),
        cmocka_unit_test(test_cross_entropy_f32_gradient_precision),
        cmocka_unit_test(test_cross_entropy_tied_huge_logits),
        cmocka_unit_test(test_hard_sigmoid),
        cmocka_unit_test(test_step_st),
        cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_sgd_step),
        cmocka_unit_test(test_adam_step),
        cmocka_unit_test(test_optimizer_skips_and_zero_grad),
        cmocka_unit_test(test_adam_late_parameter),
        cmocka_unit_test(test_optimizer_bad_options),
        cmocka_unit_test(test_clip_grad_norm),
        cmocka_unit_test(test_clip_grad_norm_refuses_borrowed_gradients), cmocka_unit_test(test_clip_grad_norm_not_finite),
        cmocka_unit_test(test_clip_grad_norm_extreme_magnitudes),
        cmocka_unit_test(test_clip_grad_norm_rescaled_by_the_largest),
        cmocka_unit_test(test_sums_independent_of_threads),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_checkpoint_refusals), cmocka_unit_test(test_checkpoint_load_checks_every_tensor_first),
        cmocka_unit_test(test_checkpoint_load_refuses_what_is_no_file),
        cmocka_unit_test(test_checkpoint_saves_concurrent_durable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
