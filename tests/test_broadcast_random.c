/* Broadcasting and its gradients on seeded random cases, against a naive
 * reference written here: explicit multi-index loops in double precision.
 *
 * Each case draws an output shape (rank 0 to 8, size-1 and zero-size
 * dimensions, or sizes that cross the CPU engine's thresholds: several
 * chunks of 2048 elements, rows of 512 or more and of 2048 or more read
 * through a row broadcast), operands broadcast to it in every NumPy pattern
 * (dropped leading dimensions, size-1 dimensions, scalars), each operand a
 * view of a persistent leaf through slices, transposes and reshapes (so the
 * engine stages strided data), sometimes two views of one leaf or one tensor
 * passed twice, a dtype, a thread count, and one of:
 *   - a primitive op: add, sub, mul, div, select with a condition, or no op;
 *   - a broadcast function: the paper's c-update (control inputs, if/else),
 *     polar_pair (two outputs), gated_scale, prod_sign_3, under both
 *     partials policies;
 * followed by a head that seeds the backward pass: a random adjoint of a
 * broadcastable shape, a sum or mean over random axes (keepdims or not) with
 * a random adjoint, or a weighted sum of every output. The test checks the
 * outputs (also with recording off), the reduction, the gradient of every
 * leaf, and that a second backward pass doubles them. Tolerances are
 * relative to the sum of the magnitudes of the terms of each reference
 * value: 1e-5 in float32, 1e-12 in float64. On failure the case is printed
 * with its seed, shapes, views, dtype, threads and policy; each case comes
 * from its own seed, and DC_RANDOM_CASE=n runs case n of each test alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/kernels/prod_sign_fns.h"
#include "support/test_support.h"

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

enum {
    MAX_INPUTS = 6,             /* of any function below */
    MAX_OUTPUTS = 2,
    MAX_OPERANDS = MAX_INPUTS + MAX_OUTPUTS, /* inputs, then the head's adjoints */
    MAX_STEPS = 3,              /* view operations between a leaf and an operand */
    DESC_SIZE = 6144,
};

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
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static double rng_uniform(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }

static bool rng_chance(rng *r, double p) { return rng_unit(r) < p; }

/* ---- shapes ---- */

typedef struct dims {
    int nd;
    int64_t d[DC_MAX_DIMS];
} dims;

static int64_t dims_numel(const dims *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->nd; ++i)
        n *= s->d[i];
    return n;
}

static void contiguous_strides(const dims *s, int64_t *strides)
{
    int64_t step = 1;
    for (int i = s->nd - 1; i >= 0; --i) {
        strides[i] = step;
        step *= s->d[i];
    }
}

/* Strides (in elements of a row-major array of shape s) that read s
 * broadcast to shape out: 0 along dimensions s lacks or has as size 1. */
static void broadcast_strides(const dims *s, const dims *out, int64_t *strides)
{
    int64_t own[DC_MAX_DIMS];
    contiguous_strides(s, own);
    for (int d = 0; d < out->nd; ++d) {
        const int sd = d - (out->nd - s->nd);
        strides[d] = (sd < 0 || s->d[sd] == 1) ? 0 : own[sd];
    }
}

/* Steps the multi-index idx through shape s in row-major order. */
static void next_index(const dims *s, int64_t *idx)
{
    for (int d = s->nd - 1; d >= 0; --d) {
        if (++idx[d] < s->d[d])
            return;
        idx[d] = 0;
    }
}

static int64_t dot_index(const int64_t *idx, const int64_t *strides, int nd)
{
    int64_t off = 0;
    for (int d = 0; d < nd; ++d)
        off += idx[d] * strides[d];
    return off;
}

/* The NumPy broadcast of n shapes (known to be compatible). */
static dims broadcast_all(int n, const dims *shapes)
{
    dims out = {0, {0}};
    for (int i = 0; i < n; ++i)
        out.nd = shapes[i].nd > out.nd ? shapes[i].nd : out.nd;
    for (int d = 0; d < out.nd; ++d) {
        int64_t size = 1;
        for (int i = 0; i < n; ++i) {
            const int sd = d - (out.nd - shapes[i].nd);
            if (sd >= 0 && shapes[i].d[sd] != 1)
                size = shapes[i].d[sd];
        }
        out.d[d] = size;
    }
    return out;
}

static bool dims_equal(const dims *a, int nd, const int64_t *d)
{
    if (a->nd != nd)
        return false;
    for (int i = 0; i < nd; ++i)
        if (a->d[i] != d[i])
            return false;
    return true;
}

static int format_dims(char *buf, size_t size, const dims *s)
{
    int at = snprintf(buf, size, "[");
    for (int i = 0; i < s->nd; ++i)
        at += snprintf(buf + at, size > (size_t)at ? size - (size_t)at : 0, "%s%lld", i ? ", " : "",
                       (long long)s->d[i]);
    at += snprintf(buf + at, size > (size_t)at ? size - (size_t)at : 0, "]");
    return at;
}

/* ---- the functions under test ---- */

typedef enum fn_kind {
    FN_ADD,
    FN_SUB,
    FN_MUL,
    FN_DIV,
    FN_SELECT,
    FN_NONE, /* the operand itself (a view), for the head to seed or reduce */
    FN_CUPDATE,
    FN_POLAR,
    FN_GATED,
    FN_PROD_SIGN3,
    FN_COUNT
} fn_kind;

/* Where an operand's values come from: chosen so that no value lies near a
 * branch boundary (0.5 for prod_sign, 0 for polar_pair's radius) or near a
 * singularity (a divisor near 0). */
typedef enum domain {
    DOM_ANY,     /* [-2, 2] */
    DOM_DIVISOR, /* +-[0.5, 2] */
    DOM_RADIUS,  /* +-[0.25, 2] */
    DOM_ANGLE,   /* [-3, 3] */
    DOM_SIGN,    /* [-2, 2] without (0.4, 0.6) */
    DOM_FLAG,    /* 0 or 1 */
    DOM_COND,    /* 0, 1 or -1.5 */
    DOM_GATE,    /* 0, 0.5 or 1.5 */
    DOM_SEED,    /* [-1, 1], an adjoint */
} domain;

typedef struct fn_info {
    const char *name;
    int n_in, n_out;
    bool user_fn; /* a broadcast function, run under both partials policies */
    const char *in_names[MAX_INPUTS];
    domain in_domain[MAX_INPUTS];
    bool differentiable[MAX_INPUTS];
} fn_info;

static const fn_info fns[FN_COUNT] = {
    [FN_ADD] = {"dc_op_add", 2, 1, false, {"a", "b"}, {DOM_ANY, DOM_ANY}, {true, true}},
    [FN_SUB] = {"dc_op_sub", 2, 1, false, {"a", "b"}, {DOM_ANY, DOM_ANY}, {true, true}},
    [FN_MUL] = {"dc_op_mul", 2, 1, false, {"a", "b"}, {DOM_ANY, DOM_ANY}, {true, true}},
    [FN_DIV] = {"dc_op_div", 2, 1, false, {"a", "b"}, {DOM_ANY, DOM_DIVISOR}, {true, true}},
    [FN_SELECT] = {"dc_op_select", 3, 1, false, {"cond", "a", "b"}, {DOM_COND, DOM_ANY, DOM_ANY},
                   {false, true, true}},
    [FN_NONE] = {"no op", 1, 1, false, {"x"}, {DOM_ANY}, {true}},
    [FN_CUPDATE] = {"hmlstm_update_c", 6, 1, true, {"z", "zb", "c", "f", "i", "g"},
                    {DOM_FLAG, DOM_FLAG, DOM_ANY, DOM_ANY, DOM_ANY, DOM_ANY},
                    {false, false, true, true, true, true}},
    [FN_POLAR] = {"polar_pair", 2, 2, true, {"r", "t"}, {DOM_RADIUS, DOM_ANGLE}, {true, true}},
    [FN_GATED] = {"gated_scale", 3, 1, true, {"a", "gate", "b"}, {DOM_ANY, DOM_GATE, DOM_ANY},
                  {true, false, true}},
    [FN_PROD_SIGN3] = {"prod_sign_3", 3, 1, true, {"x1", "x2", "x3"}, {DOM_SIGN, DOM_SIGN, DOM_SIGN},
                       {true, true, true}},
};

static const dc_bfn *user_fn(fn_kind fn)
{
    switch (fn) {
    case FN_CUPDATE:
        return DC_BFN_REF(hmlstm_update_c);
    case FN_POLAR:
        return DC_BFN_REF(polar_pair);
    case FN_GATED:
        return DC_BFN_REF(gated_scale);
    case FN_PROD_SIGN3:
        return DC_BFN_REF(prod_sign_3);
    default:
        return NULL;
    }
}

/* One element of a function: its outputs and their partials with respect
 * to each input, each with the scale of its rounding error (the magnitude
 * of its terms; 0 where the value is exactly 0 by construction). */
typedef struct local {
    double out[MAX_OUTPUTS], out_mag[MAX_OUTPUTS];
    double d[MAX_OUTPUTS][MAX_INPUTS], d_mag[MAX_OUTPUTS][MAX_INPUTS];
} local;

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void set_partial(local *l, int k, int j, double value)
{
    l->d[k][j] = value;
    l->d_mag[k][j] = fabs(value);
}

static void eval_element(fn_kind fn, const double *x, local *l)
{
    memset(l, 0, sizeof *l);
    switch (fn) {
    case FN_ADD:
    case FN_SUB: {
        const double sign = fn == FN_ADD ? 1.0 : -1.0;
        l->out[0] = x[0] + sign * x[1];
        l->out_mag[0] = fabs(x[0]) + fabs(x[1]);
        set_partial(l, 0, 0, 1.0);
        set_partial(l, 0, 1, sign);
        break;
    }
    case FN_MUL:
        l->out[0] = x[0] * x[1];
        l->out_mag[0] = fabs(l->out[0]);
        set_partial(l, 0, 0, x[1]);
        set_partial(l, 0, 1, x[0]);
        break;
    case FN_DIV:
        l->out[0] = x[0] / x[1];
        l->out_mag[0] = fabs(l->out[0]);
        set_partial(l, 0, 0, 1.0 / x[1]);
        set_partial(l, 0, 1, -x[0] / (x[1] * x[1]));
        break;
    case FN_SELECT: {
        const bool take_a = x[0] != 0.0;
        l->out[0] = take_a ? x[1] : x[2];
        l->out_mag[0] = fabs(l->out[0]);
        set_partial(l, 0, take_a ? 1 : 2, 1.0);
        break;
    }
    case FN_NONE:
        l->out[0] = x[0];
        l->out_mag[0] = fabs(x[0]);
        set_partial(l, 0, 0, 1.0);
        break;
    case FN_CUPDATE: {
        /* z, zb, c, f, i, g */
        const double c = x[2], sf = sigmoid(x[3]), si = sigmoid(x[4]), tg = tanh(x[5]);
        const double flush = si * tg;
        if (x[0] == 1.0) { /* FLUSH */
            l->out[0] = flush;
            l->out_mag[0] = fabs(flush);
            set_partial(l, 0, 4, si * (1 - si) * tg);
            set_partial(l, 0, 5, si * (1 - tg * tg));
        } else if (x[1] == 0.0) { /* COPY */
            l->out[0] = c;
            l->out_mag[0] = fabs(c);
            set_partial(l, 0, 2, 1.0);
        } else { /* UPDATE */
            l->out[0] = sf * c + flush;
            l->out_mag[0] = fabs(sf * c) + fabs(flush);
            set_partial(l, 0, 2, sf);
            set_partial(l, 0, 3, sf * (1 - sf) * c);
            set_partial(l, 0, 4, si * (1 - si) * tg);
            set_partial(l, 0, 5, si * (1 - tg * tg));
        }
        break;
    }
    case FN_POLAR: {
        /* r < 0 gives exact zeros; else (r cos t, r sin t). cos and sin
         * round to about one unit of 1, not of their value: their error
         * scale is 1 (times r). */
        const double r = x[0], t = x[1];
        if (r < 0)
            break;
        l->out[0] = r * cos(t);
        l->out[1] = r * sin(t);
        l->out_mag[0] = l->out_mag[1] = fabs(r);
        l->d[0][0] = cos(t);
        l->d[0][1] = -r * sin(t);
        l->d[1][0] = sin(t);
        l->d[1][1] = r * cos(t);
        l->d_mag[0][0] = l->d_mag[1][0] = 1.0;
        l->d_mag[0][1] = l->d_mag[1][1] = fabs(r);
        break;
    }
    case FN_GATED: {
        /* a, gate, b: gate ? a * (gate + b) : exp(a) - b */
        const double a = x[0], gate = x[1], b = x[2];
        if (gate != 0) {
            l->out[0] = a * (gate + b);
            l->out_mag[0] = fabs(a) * (fabs(gate) + fabs(b));
            set_partial(l, 0, 0, gate + b);
            l->d_mag[0][0] = fabs(gate) + fabs(b);
            set_partial(l, 0, 2, a);
        } else {
            l->out[0] = exp(a) - b;
            l->out_mag[0] = exp(a) + fabs(b);
            set_partial(l, 0, 0, exp(a));
            set_partial(l, 0, 2, -1.0);
        }
        break;
    }
    case FN_PROD_SIGN3: {
        double factor[3], y = 1.0;
        for (int j = 0; j < 3; ++j) {
            factor[j] = x[j] > 0.5 ? x[j] : -x[j];
            y *= factor[j];
        }
        l->out[0] = y;
        l->out_mag[0] = fabs(y);
        for (int j = 0; j < 3; ++j) {
            double others = x[j] > 0.5 ? 1.0 : -1.0;
            for (int k = 0; k < 3; ++k)
                if (k != j)
                    others *= factor[k];
            set_partial(l, 0, j, others);
        }
        break;
    }
    default:
        fail_msg("eval_element: unknown function %d", (int)fn);
    }
}

/* ---- operands: views of leaves ---- */

typedef enum view_kind { VIEW_SLICE, VIEW_TRANSPOSE, VIEW_RESHAPE } view_kind;

typedef struct view_step {
    view_kind kind;
    int axis0, axis1;      /* slice: axis0; transpose: both */
    int64_t start, length; /* slice */
    int64_t pad;           /* slice: the axis is length + pad long before it */
    dims to;               /* the shape after the step */
} view_step;

typedef enum fill_mode {
    FILL_IID,      /* independent values */
    FILL_CONSTANT, /* one value everywhere */
    FILL_RUNS,     /* runs of `run` equal values (control inputs) */
} fill_mode;

typedef struct operand {
    char name[16];
    domain dom;
    bool differentiable;
    dims shape;      /* as the op sees it */
    dims leaf_shape; /* of the persistent tensor it views */
    int n_steps;
    view_step steps[MAX_STEPS]; /* leaf -> operand, in order */
    int leaf_of;                /* -1: its own leaf; else the operand whose leaf it views */
    bool wide;                  /* its leaf is wide enough for other views beside it */
    int alias_of;               /* -1; else the operand whose tensor it is, passed again */
    bool requires_grad;         /* of its leaf */
    fill_mode fill;
    int64_t run;
    /* set when the case runs */
    dc_tensor *leaf;
    double *leaf_values; /* as stored (rounded to the dtype) */
    int64_t *map;        /* operand element (row-major) -> leaf element */
    double *values;      /* operand elements */
} operand;

/* The shape before a step, given the shape after it; fills the step. */
static dims step_back(rng *r, const dims *after, view_step *st)
{
    dims before = *after;
    st->to = *after;
    int choice = (int)rng_int(r, 0, 2);
    if (choice == 1 && after->nd < 2)
        choice = 0;
    if (choice == 0 && after->nd < 1)
        choice = 2;
    if (choice == 0) {
        st->kind = VIEW_SLICE;
        st->axis0 = (int)rng_int(r, 0, after->nd - 1);
        st->pad = rng_int(r, 1, 3);
        st->start = rng_int(r, 0, st->pad);
        st->length = after->d[st->axis0];
        before.d[st->axis0] += st->pad;
    } else if (choice == 1) {
        st->kind = VIEW_TRANSPOSE;
        st->axis0 = (int)rng_int(r, 0, after->nd - 1);
        do
            st->axis1 = (int)rng_int(r, 0, after->nd - 1);
        while (st->axis1 == st->axis0);
        before.d[st->axis0] = after->d[st->axis1];
        before.d[st->axis1] = after->d[st->axis0];
    } else {
        st->kind = VIEW_RESHAPE;
        const int how = (int)rng_int(r, 0, 2);
        if (how == 0 && after->nd >= 2) { /* merge two neighbours */
            const int a = (int)rng_int(r, 0, after->nd - 2);
            before.nd = after->nd - 1;
            for (int d = 0, s = 0; d < after->nd; ++d, ++s) {
                before.d[s] = after->d[d];
                if (d == a)
                    before.d[s] *= after->d[++d];
            }
        } else if (how == 1 && after->nd < DC_MAX_DIMS) { /* a size-1 axis more */
            const int a = (int)rng_int(r, 0, after->nd);
            before.nd = after->nd + 1;
            for (int d = 0, s = 0; s < before.nd; ++s)
                before.d[s] = s == a ? 1 : after->d[d++];
        } else { /* flat */
            before.nd = 1;
            before.d[0] = dims_numel(after);
        }
    }
    return before;
}

/* A random chain of n_steps views that ends in the operand's shape. With
 * `wide`, the last step is a slice of half an axis (or less), so that other
 * slices of the same leaf can lie beside it or overlap it. */
static void make_chain(rng *r, operand *o, int n_steps, bool wide)
{
    dims cur = o->shape;
    if (wide && cur.nd == 0)
        wide = false;
    if (wide && n_steps == 0)
        n_steps = 1;
    o->n_steps = n_steps;
    for (int s = n_steps - 1; s >= 0; --s) {
        if (wide && s == n_steps - 1) {
            view_step *st = &o->steps[s];
            st->kind = VIEW_SLICE;
            st->to = cur;
            st->axis0 = (int)rng_int(r, 0, cur.nd - 1);
            for (int d = 0; d < cur.nd; ++d) /* rather an axis of more than one element */
                if (cur.d[st->axis0] < 2 && cur.d[d] >= 2)
                    st->axis0 = d;
            st->length = cur.d[st->axis0];
            st->pad = st->length > 0 ? st->length + rng_int(r, 0, 2) : 1;
            st->start = rng_chance(r, 0.5) ? 0 : st->pad;
            cur.d[st->axis0] += st->pad;
            continue;
        }
        cur = step_back(r, &cur, &o->steps[s]);
    }
    o->leaf_shape = cur;
}

static dc_tensor *apply_steps(dc_tape *tape, dc_tensor *leaf, const operand *o)
{
    dc_tensor *t = leaf;
    for (int s = 0; s < o->n_steps && t; ++s) {
        const view_step *st = &o->steps[s];
        if (st->kind == VIEW_SLICE)
            t = dc_op_slice(tape, t, st->axis0, st->start, st->length);
        else if (st->kind == VIEW_TRANSPOSE)
            t = dc_op_transpose(tape, t, st->axis0, st->axis1);
        else
            t = dc_op_reshape(tape, t, st->to.nd, st->to.d);
    }
    return t;
}

/* The leaf element behind each operand element, by applying the steps to
 * an index array. */
static int64_t *build_map(const operand *o)
{
    dims cur = o->leaf_shape;
    int64_t n = dims_numel(&cur);
    int64_t *map = malloc((size_t)(n ? n : 1) * sizeof *map);
    assert_non_null(map);
    for (int64_t i = 0; i < n; ++i)
        map[i] = i;
    for (int s = 0; s < o->n_steps; ++s) {
        const view_step *st = &o->steps[s];
        if (st->kind == VIEW_RESHAPE) {
            cur = st->to;
            continue;
        }
        int64_t old_strides[DC_MAX_DIMS];
        contiguous_strides(&cur, old_strides);
        const dims next = st->to;
        const int64_t m = dims_numel(&next);
        int64_t *nmap = malloc((size_t)(m ? m : 1) * sizeof *nmap);
        assert_non_null(nmap);
        int64_t idx[DC_MAX_DIMS] = {0};
        for (int64_t e = 0; e < m; ++e, next_index(&next, idx)) {
            int64_t old[DC_MAX_DIMS];
            memcpy(old, idx, sizeof old);
            if (st->kind == VIEW_SLICE) {
                old[st->axis0] += st->start;
            } else {
                old[st->axis0] = idx[st->axis1];
                old[st->axis1] = idx[st->axis0];
            }
            nmap[e] = map[dot_index(old, old_strides, cur.nd)];
        }
        free(map);
        map = nmap;
        cur = next;
    }
    return map;
}

static double domain_value(rng *r, domain dom)
{
    static const double cond_values[3] = {0.0, 1.0, -1.5};
    static const double gate_values[3] = {0.0, 0.5, 1.5};
    switch (dom) {
    case DOM_ANY:
        return rng_uniform(r, -2.0, 2.0);
    case DOM_DIVISOR:
        return (rng_chance(r, 0.5) ? 1.0 : -1.0) * rng_uniform(r, 0.5, 2.0);
    case DOM_RADIUS:
        return (rng_chance(r, 0.5) ? 1.0 : -1.0) * rng_uniform(r, 0.25, 2.0);
    case DOM_ANGLE:
        return rng_uniform(r, -3.0, 3.0);
    case DOM_SIGN: {
        double v;
        do
            v = rng_uniform(r, -2.0, 2.0);
        while (fabs(v - 0.5) < 0.1);
        return v;
    }
    case DOM_FLAG:
        return (double)rng_int(r, 0, 1);
    case DOM_COND:
        return cond_values[rng_int(r, 0, 2)];
    case DOM_GATE:
        return gate_values[rng_int(r, 0, 2)];
    case DOM_SEED:
        return rng_uniform(r, -1.0, 1.0);
    }
    return 0.0;
}

static bool is_control_domain(domain dom) { return dom == DOM_FLAG || dom == DOM_COND || dom == DOM_GATE; }

/* ---- cases ---- */

typedef enum category { CAT_SMALL, CAT_CHUNKS, CAT_LONG_ROWS } category;
static const char *const category_names[] = {"small", "chunks", "long rows"};

typedef enum head_kind {
    HEAD_SEED,   /* dc_backward_with(output, adjoint of a broadcastable shape) */
    HEAD_REDUCE, /* sum or mean over axes, then dc_backward_with(that, adjoint) */
    HEAD_WSUM,   /* dc_backward(sum over outputs of sum(output * weight)) */
} head_kind;
static const char *const head_names[] = {"seed", "reduce", "weighted sum"};

typedef struct rcase {
    category cat;
    int number;
    uint64_t seed;
    fn_kind fn;
    dc_dtype dtype;
    int threads;
    dims out;
    head_kind head;
    int head_out;      /* the output seeded or reduced */
    bool mean;         /* reduce: mean instead of sum */
    bool keepdims;
    int n_axes;        /* 0: every axis */
    int axes[DC_MAX_DIMS];
    bool reduced[DC_MAX_DIMS];
    dims red_shape;    /* shape of the reduction */
    int n_operands;    /* the function's inputs, then the head's adjoints */
    operand op[MAX_OPERANDS];
    char desc[DESC_SIZE];
} rcase;

/* Operand shape for an output shape: a random NumPy broadcasting pattern
 * (leading dimensions dropped, size-1 dimensions, a scalar now and then). */
static dims pattern_of(rng *r, const dims *out, double p_one)
{
    dims s = {0, {0}};
    if (out->nd > 0 && rng_chance(r, 0.07))
        return s; /* a scalar */
    int drop = 0;
    if (out->nd > 0 && rng_chance(r, 0.3))
        drop = (int)rng_int(r, 1, out->nd);
    s.nd = out->nd - drop;
    for (int d = 0; d < s.nd; ++d) {
        s.d[d] = out->d[d + drop];
        if (rng_chance(r, p_one))
            s.d[d] = 1;
    }
    return s;
}

/* An output shape for the category; *row_input: one input should be a row
 * broadcast over the rows. */
static dims output_shape_for(rng *r, category cat, bool *row_input)
{
    dims s = {0, {0}};
    *row_input = cat == CAT_LONG_ROWS;
    if (cat == CAT_SMALL) {
        s.nd = (int)rng_int(r, 0, DC_MAX_DIMS);
        const int64_t top = s.nd >= 5 ? 3 : 5;
        for (int d = 0; d < s.nd; ++d)
            s.d[d] = rng_chance(r, 0.3) ? 1 : rng_int(r, 2, top);
        while (dims_numel(&s) > 3000)
            s.d[rng_int(r, 0, s.nd - 1)] = 1;
        if (s.nd > 0 && rng_chance(r, 0.08))
            s.d[rng_int(r, 0, s.nd - 1)] = 0;
    } else if (cat == CAT_CHUNKS) {
        /* 4,200 to about 100,000 elements: several chunks, of whole rows
         * or of pieces of rows */
        if (rng_chance(r, 0.15)) {
            /* rows long enough that the per-thread sums of a row input's
             * gradient are combined in parallel */
            s.nd = 2;
            s.d[0] = rng_int(r, 2, 3);
            s.d[1] = rng_int(r, 16500, 33000);
            *row_input = true;
            return s;
        }
        s.nd = (int)rng_int(r, 1, 5);
        const double target = 4200.0 * pow(24.0, rng_unit(r));
        int64_t outer = 1;
        for (int d = 0; d < s.nd - 1; ++d) {
            s.d[d] = rng_chance(r, 0.2) ? 1 : rng_int(r, 2, 9);
            outer *= s.d[d];
        }
        s.d[s.nd - 1] = (int64_t)ceil(target / (double)outer);
    } else {
        /* rows of 512 to 2047 (a chunk each when an input is a row view) or
         * of 2048 and more (cut in pieces), a few of them */
        s.nd = (int)rng_int(r, 2, 4);
        static const int64_t row_lo[4] = {512, 1000, 2048, 3000}, row_span[4] = {200, 1047, 64, 1500};
        const int pick = (int)rng_int(r, 0, 3);
        int64_t outer = 1;
        for (int d = 0; d < s.nd - 1; ++d) {
            s.d[d] = rng_int(r, 1, 5);
            if (outer * s.d[d] > 12)
                s.d[d] = 1;
            outer *= s.d[d];
        }
        if (outer == 1)
            s.d[0] = rng_int(r, 2, 6);
        s.d[s.nd - 1] = row_lo[pick] + rng_int(r, 0, row_span[pick]);
    }
    return s;
}

static void describe_step(char *buf, size_t size, const view_step *st)
{
    char s[160];
    switch (st->kind) {
    case VIEW_SLICE:
        snprintf(buf, size, "slice(axis %d, start %lld, length %lld)", st->axis0, (long long)st->start,
                 (long long)st->length);
        break;
    case VIEW_TRANSPOSE:
        snprintf(buf, size, "transpose(%d, %d)", st->axis0, st->axis1);
        break;
    case VIEW_RESHAPE:
        format_dims(s, sizeof s, &st->to);
        snprintf(buf, size, "reshape(%s)", s);
        break;
    }
}

static const char *const fill_names[] = {"iid", "constant", "runs"};

static void describe_case(rcase *c)
{
    char *p = c->desc;
    size_t left = sizeof c->desc;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        int n_ = snprintf(p, left, __VA_ARGS__);                                                   \
        if (n_ > 0 && (size_t)n_ < left) {                                                         \
            p += n_;                                                                               \
            left -= (size_t)n_;                                                                    \
        }                                                                                          \
    } while (0)
    char s[160];
    format_dims(s, sizeof s, &c->out);
    APPEND("case %d of '%s' (seed %llu; DC_RANDOM_CASE=%d runs it alone): %s, %s, %d thread%s, output %s\n",
           c->number, category_names[c->cat], (unsigned long long)c->seed, c->number, fns[c->fn].name,
           dc_dtype_name(c->dtype), c->threads, c->threads > 1 ? "s" : "", s);
    for (int i = 0; i < c->n_operands; ++i) {
        const operand *o = &c->op[i];
        format_dims(s, sizeof s, &o->shape);
        APPEND("  %s %s", o->name, s);
        if (o->alias_of >= 0) {
            APPEND(": the same tensor as %s\n", c->op[o->alias_of].name);
            continue;
        }
        format_dims(s, sizeof s, &o->leaf_shape);
        if (o->leaf_of >= 0)
            APPEND(" = view of %s's leaf %s", c->op[o->leaf_of].name, s);
        else
            APPEND(" = view of leaf %s", s);
        for (int k = 0; k < o->n_steps; ++k) {
            char st[200];
            describe_step(st, sizeof st, &o->steps[k]);
            APPEND(" -> %s", st);
        }
        if (o->leaf_of < 0) {
            APPEND(", values %s", fill_names[o->fill]);
            if (o->fill == FILL_RUNS)
                APPEND(" of %lld", (long long)o->run);
            if (o->differentiable)
                APPEND("%s", o->requires_grad ? ", requires grad" : ", no grad");
        }
        APPEND("\n");
    }
    if (c->head == HEAD_WSUM)
        APPEND("  head: %s of every output", head_names[c->head]);
    else
        APPEND("  head: %s of output %d", head_names[c->head], c->head_out);
    if (c->head == HEAD_REDUCE) {
        APPEND(" (%s over", c->mean ? "mean" : "sum");
        if (c->n_axes == 0)
            APPEND(" every axis");
        for (int i = 0; i < c->n_axes; ++i)
            APPEND(" %d", c->axes[i]);
        format_dims(s, sizeof s, &c->red_shape);
        APPEND(", keepdims %s, shape %s)", c->keepdims ? "on" : "off", s);
    }
#undef APPEND
}

static void generate_case(rcase *c, category cat, int number)
{
    memset(c, 0, sizeof *c);
    c->cat = cat;
    c->number = number;
    c->seed = 0x5EED0000ull + (uint64_t)cat * 100003ull + (uint64_t)number;
    rng r = {c->seed};
    c->fn = (fn_kind)rng_int(&r, 0, FN_COUNT - 1);
    if (cat == CAT_LONG_ROWS && rng_chance(&r, 0.5))
        c->fn = (fn_kind)rng_int(&r, FN_CUPDATE, FN_COUNT - 1); /* the user functions */
    c->dtype = rng_chance(&r, 0.5) ? DC_F32 : DC_F64;
    c->threads = rng_chance(&r, cat == CAT_SMALL ? 0.5 : 0.75) ? 2 : 1;
    const fn_info *f = &fns[c->fn];
    bool wants_row_input;
    const dims target = output_shape_for(&r, cat, &wants_row_input);

    /* the function's inputs: shapes */
    for (int i = 0; i < f->n_in; ++i) {
        operand *o = &c->op[i];
        snprintf(o->name, sizeof o->name, "%s", f->in_names[i]);
        o->dom = f->in_domain[i];
        o->differentiable = f->differentiable[i];
        o->leaf_of = o->alias_of = -1;
        if (c->fn == FN_NONE)
            o->shape = target;
        else if (c->fn == FN_CUPDATE && !o->differentiable && target.nd > 0 &&
                 rng_chance(&r, cat == CAT_LONG_ROWS ? 0.6 : 0.4)) {
            /* control per row: constant along the last axis */
            o->shape = target;
            o->shape.d[o->shape.nd - 1] = 1;
        } else
            o->shape = pattern_of(&r, &target, cat == CAT_SMALL ? 0.3 : 0.2);
    }
    int row_input = -1;
    if (wants_row_input && c->fn != FN_NONE) {
        /* one differentiable input is a row broadcast over the rows before it */
        int i;
        do
            i = (int)rng_int(&r, 0, f->n_in - 1);
        while (!f->differentiable[i]);
        dims row = {1, {target.d[target.nd - 1]}};
        if (rng_chance(&r, 0.5)) {
            row.nd = (int)rng_int(&r, 2, target.nd);
            for (int d = 0; d < row.nd - 1; ++d)
                row.d[d] = 1;
            row.d[row.nd - 1] = target.d[target.nd - 1];
        }
        c->op[i].shape = row;
        row_input = i;
    }
    /* now and then a differentiable input reads the leaf of an earlier one
     * through other slices, or is the very same tensor */
    for (int i = 1; i < f->n_in; ++i) {
        operand *o = &c->op[i];
        if (!o->differentiable || i == row_input || !rng_chance(&r, cat == CAT_SMALL ? 0.12 : 0.25))
            continue;
        for (int j = 0; j < i; ++j) {
            operand *base = &c->op[j];
            if (base->differentiable && base->dom == o->dom && base->leaf_of < 0 && base->alias_of < 0) {
                if (rng_chance(&r, 0.25)) {
                    o->alias_of = j;
                } else {
                    o->leaf_of = j;
                    base->wide = base->wide || rng_chance(&r, 0.5);
                }
                o->shape = base->shape;
                break;
            }
        }
    }
    dims in_shapes[MAX_INPUTS];
    for (int i = 0; i < f->n_in; ++i)
        in_shapes[i] = c->op[i].shape;
    c->out = broadcast_all(f->n_in, in_shapes);

    /* views and values */
    for (int i = 0; i < f->n_in; ++i) {
        operand *o = &c->op[i];
        if (o->alias_of >= 0)
            continue;
        if (o->leaf_of >= 0) {
            /* the same steps with other slice starts */
            const operand *base = &c->op[o->leaf_of];
            o->n_steps = base->n_steps;
            memcpy(o->steps, base->steps, sizeof o->steps);
            for (int s = 0; s < o->n_steps; ++s) {
                view_step *st = &o->steps[s];
                if (st->kind != VIEW_SLICE)
                    continue;
                /* beside the base's slice, or overlapping it */
                const int64_t other = st->start == 0 ? st->pad : 0;
                st->start = base->wide && s == o->n_steps - 1 && rng_chance(&r, 0.5) ? other : rng_int(&r, 0, st->pad);
            }
            o->leaf_shape = base->leaf_shape;
            continue;
        }
        if (i == row_input && !o->wide && rng_chance(&r, 0.5)) {
            /* a row cut from a wider leaf: stride 1, but not dense */
            o->n_steps = 1;
            view_step *st = &o->steps[0];
            st->kind = VIEW_SLICE;
            st->axis0 = o->shape.nd - 1;
            st->pad = rng_int(&r, 1, 3);
            st->start = rng_int(&r, 0, st->pad);
            st->length = o->shape.d[o->shape.nd - 1];
            st->to = o->shape;
            o->leaf_shape = o->shape;
            o->leaf_shape.d[o->shape.nd - 1] += st->pad;
        } else {
            make_chain(&r, o, rng_chance(&r, 0.4) ? 0 : (int)rng_int(&r, 1, MAX_STEPS), o->wide);
        }
        o->fill = FILL_IID;
        if (is_control_domain(o->dom)) {
            const int mode = (int)rng_int(&r, 0, 3);
            o->fill = mode == 0 ? FILL_CONSTANT : mode == 1 ? FILL_RUNS : FILL_IID;
            static const int64_t runs[3] = {3, 700, 2500};
            o->run = runs[rng_int(&r, 0, 2)];
        }
        o->requires_grad = o->differentiable && rng_chance(&r, 0.9);
    }
    bool any_grad = false;
    for (int i = 0; i < f->n_in; ++i)
        any_grad = any_grad || c->op[i].requires_grad;
    if (!any_grad)
        for (int i = 0; i < f->n_in && !any_grad; ++i)
            if (c->op[i].differentiable && c->op[i].leaf_of < 0 && c->op[i].alias_of < 0)
                any_grad = c->op[i].requires_grad = true;

    /* the head */
    if (c->fn == FN_NONE && c->op[0].n_steps == 0)
        c->head = HEAD_REDUCE; /* the output is the leaf itself: reduce it to record a node */
    else {
        const double u = rng_unit(&r);
        if (f->n_out > 1)
            c->head = u < 0.5 ? HEAD_WSUM : u < 0.75 ? HEAD_SEED : HEAD_REDUCE;
        else
            c->head = u < 0.45 ? HEAD_SEED : u < 0.85 ? HEAD_REDUCE : HEAD_WSUM;
    }
    c->head_out = (int)rng_int(&r, 0, f->n_out - 1);
    dims seed_for = c->out;
    if (c->head == HEAD_REDUCE) {
        c->mean = rng_chance(&r, 0.5);
        c->keepdims = rng_chance(&r, 0.5);
        if (c->out.nd > 0 && !rng_chance(&r, 0.2)) {
            for (int d = 0; d < c->out.nd; ++d)
                if (rng_chance(&r, 0.5))
                    c->axes[c->n_axes++] = rng_chance(&r, 0.3) ? d - c->out.nd : d;
            if (c->n_axes == 0)
                c->axes[c->n_axes++] = (int)rng_int(&r, 0, c->out.nd - 1);
            /* in random order */
            for (int k = c->n_axes - 1; k > 0; --k) {
                const int j = (int)rng_int(&r, 0, k), t = c->axes[k];
                c->axes[k] = c->axes[j];
                c->axes[j] = t;
            }
        }
        for (int d = 0; d < c->out.nd; ++d)
            c->reduced[d] = c->n_axes == 0;
        for (int k = 0; k < c->n_axes; ++k)
            c->reduced[c->axes[k] < 0 ? c->axes[k] + c->out.nd : c->axes[k]] = true;
        c->red_shape.nd = 0;
        for (int d = 0; d < c->out.nd; ++d)
            if (!c->reduced[d] || c->keepdims)
                c->red_shape.d[c->red_shape.nd++] = c->reduced[d] ? 1 : c->out.d[d];
        seed_for = c->red_shape;
    }
    const int n_seeds = c->head == HEAD_WSUM ? f->n_out : 1;
    c->n_operands = f->n_in + n_seeds;
    for (int k = 0; k < n_seeds; ++k) {
        operand *o = &c->op[f->n_in + k];
        snprintf(o->name, sizeof o->name, "adjoint%d", c->head == HEAD_WSUM ? k : c->head_out);
        o->dom = DOM_SEED;
        o->leaf_of = o->alias_of = -1;
        o->shape = pattern_of(&r, &seed_for, 0.3);
        make_chain(&r, o, rng_chance(&r, 0.6) ? 0 : (int)rng_int(&r, 1, 2), false);
        o->fill = FILL_IID;
    }
    describe_case(c);
}

/* ---- the reference ---- */

static double *zeros(int64_t n)
{
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    assert_non_null(v);
    return v;
}

/* Reference sums: compensated (Neumaier), so that the reference is exact
 * to a few units of double precision however many terms it adds, with the
 * sum of the terms' magnitudes and their count. */
typedef struct sums {
    int64_t n;
    double *value, *comp, *mag;
    int64_t *terms;
} sums;

static sums sums_new(int64_t n)
{
    sums a = {n, zeros(n), zeros(n), zeros(n), calloc((size_t)(n ? n : 1), sizeof(int64_t))};
    assert_non_null(a.terms);
    return a;
}

static void sums_add(sums *a, int64_t i, double x, double mag)
{
    const double t = a->value[i] + x;
    a->comp[i] += fabs(a->value[i]) >= fabs(x) ? (a->value[i] - t) + x : (x - t) + a->value[i];
    a->value[i] = t;
    a->mag[i] += mag;
    a->terms[i]++;
}

/* Folds the compensation into the values. */
static void sums_finish(sums *a)
{
    for (int64_t i = 0; i < a->n; ++i) {
        a->value[i] += a->comp[i];
        a->comp[i] = 0.0;
    }
}

static void sums_free(sums *a)
{
    free(a->value);
    free(a->comp);
    free(a->mag);
    free(a->terms);
    memset(a, 0, sizeof *a);
}

typedef struct reference {
    int64_t n; /* output elements */
    double *out[MAX_OUTPUTS], *out_mag[MAX_OUTPUTS];
    sums red;                /* the reduction (HEAD_REDUCE) */
    sums loss;               /* HEAD_WSUM */
    sums grad[MAX_OPERANDS]; /* per leaf, at the operand that owns it */
} reference;

static const operand *leaf_owner(const rcase *c, const operand *o)
{
    if (o->alias_of >= 0)
        o = &c->op[o->alias_of];
    return o->leaf_of >= 0 ? &c->op[o->leaf_of] : o;
}

static void compute_reference(const rcase *c, reference *ref)
{
    const fn_info *f = &fns[c->fn];
    const dims *out = &c->out;
    const int nd = out->nd;
    const int64_t n = dims_numel(out);
    memset(ref, 0, sizeof *ref);
    ref->n = n;
    for (int k = 0; k < f->n_out; ++k) {
        ref->out[k] = zeros(n);
        ref->out_mag[k] = zeros(n);
    }
    int64_t bst[MAX_OPERANDS][DC_MAX_DIMS];
    for (int i = 0; i < c->n_operands; ++i)
        if (i < f->n_in || c->head != HEAD_REDUCE)
            broadcast_strides(&c->op[i].shape, out, bst[i]);
    /* the reduce head: where each output element lands in the reduction,
     * and where its adjoint comes from */
    int64_t red_st[DC_MAX_DIMS] = {0}, seed_st[DC_MAX_DIMS] = {0};
    double scale = 1.0;
    bool mean_of_nothing = false;
    if (c->head == HEAD_REDUCE) {
        ref->red = sums_new(dims_numel(&c->red_shape));
        int64_t count = 1;
        for (int d = 0; d < nd; ++d)
            if (c->reduced[d])
                count *= out->d[d];
        if (c->mean) {
            scale = count > 0 ? 1.0 / (double)count : NAN;
            mean_of_nothing = count == 0;
        }
        /* axis d of the output is axis rd of the reduction (keepdims keeps
         * every axis; else the reduced ones are gone) */
        int64_t rst[DC_MAX_DIMS], gst[DC_MAX_DIMS];
        contiguous_strides(&c->red_shape, rst);
        broadcast_strides(&c->op[f->n_in].shape, &c->red_shape, gst);
        for (int d = 0, rd = 0; d < nd; ++d) {
            if (!c->reduced[d]) {
                red_st[d] = rst[rd];
                seed_st[d] = gst[rd];
            }
            if (!c->reduced[d] || c->keepdims)
                ++rd;
        }
    }
    if (c->head == HEAD_WSUM)
        ref->loss = sums_new(1);

    sums view_grad[MAX_INPUTS];
    for (int j = 0; j < f->n_in; ++j)
        view_grad[j] = sums_new(dims_numel(&c->op[j].shape));
    int64_t idx[DC_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; ++e, next_index(out, idx)) {
        double x[MAX_INPUTS];
        int64_t src[MAX_INPUTS];
        for (int j = 0; j < f->n_in; ++j) {
            src[j] = dot_index(idx, bst[j], nd);
            x[j] = c->op[j].values[src[j]];
        }
        local l;
        eval_element(c->fn, x, &l);
        double adj[MAX_OUTPUTS] = {0};
        for (int k = 0; k < f->n_out; ++k) {
            ref->out[k][e] = l.out[k];
            ref->out_mag[k][e] = l.out_mag[k];
        }
        if (c->head == HEAD_SEED) {
            const operand *g = &c->op[f->n_in];
            adj[c->head_out] = g->values[dot_index(idx, bst[f->n_in], nd)];
        } else if (c->head == HEAD_REDUCE) {
            sums_add(&ref->red, dot_index(idx, red_st, nd), scale * l.out[c->head_out],
                     fabs(scale) * l.out_mag[c->head_out]);
            adj[c->head_out] = scale * c->op[f->n_in].values[dot_index(idx, seed_st, nd)];
        } else {
            for (int k = 0; k < f->n_out; ++k) {
                const double w = c->op[f->n_in + k].values[dot_index(idx, bst[f->n_in + k], nd)];
                adj[k] = w;
                sums_add(&ref->loss, 0, l.out[k] * w, l.out_mag[k] * fabs(w));
            }
        }
        for (int j = 0; j < f->n_in; ++j) {
            if (!f->differentiable[j])
                continue;
            double term = 0.0, mag = 0.0;
            for (int k = 0; k < f->n_out; ++k) {
                term += adj[k] * l.d[k][j];
                mag += fabs(adj[k]) * l.d_mag[k][j];
            }
            sums_add(&view_grad[j], src[j], term, mag);
        }
    }
    if (c->head == HEAD_REDUCE) {
        sums_finish(&ref->red);
        if (mean_of_nothing)
            for (int64_t i = 0; i < ref->red.n; ++i)
                ref->red.value[i] = NAN;
    }
    if (c->head == HEAD_WSUM)
        sums_finish(&ref->loss);
    /* from the operands back to their leaves */
    for (int j = 0; j < f->n_in; ++j) {
        sums_finish(&view_grad[j]);
        const operand *o = &c->op[j];
        const operand *owner = leaf_owner(c, o);
        sums *g = &ref->grad[owner - c->op];
        if (!g->value)
            *g = sums_new(dims_numel(&owner->leaf_shape));
        const operand *viewed = o->alias_of >= 0 ? &c->op[o->alias_of] : o;
        for (int64_t v = 0; v < view_grad[j].n; ++v) {
            const int64_t at = viewed->map[v];
            sums_add(g, at, view_grad[j].value[v], view_grad[j].mag[v]);
            g->terms[at] += view_grad[j].terms[v] - 1;
        }
        sums_free(&view_grad[j]);
    }
    for (int i = 0; i < MAX_OPERANDS; ++i)
        if (ref->grad[i].value)
            sums_finish(&ref->grad[i]);
}

static void free_reference(reference *ref)
{
    for (int k = 0; k < MAX_OUTPUTS; ++k) {
        free(ref->out[k]);
        free(ref->out_mag[k]);
    }
    sums_free(&ref->red);
    sums_free(&ref->loss);
    for (int i = 0; i < MAX_OPERANDS; ++i)
        sums_free(&ref->grad[i]);
}

/* ---- running a case ---- */

/* Counts of what the cases covered, printed at the end of each test. */
typedef struct coverage {
    int cases, by_fn[FN_COUNT], by_head[3], f32, threads2, rank[DC_MAX_DIMS + 1], zero_size, over_chunk,
        long_rows, views, shared_leaves, aliases, policy_runs[2], big_row_sums;
} coverage;

static double rtol_of(dc_dtype dtype) { return dtype == DC_F32 ? 1e-5 : 1e-12; }

/* got within factor * mag * tolerance of factor * want, element by element
 * (a NaN reference wants a NaN). The tolerance is rtol, plus a unit of
 * double precision per term of a sum (terms may be NULL: no sums), which the
 * engine's double accumulation may lose on sums of terms of one sign. */
static void compare(const rcase *c, const char *policy, const char *what, const double *got, const double *want,
                    const double *mag, const int64_t *terms, int64_t n, double factor)
{
    const double rtol = rtol_of(c->dtype);
    for (int64_t i = 0; i < n; ++i) {
        const double slack = terms ? (double)terms[i] * 0x1.0p-53 : 0.0;
        const double w = factor * want[i], tol = (rtol + slack) * factor * mag[i];
        const bool ok = isnan(w) ? isnan(got[i]) : fabs(got[i] - w) <= tol;
        if (!ok)
            fail_msg("%s\n  policy %s: %s, element %lld of %lld: got %.17g, want %.17g (difference %.3g, "
                     "tolerance %.3g)",
                     c->desc, policy, what, (long long)i, (long long)n, got[i], w, fabs(got[i] - w), tol);
    }
}

static void check_shape(const rcase *c, const dc_tensor *t, const dims *want, const char *what)
{
    if (!dims_equal(want, dc_tensor_ndim(t), dc_tensor_shape(t))) {
        char a[160], b[160];
        dc_tensor_shape_str(t, a, sizeof a);
        format_dims(b, sizeof b, want);
        fail_msg("%s\n  %s has shape %s, want %s", c->desc, what, a, b);
    }
}


static void make_leaves(rcase *c, dc_ctx *ctx)
{
    rng r = {c->seed ^ 0xA5A5A5A5ull};
    for (int i = 0; i < c->n_operands; ++i) {
        operand *o = &c->op[i];
        if (o->alias_of >= 0 || o->leaf_of >= 0)
            continue;
        const int64_t n = dims_numel(&o->leaf_shape);
        o->leaf_values = zeros(n);
        const double constant = domain_value(&r, o->dom);
        double run_values[2] = {domain_value(&r, o->dom), domain_value(&r, o->dom)};
        if (o->fill == FILL_RUNS && run_values[0] == run_values[1])
            run_values[1] = o->dom == DOM_FLAG ? 1.0 - run_values[0] : run_values[0] == 0.0 ? 1.0 : 0.0;
        for (int64_t e = 0; e < n; ++e) {
            double v = o->fill == FILL_CONSTANT ? constant
                       : o->fill == FILL_RUNS  ? run_values[(e / o->run) % 2]
                                               : domain_value(&r, o->dom);
            o->leaf_values[e] = c->dtype == DC_F32 ? (double)(float)v : v;
        }
        if (c->dtype == DC_F32) {
            float *host = malloc((size_t)(n ? n : 1) * sizeof *host);
            assert_non_null(host);
            for (int64_t e = 0; e < n; ++e)
                host[e] = (float)o->leaf_values[e];
            o->leaf = dc_tensor_from_host(ctx, c->dtype, o->leaf_shape.nd, o->leaf_shape.d, host);
            free(host);
        } else {
            o->leaf = dc_tensor_from_host(ctx, c->dtype, o->leaf_shape.nd, o->leaf_shape.d, o->leaf_values);
        }
        TEST_NONNULL(ctx, o->leaf);
        if (o->requires_grad)
            TEST_OK(ctx, dc_tensor_set_requires_grad(o->leaf, true));
    }
    for (int i = 0; i < c->n_operands; ++i) {
        operand *o = &c->op[i];
        if (o->alias_of >= 0)
            continue;
        const operand *owner = leaf_owner(c, o);
        o->map = build_map(o);
        const int64_t m = dims_numel(&o->shape);
        o->values = zeros(m);
        for (int64_t v = 0; v < m; ++v)
            o->values[v] = owner->leaf_values[o->map[v]];
    }
    for (int i = 0; i < c->n_operands; ++i) {
        operand *o = &c->op[i];
        if (o->alias_of >= 0) {
            o->map = NULL;
            o->values = c->op[o->alias_of].values;
        }
    }
}

static void free_leaves(rcase *c)
{
    for (int i = 0; i < c->n_operands; ++i) {
        operand *o = &c->op[i];
        dc_tensor_free(o->leaf);
        free(o->leaf_values);
        free(o->map);
        if (o->alias_of < 0)
            free(o->values);
        o->leaf = NULL;
        o->leaf_values = o->values = NULL;
        o->map = NULL;
    }
}

/* The operands as tensors on this tape: their leaves through their views. */
static void operand_tensors(const rcase *c, dc_ctx *ctx, dc_tape *tape, dc_tensor **t)
{
    for (int i = 0; i < c->n_operands; ++i) {
        const operand *o = &c->op[i];
        if (o->alias_of >= 0) {
            t[i] = t[o->alias_of];
            continue;
        }
        t[i] = apply_steps(tape, leaf_owner(c, o)->leaf, o);
        if (!t[i])
            fail_msg("%s\n  building the view of %s: %s", c->desc, o->name, dc_last_error(ctx));
        check_shape(c, t[i], &o->shape, o->name);
    }
}

/* The function's outputs on this tape. */
static void run_function(const rcase *c, dc_ctx *ctx, dc_tape *tape, dc_tensor *const *in,
                         dc_partials_policy policy, dc_tensor **out)
{
    const fn_info *f = &fns[c->fn];
    switch (c->fn) {
    case FN_ADD:
        out[0] = dc_op_add(tape, in[0], in[1]);
        break;
    case FN_SUB:
        out[0] = dc_op_sub(tape, in[0], in[1]);
        break;
    case FN_MUL:
        out[0] = dc_op_mul(tape, in[0], in[1]);
        break;
    case FN_DIV:
        out[0] = dc_op_div(tape, in[0], in[1]);
        break;
    case FN_SELECT:
        out[0] = dc_op_select(tape, in[0], in[1], in[2]);
        break;
    case FN_NONE:
        out[0] = in[0];
        break;
    default: {
        const dc_status st = dc_broadcast_policy(tape, user_fn(c->fn), f->n_in, in, f->n_out, out, policy);
        if (st != DC_OK)
            fail_msg("%s\n  dc_broadcast_policy: %s: %s", c->desc, dc_status_name(st), dc_last_error(ctx));
    }
    }
    for (int k = 0; k < f->n_out; ++k) {
        if (!out[k])
            fail_msg("%s\n  %s returned NULL: %s", c->desc, f->name, dc_last_error(ctx));
        char what[32];
        snprintf(what, sizeof what, "output %d", k);
        check_shape(c, out[k], &c->out, what);
    }
}

static void check_outputs(const rcase *c, const reference *ref, dc_tensor *const *out, const char *policy)
{
    for (int k = 0; k < fns[c->fn].n_out; ++k) {
        double *got = test_values(out[k]);
        char what[32];
        snprintf(what, sizeof what, "output %d", k);
        compare(c, policy, what, got, ref->out[k], ref->out_mag[k], NULL, ref->n, 1.0);
        free(got);
    }
}

static void check_gradients(const rcase *c, const reference *ref, const char *policy, int pass)
{
    for (int i = 0; i < fns[c->fn].n_in; ++i) {
        const operand *o = &c->op[i];
        if (o->alias_of >= 0 || o->leaf_of >= 0)
            continue;
        const dc_tensor *g = dc_tensor_grad(o->leaf);
        char what[96];
        snprintf(what, sizeof what, "gradient of %s's leaf after backward pass %d", o->name, pass);
        if (!o->requires_grad) {
            if (g)
                fail_msg("%s\n  policy %s: %s: the leaf needs no gradient but has one", c->desc, policy, what);
            continue;
        }
        if (!g)
            fail_msg("%s\n  policy %s: %s is missing", c->desc, policy, what);
        check_shape(c, g, &o->leaf_shape, what);
        double *got = test_values(g);
        const sums *want = &ref->grad[i];
        compare(c, policy, what, got, want->value, want->mag, want->terms, want->n, (double)pass);
        free(got);
    }
}

/* One recorded forward pass, the head and the backward pass. */
static void run_pass(const rcase *c, dc_ctx *ctx, dc_tape *tape, const reference *ref, dc_partials_policy policy,
                     int pass)
{
    const fn_info *f = &fns[c->fn];
    const char *policy_name = f->user_fn ? (policy == DC_PARTIALS_STORE ? "store" : "recompute") : "-";
    dc_tensor *t[MAX_OPERANDS], *out[MAX_OUTPUTS] = {NULL};
    operand_tensors(c, ctx, tape, t);
    run_function(c, ctx, tape, t, policy, out);
    if (pass == 1)
        check_outputs(c, ref, out, policy_name);
    dc_status st;
    if (c->head == HEAD_SEED) {
        st = dc_backward_with(tape, out[c->head_out], t[f->n_in]);
    } else if (c->head == HEAD_REDUCE) {
        dc_tensor *y = c->mean ? dc_op_mean(tape, out[c->head_out], c->n_axes, c->axes, c->keepdims)
                               : dc_op_sum(tape, out[c->head_out], c->n_axes, c->axes, c->keepdims);
        if (!y)
            fail_msg("%s\n  the reduction returned NULL: %s", c->desc, dc_last_error(ctx));
        check_shape(c, y, &c->red_shape, "the reduction");
        if (pass == 1) {
            double *got = test_values(y);
            compare(c, policy_name, "the reduction", got, ref->red.value, ref->red.mag, ref->red.terms, ref->red.n,
                    1.0);
            free(got);
        }
        st = dc_backward_with(tape, y, t[f->n_in]);
    } else {
        dc_tensor *acc = NULL;
        for (int k = 0; k < f->n_out; ++k) {
            dc_tensor *term = dc_op_mul(tape, out[k], t[f->n_in + k]);
            acc = acc ? dc_op_add(tape, acc, term) : term;
        }
        dc_tensor *loss = dc_op_sum(tape, acc, 0, NULL, false);
        if (!loss)
            fail_msg("%s\n  the weighted sum returned NULL: %s", c->desc, dc_last_error(ctx));
        if (pass == 1) {
            double got;
            TEST_OK(ctx, dc_tensor_item(loss, &got));
            compare(c, policy_name, "the weighted sum", &got, ref->loss.value, ref->loss.mag, ref->loss.terms, 1, 1.0);
        }
        st = dc_backward(tape, loss);
    }
    if (st != DC_OK)
        fail_msg("%s\n  policy %s: backward pass %d: %s: %s", c->desc, policy_name, pass, dc_status_name(st),
                 dc_last_error(ctx));
    check_gradients(c, ref, policy_name, pass);
}

/* The function once more with recording off: the primal kernels. */
static void run_no_grad(const rcase *c, dc_ctx *ctx, const reference *ref)
{
    dc_tape *tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, tape);
    dc_tape_set_recording(tape, false);
    dc_tensor *t[MAX_OPERANDS], *out[MAX_OUTPUTS] = {NULL};
    operand_tensors(c, ctx, tape, t);
    run_function(c, ctx, tape, t, DC_PARTIALS_STORE, out);
    check_outputs(c, ref, out, "recording off");
    dc_tape_free(tape);
}

static void run_case(rcase *c, dc_ctx *const *ctxs, coverage *cov)
{
    dc_ctx *ctx = ctxs[c->threads - 1];
    make_leaves(c, ctx);
    reference ref;
    compute_reference(c, &ref);
    const fn_info *f = &fns[c->fn];
    const int n_policies = f->user_fn ? 2 : 1;
    for (int p = 0; p < n_policies; ++p) {
        for (int i = 0; i < c->n_operands; ++i)
            if (c->op[i].leaf)
                dc_tensor_zero_grad(c->op[i].leaf);
        /* the second pass, on the same tape reset, adds to the gradients of
         * the first */
        dc_tape *tape = dc_tape_new(ctx);
        TEST_NONNULL(ctx, tape);
        for (int pass = 1; pass <= 2; ++pass) {
            if (pass > 1)
                dc_tape_reset(tape);
            run_pass(c, ctx, tape, &ref, (dc_partials_policy)p, pass);
        }
        dc_tape_free(tape);
        cov->policy_runs[p] += f->user_fn;
    }
    run_no_grad(c, ctx, &ref);
    free_reference(&ref);
    free_leaves(c);

    cov->cases++;
    cov->by_fn[c->fn]++;
    cov->by_head[c->head]++;
    cov->f32 += c->dtype == DC_F32;
    cov->threads2 += c->threads == 2;
    cov->rank[c->out.nd]++;
    const int64_t n = dims_numel(&c->out);
    cov->zero_size += n == 0;
    cov->over_chunk += n > 2048;
    cov->long_rows += c->out.nd > 0 && c->out.d[c->out.nd - 1] >= 512;
    bool views = false, shared = false, alias = false;
    for (int i = 0; i < c->n_operands; ++i) {
        views = views || c->op[i].n_steps > 0;
        shared = shared || c->op[i].leaf_of >= 0;
        alias = alias || c->op[i].alias_of >= 0;
    }
    cov->views += views;
    bool big_sum = false; /* a gradient summed over rows, of more than 16,384 elements, on 2 threads */
    for (int i = 0; i < fns[c->fn].n_in; ++i) {
        const int64_t m = dims_numel(&c->op[i].shape);
        big_sum = big_sum || (c->op[i].differentiable && m > 16384 && m < n && c->threads == 2);
    }
    cov->big_row_sums += big_sum;
    cov->shared_leaves += shared;
    cov->aliases += alias;
}

static void print_coverage(const char *name, const coverage *cov)
{
    print_message("%s: %d cases: add %d, sub %d, mul %d, div %d, select %d, reduce only %d, c-update %d, "
                  "polar_pair %d, gated_scale %d, prod_sign_3 %d; heads: seed %d, reduce %d, weighted sum %d; "
                  "float32 %d; 2 threads %d; zero-size %d; over 2048 elements %d; rows >= 512 %d; with views %d, "
                  "shared leaves %d, a tensor passed twice %d; gradients of over 16384 elements summed on 2 "
                  "threads %d; user-function runs: store %d, recompute %d; ranks 0-8:",
                  name, cov->cases, cov->by_fn[FN_ADD], cov->by_fn[FN_SUB], cov->by_fn[FN_MUL], cov->by_fn[FN_DIV],
                  cov->by_fn[FN_SELECT], cov->by_fn[FN_NONE], cov->by_fn[FN_CUPDATE], cov->by_fn[FN_POLAR],
                  cov->by_fn[FN_GATED], cov->by_fn[FN_PROD_SIGN3], cov->by_head[HEAD_SEED],
                  cov->by_head[HEAD_REDUCE], cov->by_head[HEAD_WSUM], cov->f32, cov->threads2, cov->zero_size,
                  cov->over_chunk, cov->long_rows, cov->views, cov->shared_leaves, cov->aliases, cov->big_row_sums,
                  cov->policy_runs[0], cov->policy_runs[1]);
    for (int r = 0; r <= DC_MAX_DIMS; ++r)
        print_message(" %d", cov->rank[r]);
    print_message("\n");
}

/* Fails when a group of cases no longer reaches what it is there for, so
 * that a change to the generator cannot drop coverage unnoticed. */
static void require_coverage(category cat, const char *name, const coverage *cov)
{
    const char *missing = NULL;
    for (int f = 0; f < FN_COUNT && !missing; ++f)
        if (cov->by_fn[f] == 0)
            missing = "a function or op";
    if (!missing && (cov->policy_runs[0] == 0 || cov->policy_runs[1] == 0))
        missing = "a partials policy";
    if (!missing && (cov->f32 == 0 || cov->f32 == cov->cases))
        missing = "a dtype";
    if (!missing && (cov->threads2 == 0 || cov->threads2 == cov->cases))
        missing = "a thread count";
    if (!missing && (cov->views == 0 || cov->shared_leaves == 0 || cov->aliases == 0))
        missing = "views, shared leaves or a tensor passed twice";
    for (int h = 0; h < 3 && !missing; ++h)
        if (cov->by_head[h] == 0)
            missing = "a way of seeding the backward pass";
    if (cat == CAT_SMALL) {
        for (int r = 0; r <= DC_MAX_DIMS && !missing; ++r)
            if (cov->rank[r] == 0)
                missing = "an output rank from 0 to 8";
        if (!missing && cov->zero_size == 0)
            missing = "a zero-size dimension";
    } else if (cat == CAT_CHUNKS) {
        if (cov->over_chunk < cov->cases * 3 / 4)
            missing = "three quarters of the cases over 2048 elements";
        else if (cov->big_row_sums == 0)
            missing = "a gradient of over 16384 elements summed on 2 threads";
    } else if (cov->long_rows < cov->cases) {
        missing = "rows of 512 or more in every case";
    }
    if (missing)
        fail_msg("%s: the %d cases no longer cover %s", name, cov->cases, missing);
}

static void run_category(category cat, int n_cases, const char *name)
{
    dc_ctx *ctxs[2] = {test_cpu_ctx_threads(1, 1), test_cpu_ctx_threads(2, 1)};
    coverage cov;
    memset(&cov, 0, sizeof cov);
    rcase *c = malloc(sizeof *c);
    assert_non_null(c);
    /* DC_RANDOM_CASE=n runs case n of each test alone: each case comes from
     * its own seed, whatever ran before it. */
    const char *only = getenv("DC_RANDOM_CASE");
    for (int i = 0; i < n_cases; ++i) {
        if (only && *only && atoi(only) != i)
            continue;
        generate_case(c, cat, i);
        run_case(c, ctxs, &cov);
    }
    free(c);
    print_coverage(name, &cov);
    if (!(only && *only))
        require_coverage(cat, name, &cov);
    dc_ctx_free(ctxs[0]);
    dc_ctx_free(ctxs[1]);
}

/* Ranks 0 to 8, up to 3,000 elements, zero-size dimensions now and then. */
static void test_random_small_shapes(void **state)
{
    (void)state;
    run_category(CAT_SMALL, 600, "small shapes");
}

/* More than 2,048 elements: several chunks, split over threads. */
static void test_random_several_chunks(void **state)
{
    (void)state;
    run_category(CAT_CHUNKS, 100, "several chunks");
}

/* Rows of 512 to 2,047 and of 2,048 or more, with a row-broadcast input. */
static void test_random_long_rows(void **state)
{
    (void)state;
    run_category(CAT_LONG_ROWS, 100, "long rows");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_small_shapes),
        cmocka_unit_test(test_random_several_chunks),
        cmocka_unit_test(test_random_long_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
