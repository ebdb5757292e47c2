/* Shapes as seeded random properties: every op of include/dualcast/ops.h
 * and the reductions over axes of reduce.h,
 * broadcast functions through dc_broadcast, dc_broadcast_policy and
 * dc_broadcast1, and the constructors that take a shape (dc_tensor_new,
 * dc_tensor_from_host, dc_tape_tensor_new), on shapes of rank 0 to 8 whose
 * sizes are 0, 1, small or large: up to, at and one past the bound that
 * dc_tensor_new accepts (the product of the sizes, zeros counted as ones, at
 * most INT64_MAX / 16: see dc_check_shape), valid and not.
 *
 * Each case makes its operands, makes one call, and checks that the call
 * either fails with the documented status and a message naming the function,
 * or succeeds with the shape computed here independently (NumPy broadcasting,
 * matmul batch broadcasting, reductions, layout ops, concat, embedding), a
 * shape within the bound. Results of up to OUT_LIMIT elements are compared
 * with a naive reference in double; where the result requires a gradient the
 * case sums it to a scalar, runs dc_backward and compares the gradient of
 * every operand with the analytic one (the suite's gradient checks against
 * central differences are in test_ops and test_bfn). Large sizes only appear
 * in empty tensors (a zero size elsewhere) or in calls that must fail, so no
 * case allocates more than a few hundred kilobytes. New buffers are filled
 * with NaN (DC_POISON=1), so an element nobody writes shows as a mismatch.
 *
 * A failed check prints the seed, the op, the case number and the case; the
 * case goes on to its next check where that is safe, and each op's test fails
 * at its end. A crash, an AddressSanitizer report or a case that runs past
 * the timeout prints the case it was in; so does an UndefinedBehaviorSanitizer
 * report with UBSAN_OPTIONS=abort_on_error=1 (gcc's UBSan runtime exits
 * without the death callback otherwise).
 *
 * Environment:
 *   DC_PROPERTY_SEED=n          base seed (decimal or 0x hex; default below)
 *   DC_PROPERTY_CASES=n         cases per op (default DEFAULT_CASES; matmul 4 times as many)
 *   DC_PROPERTY_OP=name         only the op of that name (the test's name), or
 *                               "pinned": the reproductions, fixed shapes
 *   DC_PROPERTY_CASE=n          only case n (with the seed printed on failure)
 *   DC_PROPERTY_CASE_TIMEOUT=s  a case running longer aborts (default 60)
 *   DC_PROPERTY_VERBOSE=1       print every case before it runs, and its outcome
 *
 * The pinned cases reproduce failures the library once had: ops on empty
 * operands returned results past the bound instead of failing ([2^31, 0, 1] +
 * [1, 0, 2^31], 40 x [0, 2^58] concatenated along axis 1, [2^34, 1, 0] @
 * [0, 2^30], ids [2^40, 0] into a table [0, 2^20]), so that byte counts and
 * sizes computed from them wrapped; the backward pass of [3, 0, 2] @ [2, 4]
 * wrote past a one-byte buffer; and [2^40, 0, 1] @ [1, 1] visited all 2^40
 * empty matrices of its batch, running for hours. dc_tensor_from_host's
 * refusals must name dc_tensor_from_host (they used to name dc_tensor_new). */
#define _POSIX_C_SOURCE 200809L /* sigaction, alarm, setenv */

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/kernels/prod_sign_fns.h"
#include "support/test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#define DC_PROPERTY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DC_PROPERTY_ASAN 1
#endif
#endif
#ifdef DC_PROPERTY_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

enum {
    DEFAULT_CASES = 120,
    OPERAND_LIMIT = 1024, /* elements of an operand that is not empty */
    OUT_LIMIT = 1 << 14,  /* elements of a result a case may ask for */
    MAX_IN = 48,          /* operands of one call (concat joins up to 48) */
    MAX_EW_IN = 10,       /* inputs of an elementwise op or broadcast function */
    MAX_OUT = 2,
    DESC_SIZE = 8192,
    MAX_PRINTED = 25, /* failures printed per op; the rest are counted */
};

/* The bound of dc_check_shape: the product of the sizes, a zero counted as
 * one, is at most this. */
#define SPAN_BOUND (INT64_MAX / 16)

/* ---- random numbers (independent of the library's generator) ---- */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* An integer in [lo, hi]. */
static int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    const uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0: the whole range */
    return (int64_t)((uint64_t)lo + (span ? rng_next(r) % span : rng_next(r)));
}

static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }
static double rng_uniform(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }
static bool rng_chance(rng *r, double p) { return rng_unit(r) < p; }

/* ---- shapes ---- */

/* Room for one axis more than a tensor may have, for ranks that must fail. */
typedef struct dims {
    int nd;
    int64_t d[DC_MAX_DIMS + 1];
} dims;

static bool has_zero(const dims *s)
{
    for (int i = 0; i < s->nd; ++i)
        if (s->d[i] == 0)
            return true;
    return false;
}

/* The product of the sizes, zeros counted as ones, or -1 past SPAN_BOUND
 * (and for a negative size). */
static int64_t span_of(const dims *s)
{
    int64_t p = 1;
    for (int i = 0; i < s->nd; ++i) {
        const int64_t a = s->d[i] > 0 ? s->d[i] : 1;
        if (s->d[i] < 0 || p > SPAN_BOUND / a)
            return -1;
        p *= a;
    }
    return p;
}

static bool within_bound(const dims *s) { return s->nd >= 0 && s->nd <= DC_MAX_DIMS && span_of(s) >= 0; }

/* The number of elements of a shape within the bound. */
static int64_t numel_of(const dims *s) { return has_zero(s) ? 0 : span_of(s); }

/* a * b and a + b for sizes, INT64_MAX where they would overflow. */
static int64_t sat_mul(int64_t a, int64_t b) { return (a != 0 && b > INT64_MAX / a) ? INT64_MAX : a * b; }
static int64_t sat_add(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }

static const char *dims_str(const dims *s, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->nd && at < size; ++i)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)s->d[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

static dims tensor_dims(const dc_tensor *t)
{
    dims s = {dc_tensor_ndim(t), {0}};
    for (int i = 0; i < s.nd && i < DC_MAX_DIMS; ++i)
        s.d[i] = dc_tensor_shape(t)[i];
    return s;
}

static bool dims_equal(const dims *a, const dims *b)
{
    if (a->nd != b->nd)
        return false;
    for (int i = 0; i < a->nd; ++i)
        if (a->d[i] != b->d[i])
            return false;
    return true;
}

/* Large sizes: 2^20, around 2^31 and 2^32 (int overflows), 2^40, and around the
 * bound itself (2^59 - 1) up to INT64_MAX. */
static const int64_t large_sizes[] = {
    (int64_t)1 << 20, (int64_t)1 << 30, ((int64_t)1 << 31) - 1, (int64_t)1 << 31, ((int64_t)1 << 32) + 1,
    (int64_t)1 << 34, (int64_t)1 << 40, (int64_t)1 << 58,       SPAN_BOUND,       SPAN_BOUND + 1,
    (int64_t)1 << 62, INT64_MAX,
};
enum { N_LARGE = sizeof large_sizes / sizeof large_sizes[0] };

typedef enum shape_mode {
    MODE_SMALL,      /* sizes 0 to 5 */
    MODE_LARGE,      /* large sizes among them */
    MODE_NEAR_BOUND, /* one size puts the span one below, at or one past the bound */
} shape_mode;

static shape_mode draw_mode(rng *r)
{
    const double u = rng_unit(r);
    return u < 0.5 ? MODE_SMALL : u < 0.85 ? MODE_LARGE : MODE_NEAR_BOUND;
}

static int64_t draw_size(rng *r, bool large)
{
    const double u = rng_unit(r);
    if (u < 0.12)
        return 0;
    if (u < 0.40)
        return 1;
    if (!large || u < 0.82)
        return rng_int(r, 2, 5);
    return large_sizes[rng_int(r, 0, N_LARGE - 1)];
}

/* One size chosen so that the span is the bound's neighbour or the bound,
 * with a zero elsewhere where there is room for one (so that nothing need be
 * allocated). */
static void near_bound(rng *r, dims *s)
{
    if (s->nd == 0)
        return;
    const int i = (int)rng_int(r, 0, s->nd - 1);
    bool zero = false;
    for (int j = 0; j < s->nd; ++j) {
        if (j != i && s->d[j] > 5)
            s->d[j] = 1;
        zero = zero || (j != i && s->d[j] == 0);
    }
    if (!zero && s->nd >= 2) {
        int j = (int)rng_int(r, 0, s->nd - 2);
        s->d[j >= i ? j + 1 : j] = 0;
    }
    s->d[i] = 1;
    const int64_t others = span_of(s);
    const int64_t at = SPAN_BOUND / others + rng_int(r, -1, 1);
    s->d[i] = at > 0 ? at : 1;
}

static dims draw_dims(rng *r, shape_mode mode, int nd)
{
    dims s = {nd, {0}};
    for (int i = 0; i < nd; ++i)
        s.d[i] = draw_size(r, mode != MODE_SMALL);
    if (mode == MODE_NEAR_BOUND)
        near_bound(r, &s);
    return s;
}

/* Whether a tensor of this shape can be made here: valid, and empty or
 * small. */
static bool creatable(const dims *s) { return within_bound(s) && (has_zero(s) || numel_of(s) <= OPERAND_LIMIT); }

static int largest_axis(const dims *s)
{
    int at = 0;
    for (int i = 1; i < s->nd; ++i)
        if (s->d[i] > s->d[at])
            at = i;
    return at;
}

/* Sets the largest sizes to 1 until a tensor of the shape can be made (a
 * size 1 broadcasts with anything, so broadcast operands stay compatible). */
static void make_creatable(dims *s)
{
    while (!creatable(s))
        s->d[largest_axis(s)] = 1;
}

/* The flat index, in a row-major tensor of shape `in`, of the element read
 * for element e of `out` when `in` is broadcast to `out` (NumPy rules). */
static int64_t broadcast_index(const dims *out, int64_t e, const dims *in)
{
    int64_t idx = 0, mul = 1;
    for (int d = out->nd - 1; d >= 0; --d) {
        const int64_t c = e % out->d[d];
        e /= out->d[d];
        const int id = d - (out->nd - in->nd);
        if (id < 0)
            break;
        if (in->d[id] != 1)
            idx += c * mul;
        mul *= in->d[id];
    }
    return idx;
}

/* NumPy broadcasting of n shapes: aligned at the last axis, sizes equal or
 * 1, a missing axis counting as 1. False when they do not broadcast. */
static bool broadcast_dims(int n, const dims *const *in, dims *out)
{
    out->nd = 0;
    for (int i = 0; i < n; ++i)
        out->nd = in[i]->nd > out->nd ? in[i]->nd : out->nd;
    for (int a = 1; a <= out->nd; ++a) {
        int64_t size = 1;
        for (int i = 0; i < n; ++i) {
            if (in[i]->nd < a)
                continue;
            const int64_t s = in[i]->d[in[i]->nd - a];
            if (s == 1)
                continue;
            if (size != 1 && s != size)
                return false;
            size = s;
        }
        out->d[out->nd - a] = size;
    }
    return true;
}

/* ---- cases ---- */

typedef enum fill_kind {
    FILL_UNIFORM,  /* uniform in [-2, 2) */
    FILL_AWAY0,    /* magnitude in [0.5, 2), either sign */
    FILL_POSITIVE, /* uniform in [0.25, 2.5) */
    FILL_COND,     /* 0 or 1 */
    FILL_GATE,     /* 0 or uniform in [-2, 2) */
    FILL_INDEX,    /* an integer in 0 .. index_limit - 1, sometimes not */
    FILL_LOGIT,    /* uniform in [-3, 3) */
} fill_kind;

typedef struct operand {
    dims shape; /* as the op sees it */
    dc_dtype dtype;
    fill_kind fill;
    int64_t index_limit; /* FILL_INDEX */
    bool bad_index;      /* FILL_INDEX: one value that is not a valid index */
    bool differentiable; /* the op sends it a gradient */
    bool requires_grad;
    bool transposed; /* a dc_op_transpose view of a leaf stored with its last two axes swapped */
    /* or, when slice_extra > 0, a dc_op_slice view of a leaf with slice_extra
     * more elements along slice_axis, from slice_start */
    int slice_axis;
    int64_t slice_extra, slice_start;
    double *vals;    /* numel values, row-major in `shape`, as stored in dtype */
    dc_tensor *leaf; /* persistent */
    dc_tensor *t;    /* what the op gets: the leaf or its view */
} operand;

typedef enum op_kind {
    K_EW,     /* elementwise ops of ops.h */
    K_BFN,    /* broadcast functions */
    K_REDUCE, /* dc_op_sum, dc_op_mean, dc_op_prod, dc_op_max, dc_op_min, dc_op_logsumexp */
    K_MATMUL,
    K_TRANSPOSE,
    K_RESHAPE,
    K_SLICE,
    K_CONCAT,
    K_EMBEDDING,
    K_CROSS_ENTROPY,
    K_CREATE, /* dc_tensor_new, dc_tensor_from_host, dc_tape_tensor_new */
} op_kind;

struct pcase;

/* Values of the outputs and their partial derivatives dy[k][i] (output k,
 * input i) at one element. */
typedef void (*ew_ref_fn)(const double *v, const struct pcase *c, double *y, double dy[MAX_OUT][MAX_EW_IN]);
typedef dc_tensor *(*ew_call_fn)(dc_tape *tape, dc_tensor *const *x, const struct pcase *c);

typedef enum bfn_api { API_BROADCAST, API_POLICY, API_BROADCAST1 } bfn_api;

/* The reductions of reduce.h among the K_REDUCE rows. */
enum { RED_PROD = 1, RED_MAX, RED_MIN, RED_LSE };

typedef struct prop_op {
    const char *name;    /* the test's name, DC_PROPERTY_OP */
    const char *fn_name; /* what a failure's message must name */
    op_kind kind;
    const char *fills; /* K_EW, K_BFN: the inputs' fill kinds, one letter each */
    ew_ref_fn ref;
    ew_call_fn call;  /* K_EW */
    const dc_bfn *fn; /* K_BFN (NULL: prod_sign of a random arity) */
    bool mean;        /* K_REDUCE */
    int reduction;    /* K_REDUCE: 0 a sum or mean, else RED_* */
    int variant;      /* K_CREATE: 0 tensor_new, 1 from_host, 2 tape_tensor_new */
    int weight;       /* cases, in multiples of DC_PROPERTY_CASES (0: 1) */
} prop_op;

typedef struct pcase {
    const prop_op *op;
    int n_in;
    operand in[MAX_IN];
    dc_dtype dtype;
    bool recording;
    /* op arguments */
    double s, t; /* affine (s, t), hard_sigmoid (slope s), step_st (threshold s) */
    int n_axes;  /* reduce */
    int axes[DC_MAX_DIMS + 1];
    bool keepdims;
    int axis0, axis1;      /* transpose; slice and concat: axis0 */
    int64_t start, length; /* slice */
    dims target;           /* reshape; create: the shape */
    const dc_bfn *fn;      /* K_BFN */
    bfn_api api;
    int policy;
    int n_pass, n_out_pass; /* K_BFN: counts given to dc_broadcast; concat: n */
    bool null_shape;        /* create: shape NULL */
    bool with_data;         /* dc_tape_tensor_new: data given (else zeros) */
    int create_dtype;       /* create: the dtype given (maybe not one) */
} pcase;

/* What a call must do. */
typedef struct expectation {
    bool must_fail;
    unsigned fail; /* 1 << status for each status it may fail with */
    int n_out;
    dims out[MAX_OUT];
    int64_t work; /* reference operations, to keep the case short */
} expectation;

#define ST(s) (1u << (unsigned)(s))

static void expect_fail(expectation *x, dc_status st)
{
    x->must_fail = true;
    x->fail |= ST(st);
}

/* ---- elementwise references ---- */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

#define EW_REF(name) static void name(const double *v, const pcase *c, double *y, double dy[MAX_OUT][MAX_EW_IN])

EW_REF(ref_add)
{
    (void)c;
    y[0] = v[0] + v[1];
    dy[0][0] = 1, dy[0][1] = 1;
}
EW_REF(ref_sub)
{
    (void)c;
    y[0] = v[0] - v[1];
    dy[0][0] = 1, dy[0][1] = -1;
}
EW_REF(ref_mul)
{
    (void)c;
    y[0] = v[0] * v[1];
    dy[0][0] = v[1], dy[0][1] = v[0];
}
EW_REF(ref_div)
{
    (void)c;
    y[0] = v[0] / v[1];
    dy[0][0] = 1 / v[1], dy[0][1] = -v[0] / (v[1] * v[1]);
}
EW_REF(ref_pow)
{
    (void)c;
    y[0] = pow(v[0], v[1]);
    dy[0][0] = v[1] == 0 ? 0 : v[1] * pow(v[0], v[1] - 1);
    dy[0][1] = v[0] == 0 ? 0 : y[0] * log(v[0]);
}
EW_REF(ref_affine)
{
    y[0] = v[0] * c->s + c->t;
    dy[0][0] = c->s;
}
EW_REF(ref_neg)
{
    (void)c;
    y[0] = -v[0];
    dy[0][0] = -1;
}
EW_REF(ref_exp)
{
    (void)c;
    y[0] = exp(v[0]);
    dy[0][0] = y[0];
}
EW_REF(ref_log)
{
    (void)c;
    y[0] = log(v[0]);
    dy[0][0] = 1 / v[0];
}
EW_REF(ref_tanh)
{
    (void)c;
    y[0] = tanh(v[0]);
    dy[0][0] = 1 - y[0] * y[0];
}
EW_REF(ref_sigmoid)
{
    (void)c;
    y[0] = sigmoid(v[0]);
    dy[0][0] = y[0] * (1 - y[0]);
}
EW_REF(ref_relu)
{
    (void)c;
    y[0] = v[0] > 0 ? v[0] : 0;
    dy[0][0] = v[0] > 0 ? 1 : 0;
}
EW_REF(ref_hard_sigmoid)
{
    const double u = (c->s * v[0] + 1) / 2;
    y[0] = u < 0 ? 0 : u > 1 ? 1 : u;
    dy[0][0] = (u > 0 && u < 1) ? c->s / 2 : 0;
}
EW_REF(ref_step_st)
{
    y[0] = v[0] > c->s ? 1 : 0;
    dy[0][0] = 1;
}
EW_REF(ref_select)
{
    (void)c;
    y[0] = v[0] != 0 ? v[1] : v[2];
    dy[0][0] = 0, dy[0][1] = v[0] != 0, dy[0][2] = v[0] == 0;
}
/* the broadcast functions of tests/bfn and bench/kernels */
EW_REF(ref_hmlstm_update_c)
{
    (void)c;
    const double z = v[0], zb = v[1], cc = v[2], f = v[3], i = v[4], g = v[5];
    const double si = sigmoid(i), tg = tanh(g), sf = sigmoid(f);
    if (z == 1) {
        y[0] = si * tg;
        dy[0][4] = si * (1 - si) * tg, dy[0][5] = si * (1 - tg * tg);
    } else if (zb == 0) {
        y[0] = cc;
        dy[0][2] = 1;
    } else {
        y[0] = sf * cc + si * tg;
        dy[0][2] = sf, dy[0][3] = sf * (1 - sf) * cc;
        dy[0][4] = si * (1 - si) * tg, dy[0][5] = si * (1 - tg * tg);
    }
}
EW_REF(ref_polar_pair)
{
    (void)c;
    const double r = v[0], t = v[1];
    if (r < 0) {
        y[0] = y[1] = 0;
        return;
    }
    y[0] = r * cos(t), y[1] = r * sin(t);
    dy[0][0] = cos(t), dy[0][1] = -r * sin(t);
    dy[1][0] = sin(t), dy[1][1] = r * cos(t);
}
EW_REF(ref_gated_scale)
{
    (void)c;
    const double a = v[0], gate = v[1], b = v[2];
    if (gate != 0) {
        y[0] = a * (gate + b);
        dy[0][0] = gate + b, dy[0][2] = a;
    } else {
        y[0] = exp(a) - b;
        dy[0][0] = exp(a), dy[0][2] = -1;
    }
}
EW_REF(ref_prod_sign)
{
    double f[MAX_EW_IN];
    y[0] = 1;
    for (int j = 0; j < c->n_in; ++j) {
        f[j] = v[j] > 0.5 ? v[j] : -v[j];
        y[0] *= f[j];
    }
    for (int j = 0; j < c->n_in; ++j) {
        double p = v[j] > 0.5 ? 1 : -1;
        for (int i = 0; i < c->n_in; ++i)
            if (i != j)
                p *= f[i];
        dy[0][j] = p;
    }
}

#define EW_CALL(name, expr)                                                                                            \
    static dc_tensor *call_##name(dc_tape *t, dc_tensor *const *x, const pcase *c)                                     \
    {                                                                                                                  \
        (void)c;                                                                                                       \
        return (expr);                                                                                                 \
    }
EW_CALL(add, dc_op_add(t, x[0], x[1]))
EW_CALL(sub, dc_op_sub(t, x[0], x[1]))
EW_CALL(mul, dc_op_mul(t, x[0], x[1]))
EW_CALL(div, dc_op_div(t, x[0], x[1]))
EW_CALL(pow, dc_op_pow(t, x[0], x[1]))
EW_CALL(affine, dc_op_affine(t, x[0], c->s, c->t))
EW_CALL(neg, dc_op_neg(t, x[0]))
EW_CALL(exp, dc_op_exp(t, x[0]))
EW_CALL(log, dc_op_log(t, x[0]))
EW_CALL(tanh, dc_op_tanh(t, x[0]))
EW_CALL(sigmoid, dc_op_sigmoid(t, x[0]))
EW_CALL(relu, dc_op_relu(t, x[0]))
EW_CALL(hard_sigmoid, dc_op_hard_sigmoid(t, x[0], c->s))
EW_CALL(step_st, dc_op_step_st(t, x[0], c->s))
EW_CALL(select, dc_op_select(t, x[0], x[1], x[2]))

#define EW_ROW(op, in)                                                                                                 \
    {                                                                                                                  \
        .name = #op, .fn_name = "dc_op_" #op, .kind = K_EW, .fills = in, .ref = ref_##op, .call = call_##op            \
    }
#define BFN_ROW(f, in, ptr)                                                                                            \
    {                                                                                                                  \
        .name = #f, .fn_name = "dc_broadcast", .kind = K_BFN, .fills = in, .ref = ref_##f, .fn = ptr                   \
    }
#define ROW(op, fn, k, ...)                                                                                            \
    {                                                                                                                  \
        .name = #op, .fn_name = fn, .kind = k, .fills = "", __VA_ARGS__                                                \
    }

/* Every op of the public API that takes or makes a shape. Fill letters:
 * u uniform, a away from 0, p positive, c condition, g gate. */
static const prop_op prop_ops[] = {
    EW_ROW(add, "uu"),
    EW_ROW(sub, "uu"),
    EW_ROW(mul, "uu"),
    EW_ROW(div, "ua"),
    EW_ROW(pow, "pu"),
    EW_ROW(affine, "u"),
    EW_ROW(neg, "u"),
    EW_ROW(exp, "u"),
    EW_ROW(log, "p"),
    EW_ROW(tanh, "u"),
    EW_ROW(sigmoid, "u"),
    EW_ROW(relu, "u"),
    EW_ROW(hard_sigmoid, "u"),
    EW_ROW(step_st, "u"),
    EW_ROW(select, "cuu"),
    ROW(sum, "dc_op_sum", K_REDUCE, .mean = false),
    ROW(mean, "dc_op_mean", K_REDUCE, .mean = true),
    ROW(prod, "dc_op_prod", K_REDUCE, .reduction = RED_PROD),
    ROW(max, "dc_op_max", K_REDUCE, .reduction = RED_MAX),
    ROW(min, "dc_op_min", K_REDUCE, .reduction = RED_MIN),
    ROW(logsumexp, "dc_op_logsumexp", K_REDUCE, .reduction = RED_LSE),
    /* the most ways to go wrong: batch broadcasting, three sizes, BLAS */
    ROW(matmul, "dc_op_matmul", K_MATMUL, .weight = 4),
    ROW(transpose, "dc_op_transpose", K_TRANSPOSE, .weight = 1),
    ROW(reshape, "dc_op_reshape", K_RESHAPE, .weight = 1),
    ROW(slice, "dc_op_slice", K_SLICE, .weight = 1),
    ROW(concat, "dc_op_concat", K_CONCAT, .weight = 1),
    ROW(embedding, "dc_op_embedding", K_EMBEDDING, .weight = 1),
    ROW(cross_entropy, "dc_op_cross_entropy", K_CROSS_ENTROPY, .weight = 1),
    BFN_ROW(hmlstm_update_c, "ccuuuu", DC_BFN_REF(hmlstm_update_c)),
    BFN_ROW(polar_pair, "uu", DC_BFN_REF(polar_pair)),
    BFN_ROW(gated_scale, "ugu", DC_BFN_REF(gated_scale)),
    BFN_ROW(prod_sign, "uuuuuuuuuu", NULL),
    ROW(tensor_new, "dc_tensor_new", K_CREATE, .variant = 0),
    ROW(tensor_from_host, "dc_tensor_from_host", K_CREATE, .variant = 1),
    ROW(tape_tensor_new, "dc_tape_tensor_new", K_CREATE, .variant = 2),
};
enum { N_OPS = sizeof prop_ops / sizeof prop_ops[0] };

static const dc_bfn *const prod_sign_fns[PROD_SIGN_FN_MAX_ARITY + 1] = PROD_SIGN_FNS;

static fill_kind fill_of(char letter)
{
    switch (letter) {
    case 'a': return FILL_AWAY0;
    case 'p': return FILL_POSITIVE;
    case 'c': return FILL_COND;
    case 'g': return FILL_GATE;
    default: return FILL_UNIFORM;
    }
}

/* ---- generation ---- */

static void init_operand(operand *o, const dims *shape, dc_dtype dtype, fill_kind fill, bool differentiable)
{
    memset(o, 0, sizeof *o);
    o->shape = *shape;
    o->dtype = dtype;
    o->fill = fill;
    o->differentiable = differentiable;
}

/* Random flags of an operand: requires a gradient, read through a transposed
 * view, and rarely another dtype than the case's. */
static void operand_flags(rng *r, pcase *c, operand *o)
{
    o->requires_grad = rng_chance(r, 0.6);
    o->transposed = o->shape.nd >= 2 && rng_chance(r, 0.15);
    if (!o->transposed && o->shape.nd >= 1 && rng_chance(r, 0.15)) {
        dims leaf = o->shape;
        const int a = (int)rng_int(r, 0, leaf.nd - 1);
        const int64_t extra = rng_int(r, 1, 2);
        leaf.d[a] = sat_add(leaf.d[a], extra);
        if (creatable(&leaf)) {
            o->slice_axis = a;
            o->slice_extra = extra;
            o->slice_start = rng_int(r, 0, extra);
        }
    }
    if (rng_chance(r, 0.02))
        o->dtype = c->dtype == DC_F32 ? DC_F64 : DC_F32;
}

/* An operand that broadcasts to `out` (leading axes dropped, sizes set to
 * 1), sometimes with one size changed so that it may not. */
static dims derive_operand(rng *r, const dims *out)
{
    dims s = {0, {0}};
    const int drop = rng_chance(r, 0.3) ? (int)rng_int(r, 0, out->nd) : 0;
    s.nd = out->nd - drop;
    for (int i = 0; i < s.nd; ++i)
        s.d[i] = rng_chance(r, 0.3) ? 1 : out->d[i + drop];
    if (s.nd > 0 && rng_chance(r, 0.05))
        s.d[rng_int(r, 0, s.nd - 1)] = draw_size(r, true);
    make_creatable(&s);
    return s;
}

static void gen_broadcast(rng *r, pcase *c)
{
    const prop_op *op = c->op;
    const shape_mode mode = draw_mode(r);
    const dims out = draw_dims(r, mode, (int)rng_int(r, 0, DC_MAX_DIMS));
    int n = (int)strlen(op->fills);
    if (op->kind == K_BFN) {
        c->fn = op->fn;
        if (!c->fn) {
            n = (int)rng_int(r, 1, PROD_SIGN_FN_MAX_ARITY);
            c->fn = prod_sign_fns[n];
        }
        const double u = rng_unit(r);
        c->api = u < 0.35 ? API_BROADCAST : u < 0.8 ? API_POLICY : API_BROADCAST1;
        c->policy = rng_chance(r, 0.5) ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE;
        if (rng_chance(r, 0.02))
            c->policy = 7;
        c->n_pass = n + (rng_chance(r, 0.02) ? (int)rng_int(r, -1, 1) : 0);
        c->n_out_pass = c->fn->n_outputs + (rng_chance(r, 0.02) ? 1 : 0);
    }
    c->n_in = n;
    for (int i = 0; i < n; ++i) {
        const dims s = derive_operand(r, &out);
        const fill_kind fill = fill_of(op->fills[i]);
        init_operand(&c->in[i], &s, c->dtype, fill, fill != FILL_COND && fill != FILL_GATE);
        operand_flags(r, c, &c->in[i]);
    }
    /* exact in float, so that the library and the reference branch alike */
    c->s = (double)rng_int(r, -16, 16) / 8;
    c->t = (double)rng_int(r, -16, 16) / 8;
    if (op->call == call_hard_sigmoid)
        c->s = (double)rng_int(r, 2, 12) / 4;
}

static void gen_reduce(rng *r, pcase *c)
{
    dims x = draw_dims(r, draw_mode(r), (int)rng_int(r, 0, DC_MAX_DIMS));
    make_creatable(&x);
    c->n_in = 1;
    init_operand(&c->in[0], &x, c->dtype, FILL_UNIFORM, true);
    operand_flags(r, c, &c->in[0]);
    c->keepdims = rng_chance(r, 0.5);
    if (rng_chance(r, 0.15)) {
        c->n_axes = 0; /* all */
        return;
    }
    if (rng_chance(r, 0.03)) {
        c->n_axes = rng_chance(r, 0.5) ? -1 : DC_MAX_DIMS + 1;
        for (int i = 0; i < DC_MAX_DIMS + 1; ++i)
            c->axes[i] = i;
        return;
    }
    /* a random subset of the axes, some counted from the end */
    for (int a = 0; a < x.nd; ++a)
        if (rng_chance(r, 0.5))
            c->axes[c->n_axes++] = rng_chance(r, 0.4) ? a - x.nd : a;
    for (int i = c->n_axes - 1; i > 0; --i) {
        const int j = (int)rng_int(r, 0, i), t = c->axes[i];
        c->axes[i] = c->axes[j], c->axes[j] = t;
    }
    if (c->n_axes < DC_MAX_DIMS && rng_chance(r, 0.05))
        c->axes[c->n_axes++] = (int)rng_int(r, -x.nd - 2, x.nd + 1); /* out of range, or given twice */
}

static void gen_matmul(rng *r, pcase *c)
{
    const shape_mode mode = draw_mode(r);
    const dims batch = draw_dims(r, mode, (int)rng_int(r, 0, DC_MAX_DIMS - 2));
    const bool large = mode != MODE_SMALL;
    int64_t m = draw_size(r, large), k = draw_size(r, large), n = draw_size(r, large);
    /* an empty product, or an empty inner size that is summed away, where
     * the batch may be large: what lets a result be past the bound */
    if (large && rng_chance(r, 0.3)) {
        const int64_t which = rng_int(r, 0, 2);
        *(which == 0 ? &m : which == 1 ? &n : &k) = 0;
    }
    dims a = batch, b = batch;
    for (int side = 0; side < 2; ++side) {
        dims *s = side ? &b : &a;
        const int drop = rng_chance(r, 0.4) ? (int)rng_int(r, 0, batch.nd) : 0;
        s->nd = batch.nd - drop;
        for (int i = 0; i < s->nd; ++i)
            s->d[i] = rng_chance(r, 0.3) ? 1 : batch.d[i + drop];
        if (s->nd > 0 && rng_chance(r, 0.04))
            s->d[rng_int(r, 0, s->nd - 1)] = draw_size(r, true);
    }
    a.d[a.nd] = m, a.d[a.nd + 1] = k;
    a.nd += 2;
    b.d[b.nd] = rng_chance(r, 0.95) ? k : draw_size(r, large), b.d[b.nd + 1] = n;
    b.nd += 2;
    if (rng_chance(r, 0.03))
        a = draw_dims(r, MODE_SMALL, (int)rng_int(r, 0, 1));
    if (rng_chance(r, 0.03))
        b = draw_dims(r, MODE_SMALL, (int)rng_int(r, 0, 1));
    /* shrink as make_creatable does, keeping the inner sizes equal */
    while (!creatable(&a) || !creatable(&b)) {
        dims *s = creatable(&a) ? &b : &a, *o = s == &a ? &b : &a;
        const int at = largest_axis(s);
        const int inner = s == &a ? a.nd - 1 : b.nd - 2, other_inner = s == &a ? b.nd - 2 : a.nd - 1;
        if (at == inner && s->nd >= 2 && o->nd >= 2 && o->d[other_inner] == s->d[at])
            o->d[other_inner] = 1;
        s->d[at] = 1;
    }
    c->n_in = 2;
    init_operand(&c->in[0], &a, c->dtype, FILL_UNIFORM, true);
    init_operand(&c->in[1], &b, c->dtype, FILL_UNIFORM, true);
    operand_flags(r, c, &c->in[0]);
    operand_flags(r, c, &c->in[1]);
}

static void gen_single(rng *r, pcase *c)
{
    dims x = draw_dims(r, draw_mode(r), (int)rng_int(r, 0, DC_MAX_DIMS));
    make_creatable(&x);
    c->n_in = 1;
    init_operand(&c->in[0], &x, c->dtype, FILL_UNIFORM, true);
    operand_flags(r, c, &c->in[0]);
    const int nd = x.nd;
    const bool valid = nd > 0 && rng_chance(r, 0.9);
    c->axis0 = valid ? (int)rng_int(r, -nd, nd - 1) : (int)rng_int(r, -nd - 2, nd + 1);
    c->axis1 = valid ? (int)rng_int(r, -nd, nd - 1) : (int)rng_int(r, -nd - 2, nd + 1);
}

/* A start or length for an axis of `size`: the edges, inside, or past them. */
static int64_t draw_extent(rng *r, int64_t size)
{
    switch (rng_int(r, 0, 9)) {
    case 0: return 0;
    case 1: return size;
    case 2: return size > 0 ? size - 1 : 0;
    case 3: return size / 2;
    case 4: return size + 1;
    case 5: return -1;
    case 6: return rng_chance(r, 0.5) ? INT64_MAX : INT64_MIN;
    case 7: return large_sizes[rng_int(r, 0, N_LARGE - 1)];
    default: return rng_int(r, 0, size < 6 ? size : 6);
    }
}

static void gen_slice(rng *r, pcase *c)
{
    gen_single(r, c);
    const dims *x = &c->in[0].shape;
    const int a = c->axis0 < 0 ? c->axis0 + x->nd : c->axis0;
    const int64_t size = a >= 0 && a < x->nd ? x->d[a] : 3;
    if (rng_chance(r, 0.7)) { /* inside, the edges included */
        c->start = rng_chance(r, 0.3) ? (rng_chance(r, 0.5) ? 0 : size) : rng_int(r, 0, size);
        c->length = rng_chance(r, 0.3) ? size - c->start : rng_int(r, 0, size - c->start);
    } else {
        c->start = draw_extent(r, size);
        c->length = draw_extent(r, size);
    }
}

/* The target: the same elements in a new shape (sizes moved between axes,
 * maybe one -1), or random sizes, -1s and ranks that may not fit. */
static void gen_reshape(rng *r, pcase *c)
{
    gen_single(r, c);
    const dims *x = &c->in[0].shape;
    dims *t = &c->target;
    if (rng_chance(r, 0.6)) {
        t->nd = (int)rng_int(r, 0, DC_MAX_DIMS);
        for (int i = 0; i < t->nd; ++i)
            t->d[i] = 1;
        for (int i = 0; i < x->nd; ++i) {
            if (t->nd == 0 && x->d[i] != 1) { /* a size to place needs an axis */
                t->nd = 1;
                t->d[0] = 1;
            }
            if (t->nd > 0) {
                int64_t *slot = &t->d[rng_int(r, 0, t->nd - 1)];
                *slot = sat_mul(*slot, x->d[i]);
            }
        }
        if (t->nd > 0 && rng_chance(r, 0.3))
            t->d[rng_int(r, 0, t->nd - 1)] = -1;
    } else {
        t->nd = rng_chance(r, 0.05) ? (rng_chance(r, 0.5) ? -1 : DC_MAX_DIMS + 1) : (int)rng_int(r, 0, DC_MAX_DIMS);
        const shape_mode mode = draw_mode(r);
        for (int i = 0; i < t->nd && i < DC_MAX_DIMS + 1; ++i) {
            const double u = rng_unit(r);
            t->d[i] = u < 0.1 ? -1 : u < 0.13 ? -(int64_t)rng_int(r, 2, 5) : draw_size(r, mode != MODE_SMALL);
        }
        if (mode == MODE_NEAR_BOUND && t->nd >= 0 && t->nd <= DC_MAX_DIMS)
            near_bound(r, t);
    }
}

static void gen_concat(rng *r, pcase *c)
{
    const shape_mode mode = draw_mode(r);
    dims base = draw_dims(r, mode, (int)(rng_chance(r, 0.04) ? 0 : rng_int(r, 1, DC_MAX_DIMS)));
    const double u = rng_unit(r);
    const int n = u < 0.8 ? (int)rng_int(r, 1, 4) : u < 0.97 ? (int)rng_int(r, 5, MAX_IN) : (int)rng_int(r, -1, 0);
    c->n_pass = n;
    c->n_in = n > 0 ? n : 1;
    c->axis0 = base.nd == 0         ? 0
               : rng_chance(r, 0.9) ? (int)rng_int(r, -base.nd, base.nd - 1)
                                    : (int)rng_int(r, -base.nd - 2, base.nd + 1);
    const int a = c->axis0 < 0 ? c->axis0 + base.nd : c->axis0;
    const bool axis_ok = a >= 0 && a < base.nd;
    if (axis_ok)
        base.d[a] = 1;
    make_creatable(&base);
    for (int i = 0; i < c->n_in; ++i) {
        dims s = base;
        if (axis_ok) {
            /* past the bound only where the rest is empty: the sum of the
             * parts is what may overflow */
            s.d[a] = draw_size(r, mode != MODE_SMALL && has_zero(&base));
            if (n > 4 && !has_zero(&base) && s.d[a] > 1)
                s.d[a] = 1; /* keep 48 parts small */
            if (!creatable(&s))
                s.d[a] = has_zero(&base) ? SPAN_BOUND / span_of(&base) : 1;
        }
        if (s.nd > 0 && rng_chance(r, 0.03))
            s.d[rng_int(r, 0, s.nd - 1)] = rng_int(r, 0, 4);
        if (rng_chance(r, 0.01)) { /* another rank */
            if (s.nd > 0)
                --s.nd;
            else
                s = (dims){1, {1}};
        }
        make_creatable(&s);
        init_operand(&c->in[i], &s, c->dtype, FILL_UNIFORM, true);
        operand_flags(r, c, &c->in[i]);
    }
}

static void gen_embedding(rng *r, pcase *c)
{
    const shape_mode mode = draw_mode(r);
    dims table = {2, {draw_size(r, mode != MODE_SMALL), draw_size(r, mode != MODE_SMALL)}};
    if (rng_chance(r, 0.04))
        table = draw_dims(r, MODE_SMALL, rng_chance(r, 0.5) ? 1 : 3);
    make_creatable(&table);
    dims ids = draw_dims(r, mode, (int)(rng_chance(r, 0.04) ? DC_MAX_DIMS : rng_int(r, 0, DC_MAX_DIMS - 1)));
    make_creatable(&ids);
    c->n_in = 2;
    init_operand(&c->in[0], &table, c->dtype, FILL_UNIFORM, true);
    operand_flags(r, c, &c->in[0]);
    init_operand(&c->in[1], &ids, c->dtype, FILL_INDEX, false);
    operand_flags(r, c, &c->in[1]);
    c->in[1].index_limit = table.nd == 2 ? table.d[0] : 1;
    c->in[1].bad_index = rng_chance(r, 0.05);
}

static void gen_cross_entropy(rng *r, pcase *c)
{
    const shape_mode mode = draw_mode(r);
    const int64_t n = rng_chance(r, 0.2) ? 0 : rng_int(r, 1, 6);
    dims logits = {2, {n, draw_size(r, mode != MODE_SMALL)}};
    dims targets = {1, {rng_chance(r, 0.95) ? n : rng_int(r, 0, 7)}};
    if (rng_chance(r, 0.04))
        logits = draw_dims(r, MODE_SMALL, rng_chance(r, 0.5) ? 1 : 3);
    if (rng_chance(r, 0.04))
        targets = draw_dims(r, MODE_SMALL, rng_chance(r, 0.5) ? 0 : 2);
    make_creatable(&logits);
    make_creatable(&targets);
    c->n_in = 2;
    init_operand(&c->in[0], &logits, c->dtype, FILL_LOGIT, true);
    operand_flags(r, c, &c->in[0]);
    init_operand(&c->in[1], &targets, c->dtype, FILL_INDEX, false);
    operand_flags(r, c, &c->in[1]);
    c->in[1].index_limit = logits.nd == 2 ? logits.d[1] : 1;
    c->in[1].bad_index = rng_chance(r, 0.05);
}

static void gen_create(rng *r, pcase *c)
{
    const double u = rng_unit(r);
    const int nd = u < 0.05 ? -1 : u < 0.1 ? DC_MAX_DIMS + 1 : (int)rng_int(r, 0, DC_MAX_DIMS);
    c->target = draw_dims(r, draw_mode(r), nd > 0 ? nd : 0);
    c->target.nd = nd;
    for (int i = 0; i < nd; ++i)
        if (rng_chance(r, 0.02))
            c->target.d[i] = rng_chance(r, 0.5) ? -1 : INT64_MIN;
    c->null_shape = nd > 0 && rng_chance(r, 0.03);
    c->with_data = rng_chance(r, 0.5);
    c->create_dtype = rng_chance(r, 0.03) ? 5 : (int)c->dtype;
    c->n_in = 0;
}

/* ---- expectations, computed from the shapes alone ---- */

/* Elementwise ops and broadcast functions. */
static void expect_broadcast(const pcase *c, expectation *x)
{
    const dims *shapes[MAX_EW_IN];
    for (int i = 0; i < c->n_in; ++i) {
        shapes[i] = &c->in[i].shape;
        if (c->in[i].dtype != c->in[0].dtype)
            expect_fail(x, DC_ERR_DTYPE);
    }
    x->n_out = c->op->kind == K_BFN ? c->fn->n_outputs : 1;
    if (c->op->kind == K_BFN) {
        if (c->n_pass != c->fn->n_inputs || (c->api != API_BROADCAST1 && c->n_out_pass != c->fn->n_outputs) ||
            (c->api == API_POLICY && c->policy != DC_PARTIALS_STORE && c->policy != DC_PARTIALS_RECOMPUTE) ||
            (c->api == API_BROADCAST1 && c->fn->n_outputs != 1))
            expect_fail(x, DC_ERR_ARG);
        if (c->api == API_BROADCAST1)
            x->n_out = 1;
    }
    if (!broadcast_dims(c->n_in, shapes, &x->out[0])) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    x->out[1] = x->out[0];
    if (!within_bound(&x->out[0]))
        expect_fail(x, DC_ERR_SHAPE);
    x->work = numel_of(&x->out[0]);
}

static void expect_reduce(const pcase *c, expectation *x)
{
    const dims *in = &c->in[0].shape;
    x->n_out = 1;
    if (c->n_axes < 0 || c->n_axes > DC_MAX_DIMS) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    bool reduced[DC_MAX_DIMS] = {false};
    for (int i = 0; i < c->n_axes; ++i) {
        const int a = c->axes[i] < 0 ? c->axes[i] + in->nd : c->axes[i];
        if (a < 0 || a >= in->nd || reduced[a]) {
            expect_fail(x, DC_ERR_ARG);
            return;
        }
        reduced[a] = true;
    }
    dims *out = &x->out[0];
    out->nd = 0;
    for (int a = 0; a < in->nd; ++a) {
        const bool r = c->n_axes == 0 || reduced[a];
        if (!r || c->keepdims)
            out->d[out->nd++] = r ? 1 : in->d[a];
    }
    x->work = numel_of(in) + numel_of(out);
}

/* Matmul: batch axes broadcast, (m, k) x (k, n). */
static void expect_matmul(const pcase *c, expectation *x)
{
    const dims *a = &c->in[0].shape, *b = &c->in[1].shape;
    x->n_out = 1;
    if (c->in[0].dtype != c->in[1].dtype)
        expect_fail(x, DC_ERR_DTYPE);
    if (a->nd < 2 || b->nd < 2) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    const int64_t m = a->d[a->nd - 2], k = a->d[a->nd - 1], n = b->d[b->nd - 1];
    if (k != b->d[b->nd - 2])
        expect_fail(x, DC_ERR_SHAPE);
    dims ab = *a, bb = *b;
    ab.nd -= 2;
    bb.nd -= 2;
    const dims *batches[2] = {&ab, &bb};
    dims *out = &x->out[0];
    if (!broadcast_dims(2, batches, out)) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    if (x->must_fail)
        return;
    out->d[out->nd++] = m;
    out->d[out->nd++] = n;
    /* The library refuses matrix sides past 2^31 - 1 (BLAS takes int sizes)
     * before anything else: a clear failure, allowed whatever the result. */
    const bool sides = m > INT32_MAX || n > INT32_MAX || k > INT32_MAX;
    if (!within_bound(out))
        expect_fail(x, DC_ERR_SHAPE);
    if (sides) {
        x->fail |= ST(DC_ERR_SHAPE);
        return;
    }
    if (x->must_fail)
        return;
    x->work = sat_mul(sat_mul(numel_of(out), k > 0 ? k : 1), 3);
}

static int axis_in(int axis, int nd) { return axis < 0 ? axis + nd : axis; }

static void expect_transpose(const pcase *c, expectation *x)
{
    const dims *in = &c->in[0].shape;
    const int a0 = axis_in(c->axis0, in->nd), a1 = axis_in(c->axis1, in->nd);
    x->n_out = 1;
    if (a0 < 0 || a0 >= in->nd || a1 < 0 || a1 >= in->nd) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    x->out[0] = *in;
    x->out[0].d[a0] = in->d[a1];
    x->out[0].d[a1] = in->d[a0];
    x->work = numel_of(in);
}

static void expect_reshape(const pcase *c, expectation *x)
{
    const dims *in = &c->in[0].shape, *t = &c->target;
    x->n_out = 1;
    if (t->nd < 0 || t->nd > DC_MAX_DIMS) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    dims s = *t;
    int infer = -1;
    for (int i = 0; i < t->nd; ++i) {
        if (t->d[i] == -1 && infer < 0) {
            infer = i;
            s.d[i] = 1;
        } else if (t->d[i] < 0) {
            expect_fail(x, DC_ERR_SHAPE); /* only one -1 */
            return;
        }
    }
    if (!within_bound(&s)) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    const int64_t given = numel_of(&s), total = numel_of(in);
    if (infer >= 0) {
        if (given == 0 || total % given != 0) { /* a zero leaves the -1 open */
            expect_fail(x, DC_ERR_SHAPE);
            return;
        }
        s.d[infer] = total / given;
    } else if (given != total) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    x->out[0] = s;
    x->work = total;
}

static void expect_slice(const pcase *c, expectation *x)
{
    const dims *in = &c->in[0].shape;
    const int a = axis_in(c->axis0, in->nd);
    x->n_out = 1;
    if (a < 0 || a >= in->nd) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    const int64_t size = in->d[a];
    if (c->start < 0 || c->length < 0 || c->start > size || c->length > size - c->start) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    x->out[0] = *in;
    x->out[0].d[a] = c->length;
    x->work = numel_of(in);
}

static void expect_concat(const pcase *c, expectation *x)
{
    x->n_out = 1;
    if (c->n_pass <= 0) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    const dims *x0 = &c->in[0].shape;
    const int a = axis_in(c->axis0, x0->nd);
    if (a < 0 || a >= x0->nd) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    dims *out = &x->out[0];
    *out = *x0;
    out->d[a] = 0;
    for (int i = 0; i < c->n_in; ++i) {
        const dims *s = &c->in[i].shape;
        if (c->in[i].dtype != c->in[0].dtype)
            expect_fail(x, DC_ERR_DTYPE);
        bool same = s->nd == x0->nd;
        for (int d = 0; same && d < s->nd; ++d)
            same = d == a || s->d[d] == x0->d[d];
        if (!same) {
            expect_fail(x, DC_ERR_SHAPE);
            return;
        }
        out->d[a] = sat_add(out->d[a], s->d[a]);
    }
    if (!x->must_fail && !within_bound(out))
        expect_fail(x, DC_ERR_SHAPE);
    x->work = numel_of(out);
}

static void expect_embedding(const pcase *c, expectation *x)
{
    const dims *table = &c->in[0].shape, *ids = &c->in[1].shape;
    x->n_out = 1;
    if (table->nd != 2 || ids->nd + 1 > DC_MAX_DIMS)
        expect_fail(x, DC_ERR_SHAPE);
    if (c->in[0].dtype != c->in[1].dtype)
        expect_fail(x, DC_ERR_DTYPE);
    if (x->must_fail)
        return;
    if (numel_of(ids) > 0 && (c->in[1].bad_index || table->d[0] == 0)) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    dims *out = &x->out[0];
    *out = *ids;
    out->d[out->nd++] = table->d[1];
    if (!within_bound(out))
        expect_fail(x, DC_ERR_SHAPE);
    x->work = numel_of(out);
}

static void expect_cross_entropy(const pcase *c, expectation *x)
{
    const dims *logits = &c->in[0].shape, *targets = &c->in[1].shape;
    x->n_out = 1;
    if (logits->nd != 2 || targets->nd != 1 || targets->d[0] != logits->d[0]) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    if (c->in[0].dtype != c->in[1].dtype)
        expect_fail(x, DC_ERR_DTYPE);
    const int64_t n = logits->d[0];
    if (logits->d[1] == 0 && n > 0)
        expect_fail(x, DC_ERR_SHAPE);
    if (n > 0 && c->in[1].bad_index)
        expect_fail(x, DC_ERR_ARG);
    x->out[0].nd = 0;
    x->work = numel_of(logits);
}

static void expect_create(const pcase *c, expectation *x)
{
    const dims *s = &c->target;
    x->n_out = 1;
    if (c->create_dtype != DC_F32 && c->create_dtype != DC_F64)
        expect_fail(x, DC_ERR_DTYPE);
    if (s->nd < 0 || s->nd > DC_MAX_DIMS) {
        expect_fail(x, DC_ERR_SHAPE);
        return;
    }
    if (c->null_shape) {
        expect_fail(x, DC_ERR_ARG);
        return;
    }
    if (!within_bound(s)) /* a negative size included */
        expect_fail(x, DC_ERR_SHAPE);
    x->out[0] = *s;
    x->work = x->must_fail ? 0 : numel_of(s);
}

static void expect_case(const pcase *c, expectation *x)
{
    memset(x, 0, sizeof *x);
    switch (c->op->kind) {
    case K_EW:
    case K_BFN: expect_broadcast(c, x); break;
    case K_REDUCE: expect_reduce(c, x); break;
    case K_MATMUL: expect_matmul(c, x); break;
    case K_TRANSPOSE: expect_transpose(c, x); break;
    case K_RESHAPE: expect_reshape(c, x); break;
    case K_SLICE: expect_slice(c, x); break;
    case K_CONCAT: expect_concat(c, x); break;
    case K_EMBEDDING: expect_embedding(c, x); break;
    case K_CROSS_ENTROPY: expect_cross_entropy(c, x); break;
    case K_CREATE: expect_create(c, x); break;
    }
}

static void gen_case(rng *r, pcase *c)
{
    switch (c->op->kind) {
    case K_EW:
    case K_BFN: gen_broadcast(r, c); break;
    case K_REDUCE: gen_reduce(r, c); break;
    case K_MATMUL: gen_matmul(r, c); break;
    case K_TRANSPOSE: gen_single(r, c); break;
    case K_RESHAPE: gen_reshape(r, c); break;
    case K_SLICE: gen_slice(r, c); break;
    case K_CONCAT: gen_concat(r, c); break;
    case K_EMBEDDING: gen_embedding(r, c); break;
    case K_CROSS_ENTROPY: gen_cross_entropy(r, c); break;
    case K_CREATE: gen_create(r, c); break;
    }
}

/* Whether a case that may succeed stays small: its results fit OUT_LIMIT and
 * the reference's work is bounded. */
static bool case_fits(const expectation *x)
{
    if (x->work > ((int64_t)1 << 22))
        return false;
    if (x->must_fail)
        return true;
    for (int k = 0; k < x->n_out; ++k)
        if (!within_bound(&x->out[k]) || numel_of(&x->out[k]) > OUT_LIMIT)
            return false;
    return true;
}

/* ---- references, in double ---- */

typedef struct refs {
    double *y[MAX_OUT], *ymag[MAX_OUT]; /* outputs, and the magnitude of their terms */
    double *g[MAX_IN], *gmag[MAX_IN];   /* d(sum of the outputs) / d operand */
} refs;

static double *zeros(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

static void unravel(const dims *s, int64_t e, int64_t *idx)
{
    for (int d = s->nd - 1; d >= 0; --d) {
        idx[d] = e % s->d[d];
        e /= s->d[d];
    }
}

static int64_t ravel(const dims *s, const int64_t *idx)
{
    int64_t e = 0;
    for (int d = 0; d < s->nd; ++d)
        e = e * s->d[d] + idx[d];
    return e;
}

static void ref_broadcast(const pcase *c, const expectation *x, refs *R)
{
    const dims *out = &x->out[0];
    const int64_t n = numel_of(out);
    for (int64_t e = 0; e < n; ++e) {
        double v[MAX_EW_IN], y[MAX_OUT] = {0}, dy[MAX_OUT][MAX_EW_IN];
        int64_t at[MAX_EW_IN];
        memset(dy, 0, sizeof dy);
        for (int i = 0; i < c->n_in; ++i) {
            at[i] = broadcast_index(out, e, &c->in[i].shape);
            v[i] = c->in[i].vals[at[i]];
        }
        c->op->ref(v, c, y, dy);
        for (int k = 0; k < x->n_out; ++k) {
            R->y[k][e] = y[k];
            R->ymag[k][e] = fabs(y[k]);
        }
        /* the loss sums every output of the function (dc_broadcast1 gives one) */
        const int n_loss = c->op->kind == K_BFN ? c->fn->n_outputs : 1;
        for (int i = 0; i < c->n_in; ++i)
            for (int k = 0; k < n_loss && k < x->n_out; ++k) {
                R->g[i][at[i]] += dy[k][i];
                R->gmag[i][at[i]] += fabs(dy[k][i]);
            }
    }
}

/* Product, maximum, minimum, log-sum-exp (reduce.h): each output over its
 * elements in row-major order, the partials by the header's rules. */
static void ref_reduction(const pcase *c, const expectation *x, refs *R, const dims *keep)
{
    const operand *in = &c->in[0];
    const int kind = c->op->reduction;
    const int64_t n = numel_of(&in->shape), n_out = numel_of(&x->out[0]);
    double *nz = malloc((size_t)(n_out ? n_out : 1) * sizeof *nz), *sum = zeros(n_out);
    int64_t *count = calloc((size_t)(n_out ? n_out : 1), sizeof *count); /* zeros; the winner + 1 */
    for (int64_t o = 0; o < n_out; ++o) {
        R->y[0][o] = kind == RED_PROD ? 1 : kind == RED_MIN ? INFINITY : -INFINITY;
        nz[o] = 1;
    }
    for (int64_t e = 0; e < n; ++e) {
        const int64_t o = broadcast_index(&in->shape, e, keep);
        const double v = in->vals[e];
        if (kind == RED_PROD) {
            R->y[0][o] *= v;
            if (v == 0)
                count[o]++;
            else
                nz[o] *= v;
        } else if (count[o] == 0 || (!isnan(R->y[0][o]) && (isnan(v) || (kind == RED_MIN ? v < R->y[0][o]
                                                                                          : v > R->y[0][o])))) {
            R->y[0][o] = v;
            count[o] = e + 1;
        }
    }
    for (int64_t e = 0; kind == RED_LSE && e < n; ++e) {
        const int64_t o = broadcast_index(&in->shape, e, keep);
        if (isfinite(R->y[0][o]))
            sum[o] += exp(in->vals[e] - R->y[0][o]);
    }
    for (int64_t o = 0; o < n_out; ++o) {
        if (kind == RED_LSE && isfinite(R->y[0][o]))
            R->y[0][o] += log(sum[o]);
        R->ymag[0][o] = fabs(R->y[0][o]);
    }
    for (int64_t e = 0; e < n; ++e) {
        const int64_t o = broadcast_index(&in->shape, e, keep);
        const double v = in->vals[e], y = R->y[0][o];
        double g;
        if (kind == RED_PROD)
            g = count[o] == 0 ? nz[o] / v : count[o] == 1 && v == 0 ? nz[o] : 0;
        else if (kind == RED_LSE)
            g = y == -INFINITY ? 0 : y == INFINITY ? (v == INFINITY ? NAN : 0) : exp(v - y);
        else
            g = count[o] == e + 1 ? 1 : 0;
        R->g[0][e] = g;
        R->gmag[0][e] = fabs(g);
    }
    free(nz);
    free(sum);
    free(count);
}

static void ref_reduce(const pcase *c, const expectation *x, refs *R)
{
    const operand *in = &c->in[0];
    dims keep = in->shape;
    int64_t count = 1;
    for (int a = 0; a < keep.nd; ++a) {
        bool r = c->n_axes == 0;
        for (int i = 0; i < c->n_axes; ++i)
            r = r || axis_in(c->axes[i], keep.nd) == a;
        if (r) {
            count *= keep.d[a];
            keep.d[a] = 1;
        }
    }
    if (c->op->reduction) {
        ref_reduction(c, x, R, &keep);
        return;
    }
    const double scale = c->op->mean ? 1.0 / (double)count : 1.0; /* inf for a mean over nothing */
    const int64_t n = numel_of(&in->shape), n_out = numel_of(&x->out[0]);
    for (int64_t o = 0; o < n_out; ++o)
        R->y[0][o] = c->op->mean && count == 0 ? NAN : 0.0;
    for (int64_t e = 0; e < n; ++e) {
        const int64_t o = broadcast_index(&in->shape, e, &keep);
        R->y[0][o] += scale * in->vals[e];
        R->ymag[0][o] += fabs(scale * in->vals[e]);
        R->g[0][e] = scale;
        R->gmag[0][e] = scale;
    }
}

static void ref_matmul(const pcase *c, const expectation *x, refs *R)
{
    const operand *A = &c->in[0], *B = &c->in[1];
    const dims *out = &x->out[0];
    dims ob = *out, ab = A->shape, bb = B->shape;
    ob.nd -= 2;
    ab.nd -= 2;
    bb.nd -= 2;
    const int64_t m = out->d[out->nd - 2], n = out->d[out->nd - 1], k = A->shape.d[A->shape.nd - 1];
    const int64_t total = numel_of(out);
    for (int64_t e = 0; e < total; ++e) {
        const int64_t batch = e / (m * n), i = e / n % m, j = e % n;
        const int64_t ia = broadcast_index(&ob, batch, &ab) * m * k, ib = broadcast_index(&ob, batch, &bb) * k * n;
        for (int64_t q = 0; q < k; ++q) {
            const double av = A->vals[ia + i * k + q], bv = B->vals[ib + q * n + j];
            R->y[0][e] += av * bv;
            R->ymag[0][e] += fabs(av * bv);
            R->g[0][ia + i * k + q] += bv;
            R->gmag[0][ia + i * k + q] += fabs(bv);
            R->g[1][ib + q * n + j] += av;
            R->gmag[1][ib + q * n + j] += fabs(av);
        }
    }
}

/* Layout ops: element e of the output is element src(e) of the input (or of
 * operand *part, for concat). */
static int64_t layout_source(const pcase *c, const dims *out, int64_t e, int *part)
{
    int64_t idx[DC_MAX_DIMS];
    unravel(out, e, idx);
    *part = 0;
    const dims *in = &c->in[0].shape;
    switch (c->op->kind) {
    case K_TRANSPOSE: {
        const int a0 = axis_in(c->axis0, in->nd), a1 = axis_in(c->axis1, in->nd);
        const int64_t t = idx[a0];
        idx[a0] = idx[a1];
        idx[a1] = t;
        return ravel(in, idx);
    }
    case K_RESHAPE: return e;
    case K_SLICE: idx[axis_in(c->axis0, in->nd)] += c->start; return ravel(in, idx);
    case K_CONCAT: {
        const int a = axis_in(c->axis0, in->nd);
        while (idx[a] >= c->in[*part].shape.d[a])
            idx[a] -= c->in[(*part)++].shape.d[a];
        return ravel(&c->in[*part].shape, idx);
    }
    default: return 0;
    }
}

static void ref_layout(const pcase *c, const expectation *x, refs *R)
{
    const int64_t n = numel_of(&x->out[0]);
    for (int64_t e = 0; e < n; ++e) {
        int part;
        const int64_t s = layout_source(c, &x->out[0], e, &part);
        R->y[0][e] = c->in[part].vals[s];
        R->ymag[0][e] = fabs(R->y[0][e]);
        R->g[part][s] += 1;
        R->gmag[part][s] += 1;
    }
}

static void ref_embedding(const pcase *c, const expectation *x, refs *R)
{
    const operand *table = &c->in[0], *ids = &c->in[1];
    const int64_t width = table->shape.d[1], n = numel_of(&ids->shape);
    (void)x;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < width; ++j) {
            const int64_t at = (int64_t)ids->vals[i] * width + j;
            R->y[0][i * width + j] = table->vals[at];
            R->ymag[0][i * width + j] = fabs(table->vals[at]);
            R->g[0][at] += 1;
            R->gmag[0][at] += 1;
        }
}

static void ref_cross_entropy(const pcase *c, const expectation *x, refs *R)
{
    const operand *logits = &c->in[0], *targets = &c->in[1];
    const int64_t n = logits->shape.d[0], classes = logits->shape.d[1];
    (void)x;
    double total = 0, mag = 0;
    for (int64_t r = 0; r < n; ++r) {
        const double *l = logits->vals + r * classes;
        const int64_t t = (int64_t)targets->vals[r];
        double mx = l[0], s = 0;
        for (int64_t q = 1; q < classes; ++q)
            mx = l[q] > mx ? l[q] : mx;
        for (int64_t q = 0; q < classes; ++q)
            s += exp(l[q] - mx);
        const double lse = mx + log(s);
        total += lse - l[t];
        mag += fabs(lse) + fabs(l[t]);
        for (int64_t q = 0; q < classes; ++q) {
            const double p = exp(l[q] - lse);
            R->g[0][r * classes + q] = (p - (q == t)) / (double)n;
            R->gmag[0][r * classes + q] = (p + 1) / (double)n;
        }
    }
    R->y[0][0] = n ? total / (double)n : NAN;
    R->ymag[0][0] = n ? mag / (double)n : 0;
}

/* ---- one case ---- */

typedef struct prop_state {
    uint64_t seed;
    int cases;
    int only_case; /* -1: all */
    bool verbose;  /* print every case */
    const char *only_op;
    unsigned timeout;
} prop_state;

static prop_state g_state;

/* What a crash or a timeout prints: the case that was running. */
static char g_desc[DESC_SIZE];

typedef struct op_stats {
    int run, failed, failures, printed;
    int outcomes[2]; /* results, refusals */
    int compared;    /* results with elements compared with the reference */
    int backward;    /* backward passes whose gradients were compared */
} op_stats;

/* `where` says how to run the case again. */
static void describe(const pcase *c, const char *where, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "%s: %s", where, c->op->fn_name);
#define ADD(...) (at += at < size ? (size_t)snprintf(buf + at, size - at, __VA_ARGS__) : 0)
    char s[256];
    if (c->op->kind == K_BFN)
        ADD("(%s) via %s, %d inputs, %d outputs, policy %d", c->fn->name,
            c->api == API_BROADCAST ? "dc_broadcast"
            : c->api == API_POLICY  ? "dc_broadcast_policy"
                                    : "dc_broadcast1",
            c->n_pass, c->n_out_pass, c->policy);
    ADD(", %s, recording %s", dc_dtype_name(c->dtype), c->recording ? "on" : "off");
    for (int i = 0; i < c->n_in; ++i) {
        const operand *o = &c->in[i];
        ADD("\n    in[%d] %s %s%s%s%s", i, dims_str(&o->shape, s, sizeof s), dc_dtype_name(o->dtype),
            o->requires_grad ? " requires grad" : "", o->transposed ? " (transposed view)" : "",
            o->bad_index ? " (an invalid index)" : "");
        if (o->slice_extra)
            ADD(" (a slice: axis %d from %lld of %lld more)", o->slice_axis, (long long)o->slice_start,
                (long long)o->slice_extra);
    }
    switch (c->op->kind) {
    case K_EW: ADD("\n    s %g t %g", c->s, c->t); break;
    case K_REDUCE:
        ADD("\n    %d axes:", c->n_axes);
        for (int i = 0; i < c->n_axes && i < DC_MAX_DIMS + 1; ++i)
            ADD(" %d", c->axes[i]);
        ADD(", keepdims %d", c->keepdims);
        break;
    case K_TRANSPOSE: ADD("\n    axes %d %d", c->axis0, c->axis1); break;
    case K_RESHAPE: {
        dims t = c->target;
        t.nd = t.nd < 0 ? 0 : t.nd;
        ADD("\n    to rank %d %s", c->target.nd, dims_str(&t, s, sizeof s));
        break;
    }
    case K_SLICE:
        ADD("\n    axis %d start %lld length %lld", c->axis0, (long long)c->start, (long long)c->length);
        break;
    case K_CONCAT: ADD("\n    n %d axis %d", c->n_pass, c->axis0); break;
    case K_CREATE: {
        dims t = c->target;
        t.nd = t.nd < 0 ? 0 : t.nd;
        ADD("\n    rank %d %s%s, dtype %d", c->target.nd, dims_str(&t, s, sizeof s), c->null_shape ? " (NULL)" : "",
            c->create_dtype);
        break;
    }
    default: break;
    }
#undef ADD
}

/* Prints a failed check (the first MAX_PRINTED of an op) and counts it. */
static void report(op_stats *st, bool *case_failed, const char *fmt, ...)
{
    st->failures++;
    *case_failed = true;
    if (st->printed++ >= MAX_PRINTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  in %s\n", g_desc);
}

static void fill_values(rng *r, operand *o)
{
    const int64_t n = numel_of(&o->shape);
    o->vals = zeros(n);
    for (int64_t e = 0; e < n; ++e) {
        double v;
        switch (o->fill) {
        case FILL_AWAY0: v = rng_uniform(r, 0.5, 2) * (rng_chance(r, 0.5) ? -1 : 1); break;
        case FILL_POSITIVE: v = rng_uniform(r, 0.25, 2.5); break;
        case FILL_COND: v = (double)rng_int(r, 0, 1); break;
        case FILL_GATE: v = rng_chance(r, 0.3) ? 0 : rng_uniform(r, -2, 2); break;
        case FILL_INDEX: {
            const int64_t limit = o->index_limit < ((int64_t)1 << 24) ? o->index_limit : (int64_t)1 << 24;
            v = limit > 0 ? (double)rng_int(r, 0, limit - 1) : 0;
            break;
        }
        case FILL_LOGIT: v = rng_uniform(r, -3, 3); break;
        default: v = rng_uniform(r, -2, 2); break;
        }
        o->vals[e] = o->dtype == DC_F32 ? (double)(float)v : v;
    }
    if (o->bad_index && n > 0) {
        const int k = (int)rng_int(r, 0, 2);
        o->vals[rng_int(r, 0, n - 1)] = k == 0 ? (double)o->index_limit : k == 1 ? -1.0 : 0.5;
    }
}

/* Leaf elements outside a slice view: a value no reference produces. */
#define OUTSIDE_SLICE 777.0

/* The leaf of an operand (its values in the leaf's order, which for a
 * transposed view has the last two axes swapped), and the view. */
static bool make_operand(dc_ctx *ctx, dc_tape *tape, operand *o)
{
    dims leaf = o->shape;
    if (o->transposed) {
        leaf.d[leaf.nd - 2] = o->shape.d[o->shape.nd - 1];
        leaf.d[leaf.nd - 1] = o->shape.d[o->shape.nd - 2];
    }
    if (o->slice_extra)
        leaf.d[o->slice_axis] += o->slice_extra;
    const int64_t n = numel_of(&leaf);
    const size_t es = dc_dtype_size(o->dtype);
    unsigned char *host = malloc((size_t)(n > 0 ? n : 1) * es);
    assert_non_null(host);
    for (int64_t e = 0; e < n; ++e) {
        int64_t idx[DC_MAX_DIMS];
        unravel(&leaf, e, idx);
        if (o->transposed) {
            const int64_t t = idx[leaf.nd - 2];
            idx[leaf.nd - 2] = idx[leaf.nd - 1];
            idx[leaf.nd - 1] = t;
        }
        double v = OUTSIDE_SLICE;
        if (o->slice_extra)
            idx[o->slice_axis] -= o->slice_start;
        if (!o->slice_extra || (idx[o->slice_axis] >= 0 && idx[o->slice_axis] < o->shape.d[o->slice_axis]))
            v = o->vals[ravel(&o->shape, idx)];
        if (o->dtype == DC_F32)
            ((float *)host)[e] = (float)v;
        else
            ((double *)host)[e] = v;
    }
    o->leaf = dc_tensor_from_host(ctx, o->dtype, leaf.nd, leaf.d, host);
    free(host);
    if (!o->leaf)
        return false;
    if (o->requires_grad && dc_tensor_set_requires_grad(o->leaf, true) != DC_OK)
        return false;
    o->t = o->transposed    ? dc_op_transpose(tape, o->leaf, -1, -2)
           : o->slice_extra ? dc_op_slice(tape, o->leaf, o->slice_axis, o->slice_start, o->shape.d[o->slice_axis])
                            : o->leaf;
    return o->t != NULL;
}

/* Makes the call; out[k] the results (NULL where none); its status. */
static dc_status make_call(dc_ctx *ctx, dc_tape *tape, pcase *c, double *data, dc_tensor **out)
{
    dc_tensor *ts[MAX_IN + 1];
    for (int i = 0; i < c->n_in; ++i)
        ts[i] = c->in[i].t;
    ts[c->n_in] = c->n_in > 0 ? c->in[0].t : NULL; /* for a count one too many */
    dc_tensor *y = NULL;
    const int64_t *shape = c->null_shape ? NULL : c->target.d;
    switch (c->op->kind) {
    case K_EW: y = c->op->call(tape, ts, c); break;
    case K_BFN: {
        dc_tensor *outs[MAX_OUT + 1] = {NULL};
        dc_status st;
        if (c->api == API_BROADCAST1) {
            outs[0] = dc_broadcast1(tape, c->fn, c->n_pass, ts);
            st = outs[0] ? DC_OK : dc_last_status(ctx);
        } else if (c->api == API_BROADCAST) {
            st = dc_broadcast(tape, c->fn, c->n_pass, ts, c->n_out_pass, outs);
        } else {
            st = dc_broadcast_policy(tape, c->fn, c->n_pass, ts, c->n_out_pass, outs, (dc_partials_policy)c->policy);
        }
        for (int k = 0; k < MAX_OUT; ++k)
            out[k] = st == DC_OK ? outs[k] : NULL;
        return st;
    }
    case K_REDUCE:
        switch (c->op->reduction) {
        case RED_PROD: y = dc_op_prod(tape, ts[0], c->n_axes, c->axes, c->keepdims); break;
        case RED_MAX: y = dc_op_max(tape, ts[0], c->n_axes, c->axes, c->keepdims); break;
        case RED_MIN: y = dc_op_min(tape, ts[0], c->n_axes, c->axes, c->keepdims); break;
        case RED_LSE: y = dc_op_logsumexp(tape, ts[0], c->n_axes, c->axes, c->keepdims); break;
        default:
            y = c->op->mean ? dc_op_mean(tape, ts[0], c->n_axes, c->axes, c->keepdims)
                            : dc_op_sum(tape, ts[0], c->n_axes, c->axes, c->keepdims);
        }
        break;
    case K_MATMUL: y = dc_op_matmul(tape, ts[0], ts[1]); break;
    case K_TRANSPOSE: y = dc_op_transpose(tape, ts[0], c->axis0, c->axis1); break;
    case K_RESHAPE: y = dc_op_reshape(tape, ts[0], c->target.nd, c->target.d); break;
    case K_SLICE: y = dc_op_slice(tape, ts[0], c->axis0, c->start, c->length); break;
    case K_CONCAT: y = dc_op_concat(tape, c->n_pass, ts, c->axis0); break;
    case K_EMBEDDING: y = dc_op_embedding(tape, ts[0], ts[1]); break;
    case K_CROSS_ENTROPY: y = dc_op_cross_entropy(tape, ts[0], ts[1]); break;
    case K_CREATE: {
        const dc_dtype dt = (dc_dtype)c->create_dtype;
        if (c->op->variant == 0)
            y = dc_tensor_new(ctx, dt, c->target.nd, shape);
        else if (c->op->variant == 1)
            y = dc_tensor_from_host(ctx, dt, c->target.nd, shape, data);
        else
            y = dc_tape_tensor_new(tape, dt, c->target.nd, shape, c->with_data ? data : NULL);
        break;
    }
    }
    out[0] = y;
    return y ? DC_OK : dc_last_status(ctx);
}

static double tolerance(dc_dtype dtype) { return dtype == DC_F32 ? 5e-5 : 1e-10; }

static bool close_to(double got, double want, double mag, double tol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want)) /* an empty maximum, minimum or log-sum-exp */
        return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want) + mag);
}

/* Compares n values of t with the reference; reports the first mismatch. */
static void compare_values(op_stats *st, bool *failed, const char *what, const dc_tensor *t, const double *want,
                           const double *mag, int64_t n, dc_dtype dtype)
{
    for (int64_t e = 0; e < n; ++e) {
        double got = 0;
        if (dc_tensor_get(t, e, &got) != DC_OK) {
            report(st, failed, "%s: dc_tensor_get(%lld) failed: %s", what, (long long)e,
                   dc_last_error(dc_tensor_ctx(t)));
            return;
        }
        if (!close_to(got, want[e], mag[e], tolerance(dtype))) {
            report(st, failed, "%s: element %lld is %.17g, want %.17g", what, (long long)e, got, want[e]);
            return;
        }
    }
}

/* The shape of a result: the one expected, and within the bound. */
static bool check_shape(op_stats *st, bool *failed, const char *what, const dc_tensor *t, const dims *want)
{
    char a[256], b[256];
    const dims got = tensor_dims(t);
    if (got.nd < 0 || got.nd > DC_MAX_DIMS || !within_bound(&got)) {
        report(st, failed, "%s: shape %s is past the bound (span > INT64_MAX / 16 or a negative size)", what,
               dims_str(&got, a, sizeof a));
        return false;
    }
    if (!dims_equal(&got, want)) {
        report(st, failed, "%s: shape %s, want %s", what, dims_str(&got, a, sizeof a), dims_str(want, b, sizeof b));
        return false;
    }
    if (dc_tensor_numel(t) != numel_of(want)) {
        report(st, failed, "%s: numel %lld, want %lld", what, (long long)dc_tensor_numel(t), (long long)numel_of(want));
        return false;
    }
    return true;
}

static void reference(const pcase *c, const expectation *x, const double *data, refs *R)
{
    switch (c->op->kind) {
    case K_EW:
    case K_BFN: ref_broadcast(c, x, R); break;
    case K_REDUCE: ref_reduce(c, x, R); break;
    case K_MATMUL: ref_matmul(c, x, R); break;
    case K_TRANSPOSE:
    case K_RESHAPE:
    case K_SLICE:
    case K_CONCAT: ref_layout(c, x, R); break;
    case K_EMBEDDING: ref_embedding(c, x, R); break;
    case K_CROSS_ENTROPY: ref_cross_entropy(c, x, R); break;
    case K_CREATE: {
        const bool with_data = c->op->variant == 1 || (c->op->variant == 2 && c->with_data);
        const int64_t n = numel_of(&x->out[0]);
        for (int64_t e = 0; e < n; ++e)
            R->y[0][e] = with_data ? (c->create_dtype == DC_F32 ? (double)(float)data[e] : data[e]) : 0.0;
        break;
    }
    }
}

/* A failure: the status the case allows, and a message naming the call. */
static void check_failure(op_stats *st, bool *failed, dc_ctx *ctx, const pcase *c, const expectation *x,
                          dc_status status)
{
    const char *msg = dc_last_error(ctx);
    if (!(x->fail & ST(status))) {
        char want[160] = "";
        size_t at = 0;
        for (int s = 1; s < DC_STATUS_COUNT; ++s)
            if (x->fail & ST(s))
                at += (size_t)snprintf(want + at, sizeof want - at, "%s%s", at ? " or " : "",
                                       dc_status_name((dc_status)s));
        report(st, failed, "failed with %s (\"%s\"), want %s", dc_status_name(status), msg, x->fail ? want : "success");
    }
    if (!msg[0]) {
        report(st, failed, "failed with %s and an empty message", dc_status_name(status));
    } else if (!strstr(msg, c->op->fn_name)) {
        report(st, failed, "the message \"%s\" does not name %s", msg, c->op->fn_name);
    } else if (c->op->kind == K_BFN && !strstr(msg, c->fn->name)) {
        report(st, failed, "the message \"%s\" does not name %s", msg, c->fn->name);
    }
}

/* Sums every result to a scalar, runs backward, and compares each operand's
 * gradient with the reference. */
static void check_backward(op_stats *st, bool *failed, dc_ctx *ctx, dc_tape *tape, const pcase *c, const expectation *x,
                           dc_tensor *const *out, const refs *R)
{
    dc_tensor *loss = NULL;
    for (int k = 0; k < x->n_out; ++k) {
        dc_tensor *s = dc_op_sum(tape, out[k], 0, NULL, false);
        loss = loss && s ? dc_op_add(tape, loss, s) : s;
        if (!loss) {
            report(st, failed, "the loss: %s", dc_last_error(ctx));
            return;
        }
    }
    const dc_status bs = dc_backward(tape, loss);
    if (bs != DC_OK) {
        report(st, failed, "dc_backward: %s: %s", dc_status_name(bs), dc_last_error(ctx));
        return;
    }
    char what[64];
    st->backward++;
    for (int i = 0; i < c->n_in; ++i) {
        const operand *o = &c->in[i];
        if (!o->requires_grad)
            continue;
        const dc_tensor *g = dc_tensor_grad(o->t);
        snprintf(what, sizeof what, "gradient of in[%d]", i);
        if (!o->differentiable) {
            if (g)
                report(st, failed, "%s: in[%d] gets no gradient from this op, but has one", what, i);
            continue;
        }
        /* the loss reads every result, so backward reaches every operand */
        if (!g) {
            report(st, failed, "%s: none (dc_tensor_grad is NULL after backward)", what);
            continue;
        }
        if (!check_shape(st, failed, what, g, &o->shape))
            continue;
        compare_values(st, failed, what, g, R->g[i], R->gmag[i], numel_of(&o->shape), o->dtype);
    }
}

static bool wants_grad(const pcase *c, bool differentiable_only)
{
    if (!c->recording)
        return false;
    for (int i = 0; i < c->n_in; ++i)
        if (c->in[i].requires_grad && (c->in[i].differentiable || !differentiable_only))
            return true;
    return false;
}

static void check_result(op_stats *st, bool *failed, dc_ctx *ctx, dc_tape *tape, const pcase *c, const expectation *x,
                         dc_tensor *const *out, const double *data)
{
    char a[256], what[32];
    if (x->must_fail) {
        for (int k = 0; k < x->n_out; ++k)
            if (out[k]) {
                const dims got = tensor_dims(out[k]);
                report(st, failed, "returned a result of shape %s (numel %lld) instead of failing%s",
                       dims_str(&got, a, sizeof a), (long long)dc_tensor_numel(out[k]),
                       within_bound(&got) ? "" : ": the shape is past the bound");
                return;
            }
        report(st, failed, "returned DC_OK and no result instead of failing");
        return;
    }
    /* the operands share a dtype here (else the call must fail) */
    const dc_dtype dtype = c->op->kind == K_CREATE ? (dc_dtype)c->create_dtype : c->in[0].dtype;
    for (int k = 0; k < x->n_out; ++k) {
        snprintf(what, sizeof what, "result %d", k);
        if (!out[k]) {
            report(st, failed, "%s is NULL with DC_OK", what);
            return;
        }
        if (!check_shape(st, failed, what, out[k], &x->out[k]))
            return;
        if (dc_tensor_dtype(out[k]) != dtype) {
            report(st, failed, "%s is %s, want %s", what, dc_dtype_name(dc_tensor_dtype(out[k])), dc_dtype_name(dtype));
            return;
        }
    }
    refs R;
    memset(&R, 0, sizeof R);
    for (int k = 0; k < x->n_out; ++k) {
        R.y[k] = zeros(numel_of(&x->out[k]));
        R.ymag[k] = zeros(numel_of(&x->out[k]));
    }
    for (int i = 0; i < c->n_in; ++i) {
        R.g[i] = zeros(numel_of(&c->in[i].shape));
        R.gmag[i] = zeros(numel_of(&c->in[i].shape));
    }
    reference(c, x, data, &R);
    for (int k = 0; k < x->n_out; ++k) {
        snprintf(what, sizeof what, "result %d", k);
        compare_values(st, failed, what, out[k], R.y[k], R.ymag[k], numel_of(&x->out[k]), dtype);
    }
    st->compared += numel_of(&x->out[0]) > 0;
    if (c->op->kind != K_CREATE) {
        const bool rg = dc_tensor_requires_grad(out[0]);
        if (wants_grad(c, true) && !rg)
            report(st, failed, "the result does not require a gradient, but an operand does");
        else if (!wants_grad(c, false) && rg)
            report(st, failed, "the result requires a gradient, but no operand does (or recording is off)");
        else if (rg && !*failed)
            check_backward(st, failed, ctx, tape, c, x, out, &R);
    }
    for (int k = 0; k < MAX_OUT; ++k) {
        free(R.y[k]);
        free(R.ymag[k]);
    }
    for (int i = 0; i < c->n_in; ++i) {
        free(R.g[i]);
        free(R.gmag[i]);
    }
}

static rng case_rng(int op_index, int case_no)
{
    rng r = {g_state.seed ^ ((uint64_t)(op_index + 1) * 0xD1B54A32D192ED03ull)};
    r.state += (uint64_t)case_no * 0x9E3779B97F4A7C15ull;
    rng_next(&r);
    return r;
}

/* Runs a case whose shapes and expectation are set; r draws its values. */
static void run_drawn(op_stats *st, dc_ctx *ctx, dc_tape *tape, pcase *c, const expectation *xp, rng *rp,
                      const char *where)
{
    const prop_op *op = c->op;
    const expectation x = *xp;
    rng r = *rp;
    describe(c, where, g_desc, sizeof g_desc);
    st->run++;
    if (g_state.verbose) { /* before the call: a crash comes right after its case */
        printf("%s\n", g_desc);
        fflush(stdout);
    }
    bool failed = false;
    dc_tape_set_recording(tape, c->recording);
    for (int i = 0; i < c->n_in; ++i)
        fill_values(&r, &c->in[i]);
    double *data = NULL;
    if (op->kind == K_CREATE) {
        const int64_t n = x.must_fail ? 0 : numel_of(&c->target);
        data = zeros(n);
        for (int64_t e = 0; e < n; ++e)
            data[e] = rng_uniform(&r, -2, 2);
        if (c->create_dtype == DC_F32) /* the library reads floats */
            for (int64_t e = 0; e < n; ++e)
                ((float *)data)[e] = (float)data[e];
    }
    alarm(g_state.timeout);
    for (int i = 0; i < c->n_in; ++i)
        if (!make_operand(ctx, tape, &c->in[i]))
            fail_msg("making in[%d] failed: %s\n  in %s", i, dc_last_error(ctx), g_desc);
    dc_clear_error(ctx);
    dc_tensor *out[MAX_OUT] = {NULL};
    const dc_status status = make_call(ctx, tape, c, data, out);
    if (status != DC_OK) {
        st->outcomes[1]++;
        check_failure(st, &failed, ctx, c, &x, status);
    } else {
        st->outcomes[0]++;
        if (data && c->create_dtype == DC_F32) /* back to doubles for the reference */
            for (int64_t e = numel_of(&c->target); e-- > 0;)
                data[e] = ((float *)data)[e];
        check_result(st, &failed, ctx, tape, c, &x, out, data);
    }
    alarm(0);
    st->failed += failed;
    if (g_state.verbose)
        printf("  -> %s\n", status == DC_OK ? "a result" : dc_status_name(status));
    if (op->kind == K_CREATE && op->variant < 2 && status == DC_OK)
        dc_tensor_free(out[0]);
    for (int i = 0; i < c->n_in; ++i) {
        dc_tensor_free(c->in[i].leaf);
        free(c->in[i].vals);
    }
    free(data);
    dc_tape_reset(tape);
}

static void run_case(op_stats *st, dc_ctx *ctx, dc_tape *tape, pcase *c, int op_index, int case_no)
{
    const prop_op *op = &prop_ops[op_index];
    rng r = case_rng(op_index, case_no);
    expectation x;
    char where[128];
    snprintf(where, sizeof where, "DC_PROPERTY_SEED=%llu DC_PROPERTY_OP=%s DC_PROPERTY_CASE=%d",
             (unsigned long long)g_state.seed, op->name, case_no);
    snprintf(g_desc, sizeof g_desc, "%s (drawing it)", where);
    /* drawn again (from the same stream) until it stays small */
    for (int attempt = 0;; ++attempt) {
        memset(c, 0, sizeof *c);
        c->op = op;
        c->dtype = rng_chance(&r, 0.5) ? DC_F32 : DC_F64;
        c->recording = rng_chance(&r, 0.9);
        gen_case(&r, c);
        expect_case(c, &x);
        if (case_fits(&x))
            break;
        if (attempt == 200)
            fail_msg("%s case %d: no case that fits in 200 draws", op->name, case_no);
    }
    run_drawn(st, ctx, tape, c, &x, &r, where);
}

/* ---- crashes, sanitizer reports and timeouts name the case ---- */

static void write_desc(const char *why)
{
    static const char head[] = "\ntest_shape_properties: ";
    ssize_t ignored = write(2, head, sizeof head - 1);
    ignored = write(2, why, strlen(why));
    ignored = write(2, " in case\n  ", 11);
    ignored = write(2, g_desc, strlen(g_desc));
    ignored = write(2, "\n", 1);
    (void)ignored;
}

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
enum { N_CRASH_SIGNALS = sizeof crash_signals / sizeof crash_signals[0] };
static struct sigaction g_previous[N_CRASH_SIGNALS];
static volatile sig_atomic_t g_catching;

/* Names the case, puts the handlers before ours back (cmocka may leave the
 * test by longjmp, past catch_crashes(false)), then hands the signal to its
 * own: cmocka's, which fails the test, or the default. */
static void on_crash(int sig, siginfo_t *info, void *uctx)
{
    write_desc("a crash (signal)");
    for (int i = 0; i < N_CRASH_SIGNALS; ++i)
        sigaction(crash_signals[i], &g_previous[i], NULL);
    g_catching = 0;
    for (int i = 0; i < N_CRASH_SIGNALS; ++i) {
        if (crash_signals[i] != sig)
            continue;
        const struct sigaction *p = &g_previous[i];
        if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction)
            p->sa_sigaction(sig, info, uctx);
        else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN)
            p->sa_handler(sig);
        /* else: returning runs the faulting instruction again, now fatal */
    }
}

static void on_timeout(int sig)
{
    (void)sig;
    write_desc("a timeout (DC_PROPERTY_CASE_TIMEOUT)");
    _exit(1);
}

#ifdef DC_PROPERTY_ASAN
static void on_sanitizer_death(void) { write_desc("a sanitizer report"); }
#endif

static void catch_crashes(bool on)
{
    if (on == (g_catching != 0))
        return;
    g_catching = on;
    if (!on) {
        for (int i = 0; i < N_CRASH_SIGNALS; ++i)
            sigaction(crash_signals[i], &g_previous[i], NULL);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_CRASH_SIGNALS; ++i)
        sigaction(crash_signals[i], &sa, &g_previous[i]);
}

/* ---- the tests: one per op ---- */

static void test_op(void **state)
{
    const prop_op *op = *state;
    const int op_index = (int)(op - prop_ops);
    catch_crashes(true);
    dc_ctx *ctx = test_cpu_ctx_threads(2, g_state.seed);
    dc_tape *tape = dc_tape_new(ctx);
    assert_non_null(tape);
    pcase *c = malloc(sizeof *c);
    assert_non_null(c);
    op_stats st;
    memset(&st, 0, sizeof st);
    const int cases = g_state.cases * (op->weight > 0 ? op->weight : 1);
    for (int n = 0; n < cases; ++n)
        if (g_state.only_case < 0 || n == g_state.only_case)
            run_case(&st, ctx, tape, c, op_index, n);
    free(c);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
    catch_crashes(false);
    printf("%-16s %4d cases run: %4d results (%4d compared, %4d backward), %4d refusals", op->name, st.run,
           st.outcomes[0], st.compared, st.backward, st.outcomes[1]);
    printf("\n");
    fflush(stdout);
    if (st.failed)
        fail_msg("%s: %d of %d cases failed (%d checks; DC_PROPERTY_SEED=%llu)", op->name, st.failed, st.run,
                 st.failures, (unsigned long long)g_state.seed);
}

/* ---- the cases, pinned ---- */

/* The reproductions of the failures (see the header), and the bound's
 * edges, whatever the seed draws: each runs as a drawn case does. */
typedef struct pinned_case {
    const char *what;
    const char *op; /* a prop_ops name */
    int n_in;       /* concat: copies of in[0] */
    dims in[2];
    bool requires_grad;
    int axis;
    dims target; /* create */
} pinned_case;

#define P2(e) ((int64_t)1 << (e))
static const pinned_case pinned_cases[] = {
    {"matmul backward into the empty matrices of a batch",
     "matmul",
     2,
     {{3, {3, 0, 2}}, {2, {2, 4}}},
     true,
     0,
     {0, {0}}},
    {"an empty broadcast past the bound", "add", 2, {{3, {P2(31), 0, 1}}, {3, {1, 0, P2(31)}}}, true, 0, {0, {0}}},
    {"an empty broadcast just within the bound",
     "add",
     2,
     {{3, {P2(29), 0, 1}}, {3, {1, 0, P2(30) - 1}}},
     true,
     0,
     {0, {0}}},
    {"40 empty parts whose sizes add up past INT64_MAX", "concat", 40, {{2, {0, P2(58)}}}, true, 1, {0, {0}}},
    {"an empty inner size summed away, past the bound",
     "matmul",
     2,
     {{3, {P2(34), 1, 0}}, {2, {0, P2(30)}}},
     false,
     0,
     {0, {0}}},
    {"an empty product over 2^40 matrices", "matmul", 2, {{3, {P2(40), 0, 1}}, {2, {1, 1}}}, false, 0, {0, {0}}},
    {"ids [2^40, 0] into a table [0, 2^20]", "embedding", 2, {{2, {0, P2(20)}}, {2, {P2(40), 0}}}, true, 0, {0, {0}}},
    {"a tensor at the bound", "tensor_new", 0, {{0, {0}}}, false, 0, {2, {0, SPAN_BOUND}}},
    {"a tensor one past the bound", "tensor_new", 0, {{0, {0}}}, false, 0, {2, {SPAN_BOUND + 1, 0}}},
    {"dc_tensor_from_host one past the bound", "tensor_from_host", 0, {{0, {0}}}, false, 0, {2, {0, SPAN_BOUND + 1}}},
};
#undef P2
enum { N_PINNED = sizeof pinned_cases / sizeof pinned_cases[0] };

static const prop_op *op_named(const char *name)
{
    for (int i = 0; i < N_OPS; ++i)
        if (strcmp(prop_ops[i].name, name) == 0)
            return &prop_ops[i];
    fail_msg("no op %s", name);
    return NULL;
}

static void test_pinned(void **state)
{
    (void)state;
    catch_crashes(true);
    dc_ctx *ctx = test_cpu_ctx_threads(2, g_state.seed);
    dc_tape *tape = dc_tape_new(ctx);
    assert_non_null(tape);
    pcase *c = malloc(sizeof *c);
    assert_non_null(c);
    op_stats st;
    memset(&st, 0, sizeof st);
    for (int n = 0; n < N_PINNED; ++n) {
        if (g_state.only_case >= 0 && n != g_state.only_case)
            continue;
        const pinned_case *p = &pinned_cases[n];
        memset(c, 0, sizeof *c);
        c->op = op_named(p->op);
        c->dtype = DC_F64;
        c->recording = true;
        c->n_in = c->n_pass = p->n_in;
        c->axis0 = p->axis;
        c->target = p->target;
        c->create_dtype = DC_F64;
        const char *fills = c->op->kind == K_EMBEDDING ? "ui" : "uu";
        for (int i = 0; i < p->n_in; ++i) {
            const fill_kind fill = fills[i < 1 ? 0 : 1] == 'i' ? FILL_INDEX : FILL_UNIFORM;
            init_operand(&c->in[i], &p->in[i < 2 && c->op->kind != K_CONCAT ? i : 0], DC_F64, fill, fill != FILL_INDEX);
            c->in[i].requires_grad = p->requires_grad && i == 0;
        }
        expectation x;
        expect_case(c, &x);
        char where[160];
        snprintf(where, sizeof where, "DC_PROPERTY_SEED=%llu DC_PROPERTY_OP=pinned DC_PROPERTY_CASE=%d (%s)",
                 (unsigned long long)g_state.seed, n, p->what);
        rng r = {g_state.seed};
        run_drawn(&st, ctx, tape, c, &x, &r, where);
    }
    free(c);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
    catch_crashes(false);
    printf("%-16s %4d cases run", "pinned", st.run);
    printf("\n");
    if (st.failed)
        fail_msg("pinned: %d of %d cases failed", st.failed, st.run);
}

/* ---- configuration ---- */

static bool parse_number(const char *name, unsigned long long fallback, unsigned long long max,
                         unsigned long long *value)
{
    const char *s = getenv(name);
    *value = fallback;
    if (!s || !s[0])
        return true;
    char *end;
    *value = strtoull(s, &end, 0);
    if (*end || *value > max) {
        fprintf(stderr, "%s=%s: not a number up to %llu\n", name, s, max);
        return false;
    }
    return true;
}

int main(void)
{
    /* new buffers full of NaN: an element nobody writes cannot pass for a zero */
    setenv("DC_POISON", "1", 0);
    unsigned long long seed, cases, only_case, timeout;
    if (!parse_number("DC_PROPERTY_SEED", 20261125, UINT64_MAX, &seed) ||
        !parse_number("DC_PROPERTY_CASES", DEFAULT_CASES, 1000000, &cases) ||
        !parse_number("DC_PROPERTY_CASE", (unsigned long long)-1, UINT64_MAX, &only_case) ||
        !parse_number("DC_PROPERTY_CASE_TIMEOUT", 60, 86400, &timeout))
        return 2;
    g_state.seed = seed;
    g_state.cases = (int)cases;
    g_state.only_case = only_case > 1000000 ? -1 : (int)only_case;
    g_state.timeout = (unsigned)timeout;
    g_state.only_op = getenv("DC_PROPERTY_OP");
    g_state.verbose = getenv("DC_PROPERTY_VERBOSE") && strcmp(getenv("DC_PROPERTY_VERBOSE"), "1") == 0;
    if (g_state.only_case >= g_state.cases)
        g_state.cases = g_state.only_case + 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timeout;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
#ifdef DC_PROPERTY_ASAN
    __sanitizer_set_death_callback(on_sanitizer_death);
#endif

    printf("test_shape_properties: DC_PROPERTY_SEED=%llu, %d cases per op\n", (unsigned long long)g_state.seed,
           g_state.cases);
    struct CMUnitTest tests[N_OPS + 1];
    size_t n = 0;
    if (!g_state.only_op || strcmp(g_state.only_op, "pinned") == 0) {
        const struct CMUnitTest t = {"pinned", test_pinned, NULL, NULL, NULL};
        tests[n++] = t;
    }
    for (int i = 0; i < N_OPS; ++i) {
        if (g_state.only_op && strcmp(g_state.only_op, prop_ops[i].name) != 0)
            continue;
        const struct CMUnitTest t = {prop_ops[i].name, test_op, NULL, NULL, (void *)&prop_ops[i]};
        tests[n++] = t;
    }
    if (n == 0) {
        fprintf(stderr, "DC_PROPERTY_OP=%s: no such op (nor pinned)\n", g_state.only_op);
        return 2;
    }
    return _cmocka_run_group_tests("shape_properties", tests, n, NULL, NULL);
}
