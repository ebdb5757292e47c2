/* fuzz_reductions: the input is one case (or a few small ones) of a
 * reduction, a scan or a reduction by index, built-in or of a user operator
 * (tests/assoc/), whose results are checked, not only its survival: on a
 * one-thread context the forward result and the gradients must match a
 * sequential float64 reference (combining the elements one by one, in the
 * order the library promises) within a tolerance, and on a two-thread
 * context the same case must give the same bits. A mismatch, a failed call
 * on a valid case, a crash or a sanitizer report is a finding.
 *
 * A case is FZ_CASE_BYTES bytes (missing ones read as 0, so that an empty
 * input is a valid case: a float64 sum of a scalar); reduction_cases.py
 * writes them from readable descriptions:
 *
 *   0      family, modulo 6: 0 built-in reduction over axes, 1 built-in
 *          scan, 2 built-in reduction by index, 3 to 5 the same three of a
 *          user operator
 *   1      the operator: sum, prod, max, min, logsumexp, mean (built-in
 *          reductions, modulo 6), sum, prod, max, min (built-in scans and
 *          reductions by index, modulo 4), usum, linrec, mat2, maxcount,
 *          ema_reset (user, modulo 5)
 *   2      flags: 1 float32, 2 keepdims, 4 exclusive scan, 8 the op's own
 *          entry point (dc_op_sum, dc_op_prod, ...) instead of dc_op_reduce,
 *          16 the operator's values with rare specials (zeros, NaN, -inf),
 *          32 the gradient added onto one already there, 64 output 0 unused
 *          and the last field's input without a gradient (user operators of
 *          two fields or more), 128 the last output seeded by
 *          dc_backward_with with a broadcast scalar 1 (instead of a loss)
 *   3      rank, modulo 4 (scans and reductions by index: at least 1)
 *   4      axes: bits 0-2 the reduced ones (none: every axis, n_axes 0), 16
 *          counted from the end, 32 listed last first; bits 0-2 modulo the
 *          rank the scanned one, 16 counted from the end
 *   5-7    the sizes (fz_size: 0 to 87, or a multiple of a piece length
 *          give or take 3)
 *   8      the view: 1 a transpose (of axes 0 and 1, 0 and 2, or 1 and 2 by
 *          (b >> 2) % 3; rank 2: 0 and 1), 2 first a slice of a larger base
 *          (along axis (b >> 4) % rank)
 *   9      the slice: its base 1 + b % 4 longer along the axis, starting at
 *          (b >> 2) modulo one more than that
 *   10     n_segments: below 144 modulo 72 (0 only where there are no rows),
 *          above a larger count from a table
 *   11     how the rows are indexed, modulo 4: sorted, random, all into the
 *          last segment, sorted descending
 *   12     the values of a built-in, modulo 8: 0 the operator's own
 *          (those of flag 16 with it), else one of the seven kinds of
 *          data_kind (prod keeps its own: factors near 1)
 *   13-14  the seed of the values, adjoints and indices (generated: a case
 *          has up to FZ_MAX_ELEMENTS of them), little-endian as the rest
 *   15-18  two elements set to the values' special (a zero for a product, a
 *          NaN among ties, an infinity), 1-based modulo the elements, 0 for
 *          none: where the fuzzer puts them, at a piece's edge among other
 *          places, matters to the kernels
 *
 * Further bytes are further cases.
 *
 * The sizes reach the lengths at which the CPU kernels cut their work (see
 * fz_size), with several rows so that pieces walked together span rows and
 * a row's last piece is short. A case bigger than FZ_MAX_ELEMENTS is cut
 * down, its other axes first, so that an input takes well under a second
 * under the sanitizers; the cases after the first share what the first
 * left of that bound.
 *
 * DC_FUZZ_TRACE=1 prints each case and what it checked. */
/* setenv */
#define _POSIX_C_SOURCE 200809L

#include "fuzz_common.h"

DC_ASSOC_DECLARE(usum);
DC_ASSOC_DECLARE(linrec);
DC_ASSOC_DECLARE(mat2);
DC_ASSOC_DECLARE(maxcount);
DC_ASSOC_DECLARE(ema_reset);

/* Elements of one input's tensors (the cases together, each field of a
 * user operator counted once). From 32,768 elements the scans and the user
 * operators' forward passes run on both threads of the second context; a
 * case of 50,000 takes 0.1 to 0.6 s under the sanitizers (the most for
 * mat2's four fields, on a loaded 2-core machine). */
#define FZ_MAX_ELEMENTS 50000
#define FZ_MAX_CASES 4
#define FZ_CASE_BYTES 19
/* fields of a user operator's state, at most (mat2) */
#define MAXK 4

static bool tracing;
static dc_ctx *ctx1, *ctx2;
static dc_tape *tape1, *tape2;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tracing = fz_tracing_requested();
    /* Every input runs on two threads too: clang's OpenMP runtime would keep
     * the second one spinning between parallel regions. Read when the
     * runtime starts, after this. */
    setenv("KMP_BLOCKTIME", "0", 0);
    return 0;
}

/* ---- the values ---------------------------------------------------------- */

/* The values, adjoints and indices of a case come from this generator,
 * seeded by the input: a case names 50,000 elements in two bytes. */
typedef struct fz_rng {
    uint64_t s;
} fz_rng;

static double unif(fz_rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) / 9007199254740992.0;
}

typedef enum { D_SIGNED, D_NEAR1, D_TIES, D_LSE, D_NEAR1_ZEROS, D_TIES_NAN, D_LSE_NEGINF, D_COUNT } data_kind;
static const char *const data_names[D_COUNT] = {
    "signed", "near 1", "ties", "[-3, 3]", "near 1 with zeros", "ties with NaN", "[-3, 3] with -inf"};

/* Values whose references stay within the tolerance over 50,000 elements:
 * products of factors near 1 neither overflow nor underflow (a product
 * that overflows has infinite partials where the reference's, products of
 * the others, are finite), few distinct values make ties for the maximum
 * and minimum. */
static double builtin_value(fz_rng *r, data_kind d)
{
    const double u = unif(r);
    switch (d) {
    case D_SIGNED:
        return 2 * u - 1;
    case D_NEAR1:
        return 0.98 + 0.04 * u;
    case D_TIES:
        return floor(u * 9) - 4;
    case D_LSE:
        return 6 * u - 3;
    case D_NEAR1_ZEROS:
        return unif(r) < 1.0 / 1500 ? 0.0 : 0.98 + 0.04 * u;
    case D_TIES_NAN:
        return unif(r) < 1.0 / 3000 ? NAN : floor(u * 9) - 4;
    default:
        return unif(r) < 0.05 ? -INFINITY : 6 * u - 3;
    }
}

/* The value the input's two chosen elements get: the special value of the
 * kind (NaN where the operator has a first winner to find, a zero where
 * products are zero-safe, an infinity for sums and log-sum-exp). */
static double special_value(data_kind d)
{
    switch (d) {
    case D_SIGNED:
    case D_LSE_NEGINF:
        return INFINITY;
    case D_NEAR1:
    case D_NEAR1_ZEROS:
        return 0.0;
    case D_TIES:
    case D_TIES_NAN:
        return NAN;
    default:
        return -INFINITY;
    }
}

/* ---- the sequential references -------------------------------------------- */

/* o = l (+) r, with Jl[f * k + j] = d o_f / d l_j and Jr likewise. */
typedef void (*comb_fn)(const double *l, const double *r, double *o, double *Jl, double *Jr);

static void zero_j(int k, double *Jl, double *Jr)
{
    memset(Jl, 0, sizeof(double) * (size_t)(k * k));
    memset(Jr, 0, sizeof(double) * (size_t)(k * k));
}

static void c_sum(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    o[0] = l[0] + r[0];
    Jl[0] = 1, Jr[0] = 1;
}
static void c_prod(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    o[0] = l[0] * r[0];
    Jl[0] = r[0], Jr[0] = l[0];
}
/* Whether v takes over from prev: reduce.h's rules, the first winner keeps
 * it and the first NaN wins for good. */
static int takes_over(int is_max, double prev, double v)
{
    return prev == prev && (v != v || (is_max ? v > prev : v < prev));
}
static void c_max(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    const int t = takes_over(1, l[0], r[0]);
    o[0] = t ? r[0] : l[0];
    Jl[0] = !t, Jr[0] = t;
}
static void c_min(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    const int t = takes_over(0, l[0], r[0]);
    o[0] = t ? r[0] : l[0];
    Jl[0] = !t, Jr[0] = t;
}
/* The user operators of tests/assoc/, with their Jacobians by hand. */
static void c_linrec(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    o[0] = r[0] * l[0];
    o[1] = r[0] * l[1] + r[1];
    zero_j(2, Jl, Jr);
    Jl[0 * 2 + 0] = r[0];
    Jl[1 * 2 + 1] = r[0];
    Jr[0 * 2 + 0] = l[0];
    Jr[1 * 2 + 0] = l[1];
    Jr[1 * 2 + 1] = 1;
}
static void c_mat2(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    o[0] = l[0] * r[0] + l[1] * r[2];
    o[1] = l[0] * r[1] + l[1] * r[3];
    o[2] = l[2] * r[0] + l[3] * r[2];
    o[3] = l[2] * r[1] + l[3] * r[3];
    zero_j(4, Jl, Jr);
    Jl[0 * 4 + 0] = r[0], Jl[0 * 4 + 1] = r[2];
    Jl[1 * 4 + 0] = r[1], Jl[1 * 4 + 1] = r[3];
    Jl[2 * 4 + 2] = r[0], Jl[2 * 4 + 3] = r[2];
    Jl[3 * 4 + 2] = r[1], Jl[3 * 4 + 3] = r[3];
    Jr[0 * 4 + 0] = l[0], Jr[0 * 4 + 2] = l[1];
    Jr[1 * 4 + 1] = l[0], Jr[1 * 4 + 3] = l[1];
    Jr[2 * 4 + 0] = l[2], Jr[2 * 4 + 2] = l[3];
    Jr[3 * 4 + 1] = l[2], Jr[3 * 4 + 3] = l[3];
}
static void c_maxcount(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    zero_j(2, Jl, Jr);
    if (l[0] > r[0]) {
        o[0] = l[0], o[1] = l[1];
        Jl[0] = 1, Jl[3] = 1;
    } else if (r[0] > l[0]) {
        o[0] = r[0], o[1] = r[1];
        Jr[0] = 1, Jr[3] = 1;
    } else {
        o[0] = l[0], o[1] = l[1] + r[1];
        Jl[0] = 1, Jl[3] = 1, Jr[3] = 1;
    }
}
static void c_ema(const double *l, const double *r, double *o, double *Jl, double *Jr)
{
    zero_j(3, Jl, Jr);
    if (r[2] > 0.5) {
        o[0] = r[0], o[1] = r[1], o[2] = r[2];
        Jr[0] = 1, Jr[4] = 1, Jr[8] = 1;
    } else {
        o[0] = r[0] * l[0];
        o[1] = r[0] * l[1] + r[1];
        o[2] = l[2];
        Jl[0 * 3 + 0] = r[0];
        Jl[1 * 3 + 1] = r[0];
        Jl[2 * 3 + 2] = 1;
        Jr[0 * 3 + 0] = l[0];
        Jr[1 * 3 + 0] = l[1];
        Jr[1 * 3 + 1] = 1;
    }
}

typedef struct refop {
    const char *name;
    int k;
    comb_fn comb;
    double neutral[MAXK];
    /* a built-in: its first element is the running result as it is (a row
     * of -inf has its maximum won by the first element), where the user
     * operators' bodies combine it with the neutral element */
    bool builtin;
} refop;

static const refop B_OPS[4] = {
    {"sum", 1, c_sum, {0}, true},
    {"prod", 1, c_prod, {1}, true},
    {"max", 1, c_max, {-INFINITY}, true},
    {"min", 1, c_min, {INFINITY}, true},
};

static const refop U_OPS[5] = {
    {"usum", 1, c_sum, {0}, false},
    {"linrec", 2, c_linrec, {1, 0}, false},
    {"mat2", 4, c_mat2, {1, 0, 0, 1}, false},
    {"maxcount", 2, c_maxcount, {-INFINITY, 0}, false},
    {"ema_reset", 3, c_ema, {1, 0, 0}, false},
};

static const dc_assoc *u_assoc(int i)
{
    switch (i) {
    case 0:
        return DC_ASSOC_REF(usum);
    case 1:
        return DC_ASSOC_REF(linrec);
    case 2:
        return DC_ASSOC_REF(mat2);
    case 3:
        return DC_ASSOC_REF(maxcount);
    default:
        return DC_ASSOC_REF(ema_reset);
    }
}

/* A user operator's field values (n elements, field f at f * n): ranges in
 * which a long walk's result stays of order 1 and every element matters to
 * it. */
static void user_values(const refop *op, fz_rng *r, int64_t n, double *v)
{
    for (int64_t i = 0; i < n; ++i) {
        if (op->comb == c_sum) {
            v[i] = 2 * unif(r) - 1;
        } else if (op->comb == c_linrec) {
            v[i] = 1 + 0.02 * (unif(r) - 0.5);
            v[n + i] = 2 * unif(r) - 1;
        } else if (op->comb == c_mat2) { /* rotations scaled near 1: products stay O(1) */
            const double t = 6.283185307179586 * unif(r), sc = 1 + 0.002 * (unif(r) - 0.5);
            v[i] = sc * cos(t), v[n + i] = -sc * sin(t), v[2 * n + i] = sc * sin(t), v[3 * n + i] = sc * cos(t);
        } else if (op->comb == c_maxcount) {
            v[i] = floor(unif(r) * 2000) / 64; /* ties now and then */
            v[n + i] = 0.5 + unif(r);
        } else { /* ema_reset */
            v[i] = 0.99 + 0.01 * unif(r);
            v[n + i] = 2 * unif(r) - 1;
            v[2 * n + i] = unif(r) < 0.02 ? 1.0 : 0.0;
        }
    }
}

/* Which elements each output combines, in the order it combines them (CSR:
 * output o takes idx[start[o]] .. idx[start[o + 1] - 1]). */
typedef struct groups {
    int64_t n_out;
    int64_t *start; /* n_out + 1 */
    int64_t *idx;
} groups;

static void groups_free(groups *g)
{
    free(g->start);
    free(g->idx);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        FZ_FAIL("out of memory (%zu bytes)", bytes);
    return p;
}

static void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size);
    if (!p)
        FZ_FAIL("out of memory (%zu x %zu bytes)", count, size);
    return p;
}

static int64_t numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

/* CSR from each element's output (elements in ascending order: row-major
 * order within each output). */
static groups groups_by_output(int64_t n, int64_t m, const int64_t *out)
{
    groups g = {m, xcalloc((size_t)m + 1, sizeof(int64_t)), xmalloc(sizeof(int64_t) * (size_t)n)};
    for (int64_t e = 0; e < n; ++e)
        g.start[out[e] + 1]++;
    for (int64_t o = 0; o < m; ++o)
        g.start[o + 1] += g.start[o];
    int64_t *cur = xmalloc(sizeof(int64_t) * (size_t)m);
    memcpy(cur, g.start, sizeof(int64_t) * (size_t)m);
    for (int64_t e = 0; e < n; ++e)
        g.idx[cur[out[e]]++] = e;
    free(cur);
    return g;
}

/* A reduction over the axes of mask: the output of an element is the
 * row-major index of its kept axes. */
static groups groups_reduce(int ndim, const int64_t *shape, unsigned mask)
{
    const int64_t n = numel(ndim, shape);
    int64_t m = 1;
    for (int d = 0; d < ndim; ++d)
        m *= (mask >> d) & 1u ? 1 : shape[d];
    int64_t *out = xmalloc(sizeof(int64_t) * (size_t)n);
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
        out[e] = o;
    }
    groups g = groups_by_output(n, m, out);
    free(out);
    return g;
}

/* A scan's lines along axis, in (outer, inner) order. */
static groups groups_scan(int ndim, const int64_t *shape, int axis)
{
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
        outer *= shape[d];
    for (int d = axis + 1; d < ndim; ++d)
        inner *= shape[d];
    const int64_t len = shape[axis], m = outer * inner, n = m * len;
    groups g = {m, xmalloc(sizeof(int64_t) * ((size_t)m + 1)), xmalloc(sizeof(int64_t) * (size_t)n)};
    int64_t at = 0;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            g.start[o * inner + i] = at;
            for (int64_t j = 0; j < len; ++j)
                g.idx[at++] = (o * len + j) * inner + i;
        }
    g.start[m] = at;
    return g;
}

/* Output s * width + w takes the elements i * width + w with index[i] == s,
 * ascending i. */
static groups groups_segment(int64_t rows, int64_t width, const double *index, int64_t n_segments)
{
    const int64_t n = rows * width;
    int64_t *out = xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t w = 0; w < width; ++w)
            out[i * width + w] = (int64_t)index[i] * width + w;
    groups g = groups_by_output(n, n_segments * width, out);
    free(out);
    return g;
}

enum { K_REDUCE, K_SCAN, K_XSCAN };

/* The reference of a reduction (one output per group) or a scan (one per
 * element, inclusive or exclusive): the elements of each group combined
 * one by one from the neutral element, then the adjoints walked back
 * through the same steps' Jacobians. x: k fields of n; W: the outputs'
 * adjoints (k fields of n_y); y: the outputs; gx: x's gradient. A zero
 * adjoint contributes zero, even through an infinite or NaN partial. */
static void ref_run(const refop *op, int kind, int64_t n, const double *x, const groups *g, const double *W, double *y,
                    double *gx)
{
    const int k = op->k;
    const int64_t n_y = kind == K_REDUCE ? g->n_out : n;
    memset(gx, 0, sizeof(double) * (size_t)(k * n));
    int64_t maxlen = 1;
    for (int64_t o = 0; o < g->n_out; ++o)
        if (g->start[o + 1] - g->start[o] > maxlen)
            maxlen = g->start[o + 1] - g->start[o];
    double *s = xmalloc(sizeof(double) * (size_t)k * ((size_t)maxlen + 1));
    double Jl[MAXK * MAXK], Jr[MAXK * MAXK];
    for (int64_t o = 0; o < g->n_out; ++o) {
        const int64_t *id = g->idx + g->start[o];
        const int64_t m = g->start[o + 1] - g->start[o];
        for (int f = 0; f < k; ++f)
            s[f] = op->neutral[f];
        for (int64_t t = 0; t < m; ++t) {
            double a[MAXK];
            for (int f = 0; f < k; ++f)
                a[f] = x[f * n + id[t]];
            if (op->builtin && t == 0)
                s[k] = a[0];
            else
                op->comb(s + t * k, a, s + (t + 1) * k, Jl, Jr);
        }
        if (kind == K_REDUCE)
            for (int f = 0; f < k; ++f)
                y[f * n_y + o] = s[m * k + f];
        else
            for (int64_t t = 0; t < m; ++t)
                for (int f = 0; f < k; ++f)
                    y[f * n_y + id[t]] = s[(kind == K_SCAN ? t + 1 : t) * k + f];
        double lam[MAXK] = {0, 0, 0, 0};
        if (kind == K_REDUCE)
            for (int f = 0; f < k; ++f)
                lam[f] = W[f * n_y + o];
        for (int64_t t = m - 1; t >= 0; --t) {
            if (kind == K_SCAN)
                for (int f = 0; f < k; ++f)
                    lam[f] += W[f * n_y + id[t]];
            double a[MAXK], o2[MAXK];
            for (int f = 0; f < k; ++f)
                a[f] = x[f * n + id[t]];
            if (op->builtin && t == 0) {
                Jl[0] = 0, Jr[0] = 1;
            } else {
                op->comb(s + t * k, a, o2, Jl, Jr);
            }
            double nl[MAXK];
            for (int j = 0; j < k; ++j) {
                double ga = 0, gl = 0;
                for (int f = 0; f < k; ++f)
                    if (lam[f] != 0) {
                        ga += lam[f] * Jr[f * k + j];
                        gl += lam[f] * Jl[f * k + j];
                    }
                gx[j * n + id[t]] = ga;
                nl[j] = gl;
            }
            memcpy(lam, nl, sizeof(double) * (size_t)k);
            if (kind == K_XSCAN)
                for (int f = 0; f < k; ++f)
                    lam[f] += W[f * n_y + id[t]];
        }
    }
    free(s);
}

/* log-sum-exp per group, with reduce.h's rules at -inf, +inf and NaN. */
static void ref_lse(int64_t n, const double *x, const groups *g, const double *W, double *y, double *gx)
{
    memset(gx, 0, sizeof(double) * (size_t)n);
    for (int64_t o = 0; o < g->n_out; ++o) {
        const int64_t *id = g->idx + g->start[o];
        const int64_t m = g->start[o + 1] - g->start[o];
        double mx = -INFINITY;
        int nan = 0;
        for (int64_t t = 0; t < m; ++t) {
            mx = x[id[t]] > mx ? x[id[t]] : mx;
            nan |= x[id[t]] != x[id[t]];
        }
        double r;
        if (nan) {
            r = NAN;
        } else if (isinf(mx)) {
            r = mx;
        } else {
            double s = 0;
            for (int64_t t = 0; t < m; ++t)
                s += exp(x[id[t]] - mx);
            r = mx + log(s);
        }
        y[o] = r;
        for (int64_t t = 0; t < m; ++t) {
            const double v = x[id[t]];
            gx[id[t]] = r == -INFINITY ? 0.0 : r == INFINITY ? (v == INFINITY ? NAN : 0.0) : W[o] * exp(v - r);
        }
    }
}

/* ---- a case ----------------------------------------------------------------- */

typedef enum { F_REDUCE, F_SCAN, F_SEGMENT, F_USER_REDUCE, F_USER_SCAN, F_USER_SEGMENT, F_COUNT } family;
/* Built-in reductions over axes beyond dc_reduction's four. */
enum { B_LSE = 4, B_MEAN = 5 };

typedef struct fz_case {
    family fam;
    int op; /* dc_reduction, B_LSE or B_MEAN; a user operator's index in U_OPS */
    bool user;
    const refop *ref; /* NULL for logsumexp */
    int k;            /* fields */
    dc_dtype dtype;
    bool keepdims, exclusive, named, accumulate, partial, seed;
    int ndim;
    int64_t shape[3]; /* the logical shape: that of the op's input */
    int n_axes, axes[3];
    unsigned mask; /* the reduced axes */
    int axis;      /* the scanned one, as given (may be negative) */
    /* the view: the input is a slice (along slice_axis, from slice_start, of
     * a base slice_extra longer) then a transpose (of t0 and t1) of a
     * contiguous base tensor */
    bool slice, transpose;
    int slice_axis, t0, t1;
    int64_t slice_extra, slice_start;
    int64_t n_segments;
    int index_kind;
    data_kind data;
    uint64_t seed_bits;
    uint16_t pokes[2];
} fz_case;

static const char *const builtin_names[6] = {"sum", "prod", "max", "min", "logsumexp", "mean"};
static const char *const index_names[4] = {"sorted", "random", "all in the last segment", "sorted descending"};

/* A size: 0 to 87 (rows, short lines, the 16 lanes and 33 of a built-in
 * row's walk, the 64 columns of a built-in piece), or m pieces of a length
 * the kernels cut at, give or take 3. */
static int64_t fz_size(uint8_t c)
{
    if (c < 88)
        return c;
    /* DC_ASSOC_CHUNK: a user operator's pieces, walked eight (or four) at
     * a time; 4080: the built-in scans' chunks; 4096: the user gradients'
     * pieces, the bins of a reduction by index and two of the cuts of a
     * built-in reduction's few long columns (2048); 16384: a built-in
     * reduction's long rows are split there, and twice it is the rows of a
     * reduction by index's pieces. Eight pieces fill a group of them, nine
     * spill out of it. */
    static const int64_t units[] = {DC_ASSOC_CHUNK, 4080, 4096, 16384};
    static const int64_t mults[] = {1, 2, 3, 8, 9, 12};
    const int e = c - 88, r = e / 4;                  /* r: 0 .. 41 */
    const int64_t unit = units[e % 4], d = r % 7 - 3; /* -3 .. 3 */
    int64_t m = mults[r / 7];
    while (m > 1 && m * unit + d > FZ_MAX_ELEMENTS)
        --m;
    return m * unit + d;
}

/* The product of the sizes, zeros counted as ones: what the outputs and
 * the reference's groups cost even where the input is empty. */
static int64_t span(int ndim, const int64_t *shape)
{
    int64_t s = 1;
    for (int d = 0; d < ndim; ++d)
        s *= shape[d] > 0 ? shape[d] : 1;
    return s;
}

/* Cuts the shape down to `budget` (span): the largest axis not in keep
 * first, then those of keep. */
static void fit_budget(int ndim, int64_t *shape, unsigned keep, int64_t budget)
{
    while (span(ndim, shape) > budget) {
        int best = -1;
        for (int pass = 0; pass < 2 && best < 0; ++pass)
            for (int d = 0; d < ndim; ++d) {
                const bool kept = (keep >> d) & 1u;
                if (shape[d] > 1 && kept == (pass == 1) && (best < 0 || shape[d] > shape[best]))
                    best = d;
            }
        const int64_t others = span(ndim, shape) / shape[best];
        shape[best] = others >= budget ? 1 : budget / others;
    }
}

/* Reads one case; the bytes past the input's end read as 0. `budget`: the
 * elements the case may have. Every case decoded is valid: the choices
 * that would make it invalid are turned into valid ones. */
static void decode_case(fz_input *in, int64_t budget, fz_case *c)
{
    memset(c, 0, sizeof *c);
    const size_t at0 = in->at;
    c->fam = (family)(fz_u8(in) % F_COUNT);
    c->user = c->fam >= F_USER_REDUCE;
    const uint8_t opb = fz_u8(in);
    c->op = c->user ? opb % 5 : c->fam == F_REDUCE ? opb % 6 : opb % 4;
    c->ref = c->user ? &U_OPS[c->op] : c->op < 4 ? &B_OPS[c->op] : c->op == B_MEAN ? &B_OPS[DC_REDUCE_SUM] : NULL;
    c->k = c->ref ? c->ref->k : 1;
    const uint8_t flags = fz_u8(in);
    c->dtype = (flags & 1) ? DC_F32 : DC_F64;
    c->keepdims = flags & 2;
    c->exclusive = flags & 4;
    c->named = flags & 8;
    const bool variant = flags & 16;
    c->seed = flags & 128;
    /* the seed replaces the loss, to which the earlier gradient belongs */
    c->accumulate = (flags & 32) && !c->seed;
    /* with one field, the one output is used */
    c->partial = (flags & 64) && c->k > 1;
    const bool reduce = c->fam == F_REDUCE || c->fam == F_USER_REDUCE;
    const bool scan = c->fam == F_SCAN || c->fam == F_USER_SCAN;
    c->ndim = fz_u8(in) % 4;
    if (!reduce && c->ndim == 0) /* scans and reductions by index need an axis */
        c->ndim = 1;
    const uint8_t axb = fz_u8(in);
    for (int d = 0; d < 3; ++d)
        c->shape[d] = fz_size(fz_u8(in));
    const uint8_t view0 = fz_u8(in), view1 = fz_u8(in);
    const uint8_t segb = fz_u8(in), idxb = fz_u8(in), datab = fz_u8(in);
    c->seed_bits = fz_u16(in);
    c->pokes[0] = fz_u16(in);
    c->pokes[1] = fz_u16(in);
    /* every case is FZ_CASE_BYTES long, whatever it reads: the next one
     * starts there */
    in->at = at0 + FZ_CASE_BYTES < in->n ? at0 + FZ_CASE_BYTES : in->n;

    /* the axes, and those whose length the budget keeps */
    unsigned keep = 0;
    if (reduce) {
        c->mask = axb & 7u & ((1u << c->ndim) - 1u);
        if (c->mask == 0) {
            c->n_axes = 0; /* every axis */
            keep = (1u << c->ndim) - 1u;
        } else {
            keep = c->mask;
            for (int d = 0; d < c->ndim; ++d)
                if ((c->mask >> d) & 1u)
                    c->axes[c->n_axes++] = (axb & 16) ? d - c->ndim : d;
            if (axb & 32)
                for (int a = 0; a < c->n_axes / 2; ++a) {
                    const int t = c->axes[a];
                    c->axes[a] = c->axes[c->n_axes - 1 - a];
                    c->axes[c->n_axes - 1 - a] = t;
                }
        }
    } else if (scan) {
        const int a = (axb & 7) % c->ndim;
        c->axis = (axb & 16) ? a - c->ndim : a;
        keep = 1u << a;
    } else {
        keep = 1u; /* the rows */
    }
    fit_budget(c->ndim, c->shape, keep, budget);

    /* reductions by index: n_segments (0 only with no rows) and its
     * outputs within the budget */
    if (!reduce && !scan) {
        static const int64_t big[] = {100, 1000, 4095, 4096, 4097, 5000, 16384, 32768};
        int64_t s = segb < 144 ? segb % 72 : big[(segb - 144) % 8];
        if (s == 0 && c->shape[0] > 0)
            s = 1;
        const int64_t width = span(c->ndim - 1, c->shape + 1);
        if (s * width > budget)
            s = budget / width > 1 ? budget / width : 1;
        c->n_segments = s;
        c->index_kind = idxb % 4;
    }

    /* the view: a slice needs an axis (and its base is kept within twice
     * the budget), a transpose two */
    if (c->ndim >= 1 && (view0 & 2)) {
        int64_t base[3];
        memcpy(base, c->shape, sizeof base);
        c->slice_axis = (view0 >> 4) % c->ndim;
        c->slice_extra = 1 + view1 % 4;
        c->slice_start = (view1 >> 2) % (c->slice_extra + 1);
        base[c->slice_axis] += c->slice_extra;
        c->slice = span(c->ndim, base) <= 2 * budget;
    }
    if (c->ndim >= 2 && (view0 & 1)) {
        static const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
        const int p = c->ndim == 2 ? 0 : (view0 >> 2) % 3;
        c->transpose = true;
        c->t0 = pairs[p][0];
        c->t1 = pairs[p][1];
    }

    /* the values: by default those on which each built-in's gradient
     * rules matter (ties and NaN for the maximum, zeros among factors);
     * prod keeps to factors near 1; the user operators have their own */
    static const data_kind own[6][2] = {{D_SIGNED, D_SIGNED}, {D_NEAR1, D_NEAR1_ZEROS}, {D_TIES, D_TIES_NAN},
                                        {D_TIES, D_TIES_NAN}, {D_LSE, D_LSE_NEGINF},    {D_SIGNED, D_SIGNED}};
    if (c->user)
        c->data = D_SIGNED; /* unused */
    else if (c->op == DC_REDUCE_PROD || datab % 8 == 0)
        c->data = own[c->op][variant];
    else
        c->data = (data_kind)((datab % 8 - 1) % D_COUNT);
}

/* "[3, 2020]" */
static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    int at = snprintf(buf, size, "[");
    for (int d = 0; d < ndim && at < (int)size; ++d)
        at += snprintf(buf + at, size - (size_t)at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < (int)size)
        snprintf(buf + at, size - (size_t)at, "]");
    return buf;
}

/* The call a case makes: "dc_op_reduce(DC_REDUCE_MAX)", "dc_op_max",
 * "dc_op_scan_fn(linrec)". */
static const char *call_name(const fz_case *c, char *buf, size_t size)
{
    static const char *const reductions[4] = {"DC_REDUCE_SUM", "DC_REDUCE_PROD", "DC_REDUCE_MAX", "DC_REDUCE_MIN"};
    switch (c->fam) {
    case F_REDUCE:
        if (c->op >= 4 || c->named)
            snprintf(buf, size, "dc_op_%s", builtin_names[c->op]);
        else
            snprintf(buf, size, "dc_op_reduce(%s)", reductions[c->op]);
        break;
    case F_SCAN:
        snprintf(buf, size, "dc_op_scan(%s)", reductions[c->op]);
        break;
    case F_SEGMENT:
        snprintf(buf, size, "dc_op_segment_reduce(%s)", reductions[c->op]);
        break;
    case F_USER_REDUCE:
        snprintf(buf, size, "dc_op_reduce_fn(%s)", U_OPS[c->op].name);
        break;
    case F_USER_SCAN:
        snprintf(buf, size, "dc_op_scan_fn(%s)", U_OPS[c->op].name);
        break;
    default:
        snprintf(buf, size, "dc_op_segment_reduce_fn(%s)", U_OPS[c->op].name);
        break;
    }
    return buf;
}

/* What the case does, for the trace and the report of a mismatch. */
static void describe_case(const fz_case *c, char *buf, size_t size)
{
    char call[64], sh[96];
    int at = snprintf(buf, size, "%s of %s%s", call_name(c, call, sizeof call), dc_dtype_name(c->dtype),
                      shape_text(c->ndim, c->shape, sh, sizeof sh));
    if (c->fam == F_REDUCE || c->fam == F_USER_REDUCE) {
        at += snprintf(buf + at, size - (size_t)at, ", axes {");
        for (int a = 0; a < c->n_axes; ++a)
            at += snprintf(buf + at, size - (size_t)at, "%s%d", a ? ", " : "", c->axes[a]);
        at += snprintf(buf + at, size - (size_t)at, "}%s%s", c->n_axes ? "" : " (every axis)",
                       c->keepdims ? ", keepdims" : "");
    } else if (c->fam == F_SCAN || c->fam == F_USER_SCAN) {
        at += snprintf(buf + at, size - (size_t)at, ", axis %d, %s", c->axis, c->exclusive ? "exclusive" : "inclusive");
    } else {
        at += snprintf(buf + at, size - (size_t)at, ", n_segments %lld, index %s", (long long)c->n_segments,
                       index_names[c->index_kind]);
    }
    if (c->slice)
        at += snprintf(buf + at, size - (size_t)at, ", a slice from %lld along axis %d of a base %lld longer",
                       (long long)c->slice_start, c->slice_axis, (long long)c->slice_extra);
    if (c->transpose)
        at += snprintf(buf + at, size - (size_t)at, ", %sa transpose of axes %d and %d", c->slice ? "then " : "", c->t0,
                       c->t1);
    if (!c->user)
        at += snprintf(buf + at, size - (size_t)at, ", values %s", data_names[c->data]);
    if (!c->user && (c->pokes[0] || c->pokes[1]))
        at += snprintf(buf + at, size - (size_t)at, ", specials at %u and %u (1-based, modulo numel; 0: none)",
                       c->pokes[0], c->pokes[1]);
    snprintf(buf + at, size - (size_t)at, ", seed %llu%s%s%s", (unsigned long long)c->seed_bits,
             c->accumulate ? ", gradient added onto an earlier one" : "",
             c->partial ? ", output 0 unused and the last field without a gradient" : "",
             c->seed ? ", the last output seeded with a broadcast scalar 1" : "");
}

/* ---- checks ------------------------------------------------------------------ */

static char case_text[1024];

/* "[1, 2016]": the multi-index of element i of shape. */
static const char *index_text(int ndim, const int64_t *shape, int64_t i, char *buf, size_t size)
{
    int64_t ix[3] = {0, 0, 0};
    for (int d = ndim - 1; d >= 0; --d) {
        if (shape[d] > 0) {
            ix[d] = i % shape[d];
            i /= shape[d];
        }
    }
    return shape_text(ndim, ix, buf, size);
}

/* got against ref (count values of an array of shape), within tol relative
 * to 1 + |ref| plus a share of the largest finite reference (float32 walks
 * of thousands of steps round by more than their last values' ulps);
 * infinities and NaN must match exactly. */
static void compare(const char *what, int ndim, const int64_t *shape, const double *got, const double *ref,
                    int64_t count, double tol)
{
    double scale = 0;
    for (int64_t i = 0; i < count; ++i)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    scale *= tol > 1e-6 ? 5e-3 : 1e-3;
    int64_t bad = 0, first = -1, worst = -1;
    double worst_err = 0;
    for (int64_t i = 0; i < count; ++i) {
        const double r = ref[i], v = got[i];
        const bool ok =
            isinf(r) || isnan(r) ? v == r || (isnan(r) && isnan(v)) : fabs(v - r) <= tol * (1 + fabs(r) + scale);
        if (!ok) {
            const double err = isfinite(v) && isfinite(r) ? fabs(v - r) / (1 + fabs(r)) : INFINITY;
            if (first < 0)
                first = i;
            if (worst < 0 || err > worst_err)
                worst = i, worst_err = err;
            ++bad;
        }
    }
    if (!bad)
        return;
    char a[64], b[64], sh[96];
    fprintf(stderr, "fuzz_reductions: %s\n", case_text);
    FZ_FAIL("%s (shape %s) differs from the float64 reference at %lld of %lld elements; first at %lld %s: got %.17g, "
            "want %.17g; worst at %lld %s: got %.17g, want %.17g (tolerance %g)",
            what, shape_text(ndim, shape, sh, sizeof sh), (long long)bad, (long long)count, (long long)first,
            index_text(ndim, shape, first, a, sizeof a), got[first], ref[first], (long long)worst,
            index_text(ndim, shape, worst, b, sizeof b), got[worst], ref[worst], tol);
}

/* The two threads' values must be the one thread's, bit for bit (NaN any
 * NaN). */
static void compare_bits(const char *what, int ndim, const int64_t *shape, const double *one, const double *two,
                         int64_t count)
{
    for (int64_t i = 0; i < count; ++i)
        if (memcmp(&one[i], &two[i], sizeof(double)) != 0 && !(isnan(one[i]) && isnan(two[i]))) {
            char a[64], sh[96];
            fprintf(stderr, "fuzz_reductions: %s\n", case_text);
            FZ_FAIL("%s (shape %s): 1 thread and 2 threads differ at element %lld %s: %.17g vs %.17g", what,
                    shape_text(ndim, shape, sh, sizeof sh), (long long)i, index_text(ndim, shape, i, a, sizeof a),
                    one[i], two[i]);
        }
}

/* A call that failed on a valid case. */
static void failed_call(dc_ctx *ctx, const char *call)
{
    fprintf(stderr, "fuzz_reductions: %s\n", case_text);
    FZ_FAIL("%s failed on a valid case (%d threads): %s: %s", call, dc_ctx_num_threads(ctx),
            dc_status_name(dc_last_status(ctx)), dc_last_error(ctx));
}

/* ---- the library's side ------------------------------------------------------ */

/* The base tensor's layout: the input is view(base), and element e of the
 * input (row-major over the logical shape) is element map[e] of base. */
typedef struct layout {
    int ndim;
    int64_t base_shape[3];
    int64_t base_n;
    int64_t *map;
} layout;

static layout make_layout(const fz_case *c)
{
    layout L;
    L.ndim = c->ndim;
    /* the logical shape before the transpose, then the base before the slice */
    int64_t sliced[3] = {0, 0, 0};
    memcpy(sliced, c->shape, sizeof sliced);
    if (c->transpose) {
        sliced[c->t0] = c->shape[c->t1];
        sliced[c->t1] = c->shape[c->t0];
    }
    memcpy(L.base_shape, sliced, sizeof sliced);
    if (c->slice)
        L.base_shape[c->slice_axis] += c->slice_extra;
    L.base_n = numel(c->ndim, L.base_shape);
    const int64_t n = numel(c->ndim, c->shape);
    L.map = xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t e = 0; e < n; ++e) {
        int64_t ix[3] = {0, 0, 0}, rest = e;
        for (int d = c->ndim - 1; d >= 0; --d) {
            ix[d] = rest % c->shape[d];
            rest /= c->shape[d];
        }
        if (c->transpose) {
            const int64_t t = ix[c->t0];
            ix[c->t0] = ix[c->t1];
            ix[c->t1] = t;
        }
        if (c->slice)
            ix[c->slice_axis] += c->slice_start;
        int64_t off = 0;
        for (int d = 0; d < c->ndim; ++d)
            off = off * L.base_shape[d] + ix[d];
        L.map[e] = off;
    }
    return L;
}

static void to_dtype(dc_dtype dtype, const double *v, int64_t n, void *out)
{
    if (dtype == DC_F64) {
        memcpy(out, v, sizeof(double) * (size_t)n);
        return;
    }
    float *f = out;
    for (int64_t i = 0; i < n; ++i)
        f[i] = (float)v[i];
}

static void read_tensor(dc_ctx *ctx, const dc_tensor *t, double *out)
{
    const int64_t n = dc_tensor_numel(t);
    if (n == 0)
        return;
    const dc_dtype dtype = dc_tensor_dtype(t);
    void *h = xmalloc(dc_dtype_size(dtype) * (size_t)n);
    if (dc_tensor_to_host(t, h, dc_dtype_size(dtype) * (size_t)n) != DC_OK)
        failed_call(ctx, "dc_tensor_to_host");
    if (dtype == DC_F64) {
        memcpy(out, h, sizeof(double) * (size_t)n);
    } else {
        for (int64_t i = 0; i < n; ++i)
            out[i] = ((const float *)h)[i];
    }
    free(h);
}

/* A tape tensor holding v (values rounded to the dtype). */
static dc_tensor *tape_tensor(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape,
                              const double *v)
{
    const int64_t n = numel(ndim, shape);
    void *h = xmalloc(dc_dtype_size(dtype) * (size_t)n);
    to_dtype(dtype, v, n, h);
    dc_tensor *t = dc_tape_tensor_new(tape, dtype, ndim, shape, n ? h : NULL);
    free(h);
    if (!t)
        failed_call(ctx, "dc_tape_tensor_new");
    return t;
}

/* What one run gives: the outputs (k fields of n_y) and the base tensors'
 * gradients (k fields of base_n; a field without one reads as zeros). */
typedef struct run_result {
    double *y, *gbase;
} run_result;

/* Runs the case on ctx: x (k logical fields of n), the index, the loss
 * sum_f sum(out_f * W_f) (or the seed) and V (the earlier gradient's
 * weights), then reads back the outputs and gradients. out_shape: the
 * shape the outputs must have. */
static void lib_run(dc_ctx *ctx, dc_tape *tape, const fz_case *c, const layout *L, const double *x, const double *index,
                    const double *W, const double *V, int out_ndim, const int64_t *out_shape, run_result *res)
{
    const int k = c->k;
    const int64_t n = numel(c->ndim, c->shape), n_y = numel(out_ndim, out_shape);
    dc_tape_reset(tape);
    dc_clear_error(ctx);
    dc_tensor *base[MAXK], *in[MAXK], *out[MAXK] = {NULL, NULL, NULL, NULL};
    double *bv = xmalloc(sizeof(double) * (size_t)L->base_n);
    void *h = xmalloc(sizeof(double) * (size_t)L->base_n);
    for (int f = 0; f < k; ++f) {
        /* what lies outside the view is NaN: read by a kernel, it shows */
        for (int64_t i = 0; i < L->base_n; ++i)
            bv[i] = NAN;
        for (int64_t e = 0; e < n; ++e)
            bv[L->map[e]] = x[f * n + e];
        base[f] = dc_tensor_new(ctx, c->dtype, c->ndim, L->base_shape);
        if (!base[f])
            failed_call(ctx, "dc_tensor_new");
        to_dtype(c->dtype, bv, L->base_n, h);
        if (L->base_n && dc_tensor_from_host_copy(base[f], h, dc_dtype_size(c->dtype) * (size_t)L->base_n) != DC_OK)
            failed_call(ctx, "dc_tensor_from_host_copy");
        if (dc_tensor_set_requires_grad(base[f], !(c->partial && f == k - 1)) != DC_OK)
            failed_call(ctx, "dc_tensor_set_requires_grad");
        in[f] = base[f];
        if (c->slice) {
            in[f] =
                dc_op_slice(tape, in[f], c->slice_axis, c->slice_start, L->base_shape[c->slice_axis] - c->slice_extra);
            if (!in[f])
                failed_call(ctx, "dc_op_slice");
        }
        if (c->transpose) {
            in[f] = dc_op_transpose(tape, in[f], c->t0, c->t1);
            if (!in[f])
                failed_call(ctx, "dc_op_transpose");
        }
    }
    free(bv);
    free(h);
    dc_tensor *idx = NULL;
    if (c->fam == F_SEGMENT || c->fam == F_USER_SEGMENT)
        idx = tape_tensor(ctx, tape, c->dtype, 1, c->shape, index);

    char call[64];
    call_name(c, call, sizeof call);
    dc_status st = DC_OK;
    switch (c->fam) {
    case F_REDUCE: {
        typedef dc_tensor *(*reduce_fn)(dc_tape *, dc_tensor *, int, const int *, bool);
        static const reduce_fn fns[] = {dc_op_sum, dc_op_prod, dc_op_max, dc_op_min, dc_op_logsumexp, dc_op_mean};
        const int *axes = c->n_axes ? c->axes : NULL;
        if (c->op >= 4 || c->named)
            out[0] = fns[c->op](tape, in[0], c->n_axes, axes, c->keepdims);
        else
            out[0] = dc_op_reduce(tape, in[0], (dc_reduction)c->op, c->n_axes, axes, c->keepdims);
        break;
    }
    case F_SCAN:
        out[0] = dc_op_scan(tape, in[0], (dc_reduction)c->op, c->axis, c->exclusive);
        break;
    case F_SEGMENT:
        out[0] = dc_op_segment_reduce(tape, in[0], idx, c->n_segments, (dc_reduction)c->op);
        break;
    case F_USER_REDUCE:
        st = dc_op_reduce_fn(tape, u_assoc(c->op), in, c->n_axes, c->n_axes ? c->axes : NULL, c->keepdims, out);
        break;
    case F_USER_SCAN:
        st = dc_op_scan_fn(tape, u_assoc(c->op), in, c->axis, c->exclusive, out);
        break;
    default:
        st = dc_op_segment_reduce_fn(tape, u_assoc(c->op), in, idx, c->n_segments, out);
        break;
    }
    if (st != DC_OK)
        failed_call(ctx, call);
    for (int f = 0; f < k; ++f) {
        if (!out[f])
            failed_call(ctx, call);
        const int nd = dc_tensor_ndim(out[f]);
        const int64_t *s = dc_tensor_shape(out[f]);
        if (nd != out_ndim || memcmp(s, out_shape, sizeof(int64_t) * (size_t)nd) != 0 ||
            dc_tensor_dtype(out[f]) != c->dtype) {
            char a[96], b[96];
            fprintf(stderr, "fuzz_reductions: %s\n", case_text);
            FZ_FAIL("%s returned %s%s as output %d, want %s%s", call, dc_dtype_name(dc_tensor_dtype(out[f])),
                    shape_text(nd, s, a, sizeof a), f, dc_dtype_name(c->dtype),
                    shape_text(out_ndim, out_shape, b, sizeof b));
        }
        read_tensor(ctx, out[f], res->y + f * n_y);
    }

    /* the loss; output 0 out of it where the case leaves it unused */
    dc_tensor *loss = NULL;
    for (int f = c->partial ? 1 : 0; f < k && !c->seed; ++f) {
        dc_tensor *w = tape_tensor(ctx, tape, c->dtype, out_ndim, out_shape, W + f * n_y);
        dc_tensor *t = dc_op_sum(tape, dc_op_mul(tape, out[f], w), 0, NULL, false);
        loss = loss ? dc_op_add(tape, loss, t) : t;
        if (!loss)
            failed_call(ctx, "the loss (dc_op_mul, dc_op_sum, dc_op_add)");
    }
    /* the earlier gradient: sum(x * V), recorded after the op, so that its
     * adjoint runs first and the op's is added onto it */
    for (int f = 0; c->accumulate && f < k - (c->partial ? 1 : 0); ++f) {
        dc_tensor *v = tape_tensor(ctx, tape, c->dtype, c->ndim, c->shape, V + f * n);
        loss = dc_op_add(tape, loss, dc_op_sum(tape, dc_op_mul(tape, in[f], v), 0, NULL, false));
        if (!loss)
            failed_call(ctx, "the loss (dc_op_mul, dc_op_sum, dc_op_add)");
    }
    if (c->seed) {
        dc_tensor *one = dc_tape_scalar(tape, c->dtype, 1.0);
        if (!one)
            failed_call(ctx, "dc_tape_scalar");
        if (dc_backward_with(tape, out[k - 1], one) != DC_OK)
            failed_call(ctx, "dc_backward_with");
    } else if (dc_backward(tape, loss) != DC_OK) {
        failed_call(ctx, "dc_backward");
    }
    for (int f = 0; f < k; ++f) {
        double *g = res->gbase + f * L->base_n;
        const dc_tensor *gt = dc_tensor_grad(base[f]);
        if (c->partial && f == k - 1 && gt) {
            fprintf(stderr, "fuzz_reductions: %s\n", case_text);
            FZ_FAIL("input %d requires no gradient but has one after the backward pass", f);
        }
        if (gt)
            read_tensor(ctx, gt, g);
        else
            memset(g, 0, sizeof(double) * (size_t)L->base_n);
        dc_tensor_free(base[f]);
    }
    dc_tape_reset(tape);
}

/* ---- one case ----------------------------------------------------------------- */

/* The tolerances: float64 within 1e-9 of 1 + |ref| (plus 1e-3 of the
 * largest reference), float32 within 2e-3 (plus 5e-3 of the largest). */
static double tolerance(dc_dtype dtype) { return dtype == DC_F64 ? 1e-9 : 2e-3; }

static void run_case(const fz_case *c)
{
    const int k = c->k;
    const int64_t n = numel(c->ndim, c->shape);
    fz_rng rng = {0x9e3779b97f4a7c15ull ^ (c->seed_bits * 0xbf58476d1ce4e5b9ull)};

    /* the values, as the dtype holds them */
    double *x = xmalloc(sizeof(double) * (size_t)(k * n));
    if (c->user) {
        user_values(c->ref, &rng, n, x);
    } else {
        for (int64_t i = 0; i < n; ++i)
            x[i] = builtin_value(&rng, c->data);
        for (int p = 0; p < 2; ++p)
            if (c->pokes[p] && n > 0)
                x[(c->pokes[p] - 1) % n] = special_value(c->data);
    }
    if (c->dtype == DC_F32)
        for (int64_t i = 0; i < k * n; ++i)
            x[i] = (double)(float)x[i];

    /* the groups the outputs combine, and the outputs' shape */
    groups g;
    int kind = K_REDUCE, out_ndim = 0;
    int64_t out_shape[3] = {0, 0, 0};
    double *index = NULL;
    if (c->fam == F_SCAN || c->fam == F_USER_SCAN) {
        g = groups_scan(c->ndim, c->shape, c->axis < 0 ? c->axis + c->ndim : c->axis);
        kind = c->exclusive ? K_XSCAN : K_SCAN;
        out_ndim = c->ndim;
        memcpy(out_shape, c->shape, sizeof out_shape);
    } else if (c->fam == F_SEGMENT || c->fam == F_USER_SEGMENT) {
        const int64_t rows = c->shape[0], S = c->n_segments;
        index = xmalloc(sizeof(double) * (size_t)rows);
        for (int64_t i = 0; i < rows; ++i) {
            switch (c->index_kind) {
            case 0:
                index[i] = (double)(i * S / rows);
                break;
            case 1:
                index[i] = floor(unif(&rng) * (double)S);
                break;
            case 2:
                index[i] = (double)(S - 1);
                break;
            default:
                index[i] = (double)(S - 1 - i * S / rows);
                break;
            }
        }
        g = groups_segment(rows, numel(c->ndim - 1, c->shape + 1), index, S);
        out_ndim = c->ndim;
        memcpy(out_shape, c->shape, sizeof out_shape);
        out_shape[0] = S;
    } else {
        const unsigned mask = c->n_axes ? c->mask : (1u << c->ndim) - 1u;
        g = groups_reduce(c->ndim, c->shape, mask);
        for (int d = 0; d < c->ndim; ++d)
            if (!((mask >> d) & 1u))
                out_shape[out_ndim++] = c->shape[d];
            else if (c->keepdims)
                out_shape[out_ndim++] = 1;
    }
    const int64_t n_y = kind == K_REDUCE ? g.n_out : n;

    /* the adjoints: of the loss (random, as float32 holds them), with output
     * 0's out of it, or the seed's ones on the last output */
    double *W = xmalloc(sizeof(double) * (size_t)(k * n_y)), *Wref = xmalloc(sizeof(double) * (size_t)(k * n_y));
    for (int64_t i = 0; i < k * n_y; ++i)
        W[i] = (double)(float)(0.5 + unif(&rng)) * (unif(&rng) < 0.5 ? -1 : 1);
    for (int64_t i = 0; i < k * n_y; ++i) {
        const int f = (int)(i / (n_y ? n_y : 1));
        Wref[i] = c->seed ? (f == k - 1 ? 1.0 : 0.0) : c->partial && f == 0 ? 0.0 : W[i];
    }
    double *V = NULL;
    if (c->accumulate) {
        V = xmalloc(sizeof(double) * (size_t)(k * n));
        for (int64_t i = 0; i < k * n; ++i)
            V[i] = (double)(float)(2 * unif(&rng) - 1);
    }

    /* the reference */
    double *ry = xmalloc(sizeof(double) * (size_t)(k * n_y)), *rg = xmalloc(sizeof(double) * (size_t)(k * n));
    if (c->op == B_LSE && !c->user) {
        ref_lse(n, x, &g, Wref, ry, rg);
    } else if (c->op == B_MEAN && !c->user) {
        /* the sum times 1/count (0/0: NaN), and the adjoint spread likewise */
        for (int64_t o = 0; o < n_y; ++o)
            Wref[o] *= 1.0 / (double)(g.start[o + 1] - g.start[o]);
        ref_run(c->ref, kind, n, x, &g, Wref, ry, rg);
        for (int64_t o = 0; o < n_y; ++o)
            ry[o] *= 1.0 / (double)(g.start[o + 1] - g.start[o]);
    } else {
        ref_run(c->ref, kind, n, x, &g, Wref, ry, rg);
    }
    if (V)
        for (int64_t i = 0; i < k * n; ++i)
            rg[i] += V[i];

    /* one thread against the reference, two threads against one */
    layout L = make_layout(c);
    run_result r[2];
    for (int t = 0; t < 2; ++t) {
        r[t].y = xmalloc(sizeof(double) * (size_t)(k * n_y));
        r[t].gbase = xmalloc(sizeof(double) * (size_t)(k * L.base_n));
    }
    double *gx = xmalloc(sizeof(double) * (size_t)n);
    const double tol = tolerance(c->dtype);
    lib_run(ctx1, tape1, c, &L, x, index, W, V, out_ndim, out_shape, &r[0]);
    for (int f = 0; f < k; ++f) {
        char what[96];
        snprintf(what, sizeof what, "output %d", f);
        compare(what, out_ndim, out_shape, r[0].y + f * n_y, ry + f * n_y, n_y, tol);
        if (c->partial && f == k - 1)
            continue;
        /* the gradient where the view lies; exact zeros elsewhere */
        bool *in_view = xcalloc((size_t)L.base_n, sizeof(bool));
        for (int64_t e = 0; e < n; ++e) {
            gx[e] = r[0].gbase[f * L.base_n + L.map[e]];
            in_view[L.map[e]] = true;
        }
        for (int64_t i = 0; i < L.base_n; ++i)
            if (!in_view[i] && r[0].gbase[f * L.base_n + i] != 0.0) {
                char a[64];
                fprintf(stderr, "fuzz_reductions: %s\n", case_text);
                FZ_FAIL("gradient of input %d at base element %s, outside the view, is %.17g, not 0", f,
                        index_text(L.ndim, L.base_shape, i, a, sizeof a), r[0].gbase[f * L.base_n + i]);
            }
        free(in_view);
        snprintf(what, sizeof what, "gradient of input %d", f);
        compare(what, c->ndim, c->shape, gx, rg + f * n, n, tol);
    }
    lib_run(ctx2, tape2, c, &L, x, index, W, V, out_ndim, out_shape, &r[1]);
    compare_bits("outputs", out_ndim, out_shape, r[0].y, r[1].y, k * n_y);
    compare_bits("gradients (base tensors, fields one after another)", L.ndim, L.base_shape, r[0].gbase, r[1].gbase,
                 k * L.base_n);
    if (tracing)
        fprintf(stderr,
                "  ok: %lld outputs and %lld gradients within %g of the reference, the same bits on 2 threads\n",
                (long long)(k * n_y), (long long)(k * n), tol);

    for (int t = 0; t < 2; ++t) {
        free(r[t].y);
        free(r[t].gbase);
    }
    free(gx);
    free(L.map);
    free(ry);
    free(rg);
    free(V);
    free(W);
    free(Wref);
    free(index);
    free(x);
    groups_free(&g);
}

/* ---- the entry point ------------------------------------------------------------ */

static void free_contexts(void)
{
    dc_tape_free(tape1);
    dc_tape_free(tape2);
    dc_ctx_free(ctx1);
    dc_ctx_free(ctx2);
}

static dc_ctx *make_ctx(int threads)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.num_threads = threads;
    o.seed = 1;
    o.quiet = true;
    dc_ctx *c = dc_ctx_new(&o, NULL);
    if (!c)
        FZ_FAIL("dc_ctx_new failed: %s", dc_last_error(NULL));
    if (dc_ctx_num_threads(c) != threads)
        FZ_FAIL("a context of %d threads has %d (a build without OpenMP?)", threads, dc_ctx_num_threads(c));
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The contexts and their tapes are made once (a tape's first block,
     * 16 MiB with its AddressSanitizer shadow, is slow to make); each run
     * resets its tape. Memory a kernel must write before reading starts as
     * NaN (the library's DC_POISON), in both: a read of it shows in the
     * results. */
    if (!ctx1) {
        setenv("DC_POISON", "1", 1);
        ctx1 = make_ctx(1);
        ctx2 = make_ctx(2);
        tape1 = dc_tape_new(ctx1);
        tape2 = dc_tape_new(ctx2);
        if (!tape1 || !tape2)
            FZ_FAIL("dc_tape_new failed");
        atexit(free_contexts);
    }
    fz_input in = {data, size, 0};
    int64_t budget = FZ_MAX_ELEMENTS;
    for (int i = 0; i < FZ_MAX_CASES && (i == 0 || fz_more(&in)) && budget > 0; ++i) {
        fz_case c;
        decode_case(&in, budget, &c);
        describe_case(&c, case_text, sizeof case_text);
        if (tracing) {
            fprintf(stderr, "case %d: %s\n", i, case_text);
            fflush(stderr);
        }
        run_case(&c);
        budget -= span(c.ndim, c.shape);
    }
    return 0;
}
