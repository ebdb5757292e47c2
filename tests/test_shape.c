/* Broadcast shape rules and unbroadcast: dc_broadcast_shape on its own (valid
 * shapes, and the operands and axis it blames when shapes conflict), the
 * messages the public ops give for shapes and dtypes that do not go together,
 * gradients summed over broadcast axes for every broadcast pattern (against
 * sums computed here in double), strided (transposed) inputs, and which
 * outputs of a loop share elements (the engine splits a loop over threads
 * only when its outputs share none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

#include "src/engine/loop.h"
#include "src/engine/shape.h"

DC_BFN_DECLARE(gated_scale);

/* ---- shapes as values ---- */

typedef struct shp {
    int nd;
    int64_t d[DC_MAX_DIMS];
} shp;

#define SC {0, {0}}
#define S1(a) {1, {a}}
#define S2(a, b) {2, {a, b}}
#define S3(a, b, c) {3, {a, b, c}}
#define S5(a, b, c, d, e) {5, {a, b, c, d, e}}
#define S8(a, b, c, d, e, f, g, h) {8, {a, b, c, d, e, f, g, h}}

static const char *shp_str(const shp *s, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < s->nd && at < size; ++d)
        at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)s->d[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

static int64_t shp_numel(const shp *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->nd; ++d)
        n *= s->d[d];
    return n;
}

/* The broadcast of shapes that are known to broadcast, computed here. */
static shp expected_broadcast(int n, const shp *in)
{
    shp out = {0, {0}};
    for (int i = 0; i < n; ++i)
        out.nd = in[i].nd > out.nd ? in[i].nd : out.nd;
    for (int a = 1; a <= out.nd; ++a) {
        int64_t size = 1;
        for (int i = 0; i < n; ++i)
            if (in[i].nd >= a && in[i].d[in[i].nd - a] != 1)
                size = in[i].d[in[i].nd - a];
        out.d[out.nd - a] = size;
    }
    return out;
}

/* The flat index into t (broadcast to `out`) of the element of `out` at flat
 * index e. */
static int64_t src_index(const shp *out, int64_t e, const shp *t)
{
    int64_t idx = 0, mul = 1;
    for (int d = out->nd - 1; d >= 0; --d) {
        const int64_t c = e % out->d[d];
        e /= out->d[d];
        const int td = d - (out->nd - t->nd);
        if (td < 0)
            break;
        if (t->d[td] != 1)
            idx += c * mul;
        mul *= t->d[td];
    }
    return idx;
}

static void assert_shape(const dc_tensor *t, const shp *want, const char *what)
{
    shp got = {dc_tensor_ndim(t), {0}};
    for (int d = 0; d < got.nd; ++d)
        got.d[d] = dc_tensor_shape(t)[d];
    bool same = got.nd == want->nd;
    for (int d = 0; same && d < got.nd; ++d)
        same = got.d[d] == want->d[d];
    if (!same) {
        char a[128], b[128];
        fail_msg("%s: shape %s, want %s", what, shp_str(&got, a, sizeof a), shp_str(want, b, sizeof b));
    }
}

/* A CPU context with 4 threads, whatever the machine has, so that the large
 * cases below run the engine's multi-threaded path (per-thread partial sums
 * combined at the end). */
static dc_ctx *threaded_ctx(void) { return test_cpu_ctx_threads(4, 7); }

/* ---- dc_broadcast_shape ---- */

typedef struct bshape_case {
    const char *name;
    int n;
    shp in[4];
    bool ok;
    shp out;                    /* when ok */
    int bad_i, bad_j, bad_axis; /* when not: -9 means "any conflicting pair/axis" */
} bshape_case;

#define ANY -9

static const bshape_case bshape_cases[] = {
    /* shapes that broadcast */
    {"scalar with scalar", 2, {SC, SC}, true, SC, 0, 0, 0},
    {"scalar with [2, 3]", 2, {SC, S2(2, 3)}, true, S2(2, 3), 0, 0, 0},
    {"[2, 3] with scalar", 2, {S2(2, 3), SC}, true, S2(2, 3), 0, 0, 0},
    {"single scalar", 1, {SC}, true, SC, 0, 0, 0},
    {"single [4, 1, 2]", 1, {S3(4, 1, 2)}, true, S3(4, 1, 2), 0, 0, 0},
    {"[1] with [5]", 2, {S1(1), S1(5)}, true, S1(5), 0, 0, 0},
    {"[5] with [1]", 2, {S1(5), S1(1)}, true, S1(5), 0, 0, 0},
    {"[4, 1] with [1, 5]", 2, {S2(4, 1), S2(1, 5)}, true, S2(4, 5), 0, 0, 0},
    {"[1, 1] with [1]", 2, {S2(1, 1), S1(1)}, true, S2(1, 1), 0, 0, 0},
    {"[3] with [2, 3] (missing leading axis)", 2, {S1(3), S2(2, 3)}, true, S2(2, 3), 0, 0, 0},
    {"[2, 1, 3] with [4, 1]", 2, {S3(2, 1, 3), S2(4, 1)}, true, S3(2, 4, 3), 0, 0, 0},
    {"[1, 7, 1] with [6, 1, 5]", 2, {S3(1, 7, 1), S3(6, 1, 5)}, true, S3(6, 7, 5), 0, 0, 0},
    {"[0] with [1]", 2, {S1(0), S1(1)}, true, S1(0), 0, 0, 0},
    {"[1] with [0]", 2, {S1(1), S1(0)}, true, S1(0), 0, 0, 0},
    {"[0] with [0]", 2, {S1(0), S1(0)}, true, S1(0), 0, 0, 0},
    {"scalar with [0]", 2, {SC, S1(0)}, true, S1(0), 0, 0, 0},
    {"[2, 0] with [1, 1]", 2, {S2(2, 0), S2(1, 1)}, true, S2(2, 0), 0, 0, 0},
    {"[0, 3] with [3]", 2, {S2(0, 3), S1(3)}, true, S2(0, 3), 0, 0, 0},
    {"[1, 0] with [4, 1]", 2, {S2(1, 0), S2(4, 1)}, true, S2(4, 0), 0, 0, 0},
    {"[2, 0, 3] with [1, 0, 1] with [3]", 3, {S3(2, 0, 3), S3(1, 0, 1), S1(3)}, true, S3(2, 0, 3), 0, 0, 0},
    {"rank 8 with rank 8", 2, {S8(2, 1, 3, 1, 2, 1, 2, 1), S8(1, 2, 1, 3, 1, 2, 1, 2)}, true,
     S8(2, 2, 3, 3, 2, 2, 2, 2), 0, 0, 0},
    {"rank 8 with scalar", 2, {S8(2, 1, 3, 1, 2, 1, 2, 1), SC}, true, S8(2, 1, 3, 1, 2, 1, 2, 1), 0, 0, 0},
    {"[5] with rank 8", 2, {S1(5), S8(2, 1, 3, 1, 2, 1, 2, 1)}, true, S8(2, 1, 3, 1, 2, 1, 2, 5), 0, 0, 0},
    {"three: [4, 1, 1] [1, 5, 1] [1, 1, 6]", 3, {S3(4, 1, 1), S3(1, 5, 1), S3(1, 1, 6)}, true, S3(4, 5, 6), 0, 0,
     0},
    {"four: scalar [3] [2, 1] [1, 1, 1]", 4, {SC, S1(3), S2(2, 1), S3(1, 1, 1)}, true, S3(1, 2, 3), 0, 0, 0},
    {"three: [0] scalar [1]", 3, {S1(0), SC, S1(1)}, true, S1(0), 0, 0, 0},

    /* shapes that do not */
    {"[3] vs [4]", 2, {S1(3), S1(4)}, false, SC, 0, 1, -1},
    {"[2, 3] vs [4]", 2, {S2(2, 3), S1(4)}, false, SC, 0, 1, -1},
    {"[4] vs [2, 3]", 2, {S1(4), S2(2, 3)}, false, SC, 0, 1, -1},
    {"[2, 3] vs [3, 3]", 2, {S2(2, 3), S2(3, 3)}, false, SC, 0, 1, -2},
    {"[5, 2, 3] vs [4, 1, 3]", 2, {S3(5, 2, 3), S3(4, 1, 3)}, false, SC, 0, 1, -3},
    {"[2, 3] vs [4, 5] (two axes conflict)", 2, {S2(2, 3), S2(4, 5)}, false, SC, 0, 1, ANY},
    {"[0] vs [3]", 2, {S1(0), S1(3)}, false, SC, 0, 1, -1},
    {"[3] vs [0]", 2, {S1(3), S1(0)}, false, SC, 0, 1, -1},
    {"[2, 0] vs [2, 3]", 2, {S2(2, 0), S2(2, 3)}, false, SC, 0, 1, -1},
    {"[0, 4] vs [2, 4]", 2, {S2(0, 4), S2(2, 4)}, false, SC, 0, 1, -2},
    {"[1] [3] [4]", 3, {S1(1), S1(3), S1(4)}, false, SC, 1, 2, -1},
    {"[3] [1] [4]", 3, {S1(3), S1(1), S1(4)}, false, SC, 0, 2, -1},
    {"[3] [3] [4]", 3, {S1(3), S1(3), S1(4)}, false, SC, ANY, 2, -1},
    {"[5, 1] [1, 6] [4, 1]", 3, {S2(5, 1), S2(1, 6), S2(4, 1)}, false, SC, 0, 2, -2},
    {"scalar [2, 3] [2, 4]", 3, {SC, S2(2, 3), S2(2, 4)}, false, SC, 1, 2, -1},
    {"[2, 3] scalar [1] [4, 1]", 4, {S2(2, 3), SC, S1(1), S2(4, 1)}, false, SC, 0, 3, -2},
    {"[1, 1, 7] [1] [1, 1] [2, 1, 5]", 4, {S3(1, 1, 7), S1(1), S2(1, 1), S3(2, 1, 5)}, false, SC, 0, 3, -1},
    {"[0] [1] [3]", 3, {S1(0), S1(1), S1(3)}, false, SC, 0, 2, -1},
    {"[1] [0] [0] [2]", 4, {S1(1), S1(0), S1(0), S1(2)}, false, SC, ANY, 3, -1},
    {"rank 8 vs rank 8 at the first axis", 2, {S8(2, 1, 3, 1, 2, 1, 2, 1), S8(3, 1, 1, 1, 1, 1, 1, 1)}, false,
     SC, 0, 1, -8},
    {"rank 8 vs rank 8 at the last axis", 2, {S8(2, 1, 3, 1, 2, 1, 2, 7), S8(1, 1, 1, 1, 1, 1, 1, 8)}, false, SC,
     0, 1, -1},
    {"rank 8 vs [6, 5]", 2, {S8(1, 1, 1, 1, 1, 1, 4, 5), S2(6, 5)}, false, SC, 0, 1, -2},
    {"[6, 5] vs rank 8", 2, {S2(6, 5), S8(1, 1, 1, 1, 1, 1, 4, 5)}, false, SC, 0, 1, -2},
};

/* Size of operand i at `axis` counted from the end, or 1 when it lacks it. */
static int64_t size_at(const shp *s, int axis) { return s->nd + axis >= 0 ? s->d[s->nd + axis] : 1; }

static void test_broadcast_shape_rules(void **state)
{
    (void)state;
    const int n_cases = (int)(sizeof bshape_cases / sizeof bshape_cases[0]);
    for (int c = 0; c < n_cases; ++c) {
        const bshape_case *k = &bshape_cases[c];
        int ndims[4];
        const int64_t *shapes[4];
        for (int i = 0; i < k->n; ++i) {
            ndims[i] = k->in[i].nd;
            shapes[i] = k->in[i].d;
        }
        int out_ndim = -1, bad_i = -99, bad_j = -99, bad_axis = -99;
        int64_t out_shape[DC_MAX_DIMS];
        for (int d = 0; d < DC_MAX_DIMS; ++d)
            out_shape[d] = -77;
        const bool ok = dc_broadcast_shape(k->n, ndims, shapes, &out_ndim, out_shape, &bad_i, &bad_j, &bad_axis);
        if (ok != k->ok)
            fail_msg("case %d (%s): dc_broadcast_shape returned %s, want %s (bad_i %d, bad_j %d, axis %d)", c,
                     k->name, ok ? "true" : "false", k->ok ? "true" : "false", bad_i, bad_j, bad_axis);
        if (ok) {
            shp got = {out_ndim, {0}};
            for (int d = 0; d < out_ndim && d < DC_MAX_DIMS; ++d)
                got.d[d] = out_shape[d];
            bool same = out_ndim == k->out.nd;
            for (int d = 0; same && d < out_ndim; ++d)
                same = out_shape[d] == k->out.d[d];
            char a[128], b[128];
            if (!same)
                fail_msg("case %d (%s): broadcast shape %s, want %s", c, k->name, shp_str(&got, a, sizeof a),
                         shp_str(&k->out, b, sizeof b));
            continue;
        }
        /* Whatever the convention, the blamed pair must really conflict at
         * the blamed axis. */
        if (bad_i < 0 || bad_i >= k->n || bad_j < 0 || bad_j >= k->n || bad_i == bad_j)
            fail_msg("case %d (%s): blamed operands %d and %d, not two distinct operands of %d", c, k->name, bad_i,
                     bad_j, k->n);
        if (bad_axis > -1 || bad_axis < -DC_MAX_DIMS)
            fail_msg("case %d (%s): blamed axis %d is not an axis counted from the end", c, k->name, bad_axis);
        const int64_t si = size_at(&k->in[bad_i], bad_axis), sj = size_at(&k->in[bad_j], bad_axis);
        if (si == 1 || sj == 1 || si == sj)
            fail_msg("case %d (%s): operands %d and %d have sizes %lld and %lld at axis %d: no conflict there", c,
                     k->name, bad_i, bad_j, (long long)si, (long long)sj, bad_axis);
        if ((k->bad_i != ANY && bad_i != k->bad_i) || (k->bad_j != ANY && bad_j != k->bad_j) ||
            (k->bad_axis != ANY && bad_axis != k->bad_axis))
            fail_msg("case %d (%s): blamed operands %d and %d at axis %d, want %d and %d at axis %d", c, k->name,
                     bad_i, bad_j, bad_axis, k->bad_i, k->bad_j, k->bad_axis);
    }
}

/* ---- errors through the public API ---- */

static void assert_mentions(dc_ctx *ctx, const char *what, const char *const *needles, int n)
{
    const char *msg = dc_last_error(ctx);
    for (int i = 0; i < n; ++i)
        if (!strstr(msg, needles[i]))
            fail_msg("%s: the message does not mention \"%s\": \"%s\"", what, needles[i], msg);
}

typedef dc_tensor *(*binary_fn)(dc_tape *, dc_tensor *, dc_tensor *);

typedef struct named_binary {
    const char *name;
    binary_fn fn;
} named_binary;

static const named_binary binary_ops[] = {
    {"dc_op_add", dc_op_add}, {"dc_op_sub", dc_op_sub}, {"dc_op_mul", dc_op_mul},
    {"dc_op_div", dc_op_div}, {"dc_op_pow", dc_op_pow},
};

typedef struct shape_error_case {
    shp a, b;
    const char *sa, *sb; /* as the message must write them */
} shape_error_case;

static const shape_error_case binary_shape_errors[] = {
    {S2(2, 3), S1(4), "[2, 3]", "[4]"},
    {S1(4), S2(2, 3), "[4]", "[2, 3]"},
    {S2(2, 3), S2(3, 3), "[2, 3]", "[3, 3]"},
    {S1(0), S1(3), "[0]", "[3]"},
    {S3(5, 1, 4), S2(3, 5), "[5, 1, 4]", "[3, 5]"},
    {S8(1, 1, 1, 1, 1, 1, 2, 3), S2(4, 3), "[1, 1, 1, 1, 1, 1, 2, 3]", "[4, 3]"},
};

static void test_op_shape_errors(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int n_ops = (int)(sizeof binary_ops / sizeof binary_ops[0]);
    const int n_shapes = (int)(sizeof binary_shape_errors / sizeof binary_shape_errors[0]);
    for (int o = 0; o < n_ops; ++o) {
        for (int s = 0; s < n_shapes; ++s) {
            const shape_error_case *k = &binary_shape_errors[s];
            dc_tensor *a = dc_tensor_new(ctx, DC_F64, k->a.nd, k->a.d);
            dc_tensor *b = dc_tensor_new(ctx, DC_F64, k->b.nd, k->b.d);
            TEST_NONNULL(ctx, a);
            TEST_NONNULL(ctx, b);
            dc_tensor_fill(a, 0.5);
            dc_tensor_fill(b, 0.5);
            dc_tensor_set_requires_grad(a, true);
            dc_clear_error(ctx);
            const size_t nodes = dc_tape_node_count(tape);
            char what[160];
            snprintf(what, sizeof what, "%s on %s and %s", binary_ops[o].name, k->sa, k->sb);
            dc_tensor *y = binary_ops[o].fn(tape, a, b);
            if (y)
                fail_msg("%s: returned a tensor instead of NULL", what);
            if (dc_tape_node_count(tape) != nodes)
                fail_msg("%s: a failing op recorded a node", what);
            const char *needles[] = {binary_ops[o].name, k->sa, k->sb};
            assert_mentions(ctx, what, needles, 3);
            /* A chain of ops keeps the cause. */
            dc_tensor *z = dc_op_exp(tape, dc_op_add(tape, y, a));
            if (z)
                fail_msg("%s: an op on its NULL result returned a tensor", what);
            snprintf(what, sizeof what, "dc_op_exp(dc_op_add(%s on %s and %s))", binary_ops[o].name, k->sa, k->sb);
            assert_mentions(ctx, what, needles, 3);
            dc_tensor_free(a);
            dc_tensor_free(b);
        }
    }

    /* select: the two operands that conflict are named, not cond. */
    {
        const shp sc = S1(1), sa = S2(2, 3), sb = S3(5, 1, 4);
        dc_tensor *c = dc_tensor_new(ctx, DC_F32, sc.nd, sc.d);
        dc_tensor *a = dc_tensor_new(ctx, DC_F32, sa.nd, sa.d);
        dc_tensor *b = dc_tensor_new(ctx, DC_F32, sb.nd, sb.d);
        dc_clear_error(ctx);
        if (dc_op_select(tape, c, a, b))
            fail_msg("dc_op_select on [1], [2, 3], [5, 1, 4]: returned a tensor");
        const char *needles[] = {"dc_op_select", "[2, 3]", "[5, 1, 4]"};
        assert_mentions(ctx, "dc_op_select on [1], [2, 3], [5, 1, 4]", needles, 3);
        dc_tensor_free(c);
        dc_tensor_free(a);
        dc_tensor_free(b);
    }
    /* select: cond conflicting with a. */
    {
        const shp sc = S2(4, 1), sa = S2(3, 5), sb = S1(5);
        dc_tensor *c = dc_tensor_new(ctx, DC_F32, sc.nd, sc.d);
        dc_tensor *a = dc_tensor_new(ctx, DC_F32, sa.nd, sa.d);
        dc_tensor *b = dc_tensor_new(ctx, DC_F32, sb.nd, sb.d);
        dc_clear_error(ctx);
        if (dc_op_select(tape, c, a, b))
            fail_msg("dc_op_select on [4, 1], [3, 5], [5]: returned a tensor");
        const char *needles[] = {"dc_op_select", "[4, 1]", "[3, 5]"};
        assert_mentions(ctx, "dc_op_select on [4, 1], [3, 5], [5]", needles, 3);
        dc_tensor_free(c);
        dc_tensor_free(a);
        dc_tensor_free(b);
    }

    /* matmul: inner sizes, batch axes, rank. */
    {
        static const struct {
            shp a, b;
            const char *sa, *sb;
        } mm[] = {
            {S2(2, 3), S2(4, 5), "[2, 3]", "[4, 5]"},
            {S3(2, 3, 4), S3(5, 4, 6), "[2, 3, 4]", "[5, 4, 6]"},
            {S1(3), S2(3, 2), "[3]", "[3, 2]"},
            {S2(2, 3), SC, "[2, 3]", "[]"},
        };
        for (size_t i = 0; i < sizeof mm / sizeof mm[0]; ++i) {
            dc_tensor *a = dc_tensor_new(ctx, DC_F64, mm[i].a.nd, mm[i].a.d);
            dc_tensor *b = dc_tensor_new(ctx, DC_F64, mm[i].b.nd, mm[i].b.d);
            dc_clear_error(ctx);
            char what[128];
            snprintf(what, sizeof what, "dc_op_matmul on %s and %s", mm[i].sa, mm[i].sb);
            if (dc_op_matmul(tape, a, b))
                fail_msg("%s: returned a tensor", what);
            const char *needles[] = {"dc_op_matmul", mm[i].sa, mm[i].sb};
            assert_mentions(ctx, what, needles, 3);
            dc_tensor_free(a);
            dc_tensor_free(b);
        }
    }

    /* dc_broadcast reports the status, the function and both shapes. */
    {
        const shp sa = S2(2, 3), sg = S1(1), sb = S1(4);
        dc_tensor *a = dc_tensor_new(ctx, DC_F64, sa.nd, sa.d);
        dc_tensor *g = dc_tensor_new(ctx, DC_F64, sg.nd, sg.d);
        dc_tensor *b = dc_tensor_new(ctx, DC_F64, sb.nd, sb.d);
        dc_tensor *in[3] = {a, g, b};
        dc_tensor *out[1] = {NULL};
        dc_clear_error(ctx);
        dc_status st = dc_broadcast(tape, DC_BFN_REF(gated_scale), 3, in, 1, out);
        if (st != DC_ERR_SHAPE)
            fail_msg("dc_broadcast(gated_scale) on [2, 3], [1], [4]: %s, want DC_ERR_SHAPE", dc_status_name(st));
        const char *needles[] = {"gated_scale", "[2, 3]", "[4]"};
        assert_mentions(ctx, "dc_broadcast(gated_scale) on [2, 3], [1], [4]", needles, 3);
        dc_tensor_free(a);
        dc_tensor_free(g);
        dc_tensor_free(b);
    }

    /* dc_backward_with: an adjoint that does not broadcast to the output. */
    {
        const shp sx = S2(2, 3), sadj = S1(4);
        dc_tape *t2 = dc_tape_new(ctx);
        dc_tensor *x = dc_tensor_new(ctx, DC_F64, sx.nd, sx.d);
        dc_tensor *adj = dc_tensor_new(ctx, DC_F64, sadj.nd, sadj.d);
        dc_tensor_set_requires_grad(x, true);
        dc_tensor *y = dc_op_exp(t2, x);
        TEST_NONNULL(ctx, y);
        dc_clear_error(ctx);
        dc_status st = dc_backward_with(t2, y, adj);
        if (st != DC_ERR_SHAPE)
            fail_msg("dc_backward_with, adjoint [4] for output [2, 3]: %s, want DC_ERR_SHAPE", dc_status_name(st));
        const char *needles[] = {"dc_backward_with", "[2, 3]", "[4]"};
        assert_mentions(ctx, "dc_backward_with, adjoint [4] for output [2, 3]", needles, 3);
        dc_tensor_free(x);
        dc_tensor_free(adj);
        dc_tape_free(t2);
    }
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

static void test_op_dtype_errors(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    dc_tape *tape = dc_tape_new(ctx);
    const int64_t shape[2] = {2, 3};
    dc_tensor *f32 = dc_tensor_new(ctx, DC_F32, 2, shape);
    dc_tensor *f64 = dc_tensor_new(ctx, DC_F64, 2, shape);
    dc_tensor_fill(f32, 0.5);
    dc_tensor_fill(f64, 0.5);
    const char *needles_ops[3];
    const int n_ops = (int)(sizeof binary_ops / sizeof binary_ops[0]);
    for (int o = 0; o < n_ops; ++o) {
        for (int order = 0; order < 2; ++order) {
            dc_tensor *a = order ? f64 : f32, *b = order ? f32 : f64;
            char what[96];
            snprintf(what, sizeof what, "%s on %s and %s", binary_ops[o].name, order ? "f64" : "f32",
                     order ? "f32" : "f64");
            dc_clear_error(ctx);
            if (binary_ops[o].fn(tape, a, b))
                fail_msg("%s: returned a tensor", what);
            needles_ops[0] = binary_ops[o].name;
            needles_ops[1] = "f32";
            needles_ops[2] = "f64";
            assert_mentions(ctx, what, needles_ops, 3);
        }
    }
    dc_clear_error(ctx);
    if (dc_op_select(tape, f32, f32, f64))
        fail_msg("dc_op_select on f32, f32, f64: returned a tensor");
    const char *needles_sel[] = {"dc_op_select", "f32", "f64"};
    assert_mentions(ctx, "dc_op_select on f32, f32, f64", needles_sel, 3);

    const int64_t sq[2] = {3, 3};
    dc_tensor *m32 = dc_tensor_new(ctx, DC_F32, 2, sq), *m64 = dc_tensor_new(ctx, DC_F64, 2, sq);
    dc_clear_error(ctx);
    if (dc_op_matmul(tape, m32, m64))
        fail_msg("dc_op_matmul on f32 and f64: returned a tensor");
    const char *needles_mm[] = {"dc_op_matmul", "f32", "f64"};
    assert_mentions(ctx, "dc_op_matmul on f32 and f64", needles_mm, 3);

    /* dc_broadcast: the status itself. */
    dc_tensor *in[3] = {f64, f64, f32};
    dc_tensor *out[1] = {NULL};
    dc_clear_error(ctx);
    dc_status st = dc_broadcast(tape, DC_BFN_REF(gated_scale), 3, in, 1, out);
    if (st != DC_ERR_DTYPE)
        fail_msg("dc_broadcast(gated_scale) on f64, f64, f32: %s, want DC_ERR_DTYPE", dc_status_name(st));
    const char *needles_b[] = {"gated_scale", "f32", "f64"};
    assert_mentions(ctx, "dc_broadcast(gated_scale) on f64, f64, f32", needles_b, 3);

    /* dc_backward_with: an f32 adjoint for an f64 output. */
    dc_tape *t2 = dc_tape_new(ctx);
    dc_tensor *x = dc_tensor_new(ctx, DC_F64, 2, shape);
    dc_tensor_set_requires_grad(x, true);
    dc_tensor *y = dc_op_exp(t2, x);
    TEST_NONNULL(ctx, y);
    dc_clear_error(ctx);
    st = dc_backward_with(t2, y, f32);
    if (st != DC_ERR_DTYPE)
        fail_msg("dc_backward_with, f32 adjoint for an f64 output: %s, want DC_ERR_DTYPE", dc_status_name(st));
    const char *needles_bw[] = {"f32", "f64"};
    assert_mentions(ctx, "dc_backward_with, f32 adjoint for an f64 output", needles_bw, 2);

    dc_tensor_free(x);
    dc_tape_free(t2);
    dc_tensor_free(m32);
    dc_tensor_free(m64);
    dc_tensor_free(f32);
    dc_tensor_free(f64);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
}

/* ---- unbroadcast ---- */

typedef struct ub_case {
    const char *name;
    shp x, y;
} ub_case;

static const ub_case ub_cases[] = {
    {"scalar over [7, 5]", SC, S2(7, 5)},
    {"scalar with scalar", SC, SC},
    {"scalar over [33, 70]", SC, S2(33, 70)},
    {"row [1, 70] over [33, 70]", S2(1, 70), S2(33, 70)},
    {"column [33, 1] over [33, 70]", S2(33, 1), S2(33, 70)},
    {"missing leading [70] over [33, 70]", S1(70), S2(33, 70)},
    {"[1, 1, 6] over [4, 5, 6]", S3(1, 1, 6), S3(4, 5, 6)},
    {"middle [4, 1, 6] over [4, 5, 6]", S3(4, 1, 6), S3(4, 5, 6)},
    {"[5, 1] over [4, 5, 3] (missing and size-1)", S2(5, 1), S3(4, 5, 3)},
    {"size-1 everywhere [1, 3, 1, 5, 1] over [2, 3, 4, 5, 1]", S5(1, 3, 1, 5, 1), S5(2, 3, 4, 5, 1)},
    {"all size 1: [1, 1, 1] with [1, 1]", S3(1, 1, 1), S2(1, 1)},
    {"both sides: [4, 1] with [1, 5]", S2(4, 1), S2(1, 5)},
    {"both sides: [1, 7, 1] with [3, 1, 5]", S3(1, 7, 1), S3(3, 1, 5)},
    {"both sides, rank 8", S8(2, 1, 3, 1, 2, 1, 2, 1), S8(1, 2, 1, 3, 1, 2, 1, 2)},
    {"zero-size result: [1, 3] with [0, 3]", S2(1, 3), S2(0, 3)},
    {"zero-size result: scalar with [0]", SC, S1(0)},
    {"zero-size result: [5] with [2, 0, 5]", S1(5), S3(2, 0, 5)},
    {"zero-size result: [0, 1] with [1, 4]", S2(0, 1), S2(1, 4)},
    {"threads: [300] over [512, 300]", S1(300), S2(512, 300)},
    {"threads: [512, 1] over [512, 300]", S2(512, 1), S2(512, 300)},
    {"threads: [1, 300] over [512, 300]", S2(1, 300), S2(512, 300)},
    {"threads: scalar over [512, 300]", SC, S2(512, 300)},
    {"threads: [64, 1, 3] over [64, 250, 3]", S3(64, 1, 3), S3(64, 250, 3)},
    {"long rows: [7, 1] over [7, 4099]", S2(7, 1), S2(7, 4099)},
    {"long rows, threads: [40, 1] over [40, 4099]", S2(40, 1), S2(40, 4099)},
    {"long rows, threads: [4099] over [40, 4099]", S1(4099), S2(40, 4099)},
    /* rows of 512 to 2047 elements make a chunk each when an input is a row view */
    {"rows of a chunk each: [1, 700] over [9, 700]", S2(1, 700), S2(9, 700)},
    {"rows of a chunk each, threads: [1, 1, 600] over [7, 40, 600]", S3(1, 1, 600), S3(7, 40, 600)},
    {"rows of a chunk each, both sides: [5, 1, 512] with [1, 3, 512]", S3(5, 1, 512), S3(1, 3, 512)},
};

typedef enum ub_op { UB_ADD, UB_MUL } ub_op;

/* Gradients of x and y for out = op(x, y) and adjoint G, with the sum of the
 * magnitudes of the terms of each (the scale of the rounding error). */
typedef struct ub_ref {
    double *out, *out_mag, *gx, *gx_mag, *gy, *gy_mag;
} ub_ref;

static void ub_reference(ub_op op, const shp *xs, const double *x, const shp *ys, const double *y, const shp *os,
                         const double *g, ub_ref *r)
{
    const int64_t nx = shp_numel(xs), ny = shp_numel(ys), no = shp_numel(os);
    r->out = calloc((size_t)(no ? no : 1), sizeof(double));
    r->out_mag = calloc((size_t)(no ? no : 1), sizeof(double));
    r->gx = calloc((size_t)(nx ? nx : 1), sizeof(double));
    r->gx_mag = calloc((size_t)(nx ? nx : 1), sizeof(double));
    r->gy = calloc((size_t)(ny ? ny : 1), sizeof(double));
    r->gy_mag = calloc((size_t)(ny ? ny : 1), sizeof(double));
    assert_true(r->out && r->out_mag && r->gx && r->gx_mag && r->gy && r->gy_mag);
    for (int64_t e = 0; e < no; ++e) {
        const int64_t ix = src_index(os, e, xs), iy = src_index(os, e, ys);
        const double tx = op == UB_ADD ? g[e] : g[e] * y[iy];
        const double ty = op == UB_ADD ? g[e] : g[e] * x[ix];
        r->out[e] = op == UB_ADD ? x[ix] + y[iy] : x[ix] * y[iy];
        r->out_mag[e] = op == UB_ADD ? fabs(x[ix]) + fabs(y[iy]) : fabs(x[ix] * y[iy]);
        r->gx[ix] += tx;
        r->gx_mag[ix] += fabs(tx);
        r->gy[iy] += ty;
        r->gy_mag[iy] += fabs(ty);
    }
}

static void ub_free(ub_ref *r)
{
    free(r->out);
    free(r->out_mag);
    free(r->gx);
    free(r->gx_mag);
    free(r->gy);
    free(r->gy_mag);
}

/* got within rtol * mag * factor of factor * ref, element by element; where
 * mag is 0 (no terms, or only zero terms) the value must be exactly 0. */
static void ub_compare(const char *what, const char *input, const double *got, const double *ref, const double *mag,
                       int64_t n, double rtol, double factor)
{
    for (int64_t i = 0; i < n; ++i) {
        const double want = factor * ref[i], tol = rtol * factor * mag[i];
        if (!(fabs(got[i] - want) <= tol))
            fail_msg("%s: %s element %lld: got %.17g, want %.17g (tolerance %.3g)", what, input, (long long)i, got[i],
                     want, tol);
    }
}

/* Gives x and y a gradient of other values first, then zeroes it, so that
 * the check below sees a stale buffer that the backward pass must overwrite. */
static void make_stale_grads(dc_ctx *ctx, dc_tensor *x, dc_tensor *y)
{
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_exp(tape, x), 0, NULL, false),
                                dc_op_sum(tape, dc_op_exp(tape, y), 0, NULL, false));
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    dc_tape_free(tape);
    dc_tensor_zero_grad(x);
    dc_tensor_zero_grad(y);
}

static double *grad_values(dc_ctx *ctx, const char *what, const char *input, const dc_tensor *t)
{
    const dc_tensor *g = dc_tensor_grad(t);
    if (!g)
        fail_msg("%s: %s has no gradient: %s", what, input, dc_last_error(ctx));
    char w[256];
    snprintf(w, sizeof w, "%s: gradient of %s", what, input);
    const int nd = dc_tensor_ndim(t);
    shp s = {nd, {0}};
    for (int d = 0; d < nd; ++d)
        s.d[d] = dc_tensor_shape(t)[d];
    assert_shape(g, &s, w);
    return test_values(g);
}

static void run_unbroadcast(dc_ctx *ctx, const ub_case *k, dc_dtype dtype, ub_op op)
{
    const double rtol = dtype == DC_F32 ? 1e-5 : 1e-12;
    char what[256];
    snprintf(what, sizeof what, "%s, %s, %s", k->name, op == UB_ADD ? "add" : "mul", dc_dtype_name(dtype));
    const shp in2[2] = {k->x, k->y};
    const shp os = expected_broadcast(2, in2);
    dc_tensor *x = test_random(ctx, dtype, k->x.nd, k->x.d, -1.0, 1.0);
    dc_tensor *y = test_random(ctx, dtype, k->y.nd, k->y.d, -1.0, 1.0);
    dc_tensor *g = test_random(ctx, dtype, os.nd, os.d, -1.0, 1.0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    TEST_OK(ctx, dc_tensor_set_requires_grad(y, true));
    make_stale_grads(ctx, x, y);

    double *xv = test_values(x), *yv = test_values(y), *gv = test_values(g);
    ub_ref r;
    ub_reference(op, &k->x, xv, &k->y, yv, &os, gv, &r);
    const int64_t nx = shp_numel(&k->x), ny = shp_numel(&k->y), no = shp_numel(&os);

    for (int pass = 1; pass <= 2; ++pass) {
        /* The second pass adds to the gradients of the first. */
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *out = op == UB_ADD ? dc_op_add(tape, x, y) : dc_op_mul(tape, x, y);
        TEST_NONNULL(ctx, out);
        assert_shape(out, &os, what);
        if (pass == 1) {
            double *ov = test_values(out);
            ub_compare(what, "output", ov, r.out, r.out_mag, no, rtol, 1.0);
            free(ov);
        }
        TEST_OK(ctx, dc_backward_with(tape, out, g));
        char w[300];
        snprintf(w, sizeof w, "%s, backward pass %d", what, pass);
        double *gx = grad_values(ctx, w, "x", x);
        double *gy = ny > 0 ? grad_values(ctx, w, "y", y) : NULL;
        ub_compare(w, "gradient of x", gx, r.gx, r.gx_mag, nx, rtol, (double)pass);
        if (gy)
            ub_compare(w, "gradient of y", gy, r.gy, r.gy_mag, ny, rtol, (double)pass);
        free(gx);
        free(gy);
        dc_tape_free(tape);
    }
    ub_free(&r);
    free(xv);
    free(yv);
    free(gv);
    dc_tensor_free(x);
    dc_tensor_free(y);
    dc_tensor_free(g);
}

static void test_unbroadcast_patterns(void **state)
{
    (void)state;
    dc_ctx *ctx = threaded_ctx();
    const int n_cases = (int)(sizeof ub_cases / sizeof ub_cases[0]);
    for (int c = 0; c < n_cases; ++c)
        for (int dt = 0; dt < 2; ++dt)
            for (int op = 0; op < 2; ++op)
                run_unbroadcast(ctx, &ub_cases[c], dt ? DC_F64 : DC_F32, (ub_op)op);
    dc_ctx_free(ctx);
}

/* The same with y broadcast instead of x (the other operand slot). */
static void test_unbroadcast_second_operand(void **state)
{
    (void)state;
    dc_ctx *ctx = threaded_ctx();
    const int n_cases = (int)(sizeof ub_cases / sizeof ub_cases[0]);
    for (int c = 0; c < n_cases; ++c) {
        ub_case swapped = ub_cases[c];
        swapped.x = ub_cases[c].y;
        swapped.y = ub_cases[c].x;
        char name[160];
        snprintf(name, sizeof name, "%s (operands swapped)", ub_cases[c].name);
        swapped.name = name;
        for (int dt = 0; dt < 2; ++dt)
            for (int op = 0; op < 2; ++op)
                run_unbroadcast(ctx, &swapped, dt ? DC_F64 : DC_F32, (ub_op)op);
    }
    dc_ctx_free(ctx);
}

/* ---- strided inputs ---- */

typedef struct strided_case {
    const char *name;
    shp x;
    int a0, a1;
} strided_case;

static const strided_case strided_cases[] = {
    {"[5, 7] transposed (0, 1)", S2(5, 7), 0, 1},
    {"[33, 70] transposed (0, 1)", S2(33, 70), 0, 1},
    {"[300, 170] transposed (0, 1), threads", S2(300, 170), 0, 1},
    {"[4, 5, 6] transposed (0, 2)", S3(4, 5, 6), 0, 2},
    {"[3, 40, 300] transposed (-1, -2), threads", S3(3, 40, 300), -1, -2},
    {"[9, 4099] transposed (0, 1)", S2(9, 4099), 0, 1},
    {"[4099, 9] transposed (0, 1), long rows", S2(4099, 9), 0, 1},
};

/* Values of x (shape xs) transposed: the element at coordinates c of the
 * result is x at c with axes a0 and a1 swapped. */
static double *transposed_values(const shp *xs, const double *x, int a0, int a1, shp *ts)
{
    *ts = *xs;
    ts->d[a0] = xs->d[a1];
    ts->d[a1] = xs->d[a0];
    const int64_t n = shp_numel(xs);
    double *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    assert_non_null(t);
    for (int64_t e = 0; e < n; ++e) {
        int64_t c[DC_MAX_DIMS], rest = e;
        for (int d = ts->nd - 1; d >= 0; --d) {
            c[d] = rest % ts->d[d];
            rest /= ts->d[d];
        }
        const int64_t tmp = c[a0];
        c[a0] = c[a1];
        c[a1] = tmp;
        int64_t src = 0;
        for (int d = 0; d < xs->nd; ++d)
            src = src * xs->d[d] + c[d];
        t[e] = x[src];
    }
    return t;
}

static dc_tensor *tape_tensor_from(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, const shp *s, const double *v)
{
    const int64_t n = shp_numel(s);
    void *buf = malloc((size_t)(n ? n : 1) * dc_dtype_size(dtype));
    assert_non_null(buf);
    for (int64_t i = 0; i < n; ++i) {
        if (dtype == DC_F32)
            ((float *)buf)[i] = (float)v[i];
        else
            ((double *)buf)[i] = v[i];
    }
    dc_tensor *t = dc_tape_tensor_new(tape, dtype, s->nd, s->d, buf);
    free(buf);
    TEST_NONNULL(ctx, t);
    return t;
}

static void assert_same(const char *what, const dc_tensor *a, const dc_tensor *b, double rtol)
{
    assert_int_equal(dc_tensor_numel(a), dc_tensor_numel(b));
    double *va = test_values(a), *vb = test_values(b);
    for (int64_t i = 0; i < dc_tensor_numel(a); ++i)
        if (!(fabs(va[i] - vb[i]) <= rtol * fabs(vb[i])))
            fail_msg("%s: element %lld: strided %.17g, contiguous %.17g", what, (long long)i, va[i], vb[i]);
    free(va);
    free(vb);
}

/* Sum of x (shape s) over the axes in mask, checked against `got`. */
static void check_sum(const char *what, const dc_tensor *got, const shp *s, const double *x, unsigned mask, double rtol)
{
    const int64_t n = shp_numel(s);
    const int64_t m = dc_tensor_numel(got);
    double *ref = calloc((size_t)(m ? m : 1), sizeof *ref), *mag = calloc((size_t)(m ? m : 1), sizeof *mag);
    assert_true(ref && mag);
    for (int64_t e = 0; e < n; ++e) {
        int64_t rest = e, o = 0, mul = 1;
        for (int d = s->nd - 1; d >= 0; --d) {
            const int64_t c = rest % s->d[d];
            rest /= s->d[d];
            if (mask & (1u << d))
                continue;
            o += c * mul;
            mul *= s->d[d];
        }
        assert_true(o < m);
        ref[o] += x[e];
        mag[o] += fabs(x[e]);
    }
    double *v = test_values(got);
    for (int64_t i = 0; i < m; ++i)
        if (!(fabs(v[i] - ref[i]) <= rtol * mag[i]))
            fail_msg("%s: element %lld: %.17g, want %.17g", what, (long long)i, v[i], ref[i]);
    free(v);
    free(ref);
    free(mag);
}

static void run_strided(dc_ctx *ctx, const strided_case *k, dc_dtype dtype)
{
    char what[256];
    const double sum_rtol = dtype == DC_F32 ? 1e-6 : 1e-13;
    dc_tensor *x = test_random(ctx, dtype, k->x.nd, k->x.d, -1.0, 1.0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    double *xv = test_values(x);
    const int a0 = k->a0 < 0 ? k->a0 + k->x.nd : k->a0, a1 = k->a1 < 0 ? k->a1 + k->x.nd : k->a1;
    shp ts;
    double *tv = transposed_values(&k->x, xv, a0, a1, &ts);
    const int64_t n = shp_numel(&ts);

    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *xt = dc_op_transpose(tape, x, k->a0, k->a1);
    TEST_NONNULL(ctx, xt);
    snprintf(what, sizeof what, "%s, %s: the transposed view", k->name, dc_dtype_name(dtype));
    assert_shape(xt, &ts, what);
    if (dc_tensor_is_contiguous(xt))
        fail_msg("%s is contiguous; the case tests nothing", what);
    {
        double *v = test_values(xt);
        test_assert_close(v, tv, n, 0, 0, what);
        free(v);
    }
    dc_tensor *c = tape_tensor_from(ctx, tape, dtype, &ts, tv);
    dc_tensor *y = test_random(ctx, dtype, ts.nd, ts.d, -1.0, 1.0);
    const shp rs = {1, {ts.d[ts.nd - 1]}};
    dc_tensor *row = test_random(ctx, dtype, rs.nd, rs.d, -1.0, 1.0);

    snprintf(what, sizeof what, "%s, %s: add(view, y) vs add(copy, y)", k->name, dc_dtype_name(dtype));
    assert_same(what, dc_op_add(tape, xt, y), dc_op_add(tape, c, y), 0);
    snprintf(what, sizeof what, "%s, %s: mul(view, row) vs mul(copy, row)", k->name, dc_dtype_name(dtype));
    assert_same(what, dc_op_mul(tape, xt, row), dc_op_mul(tape, c, row), 0);
    snprintf(what, sizeof what, "%s, %s: sub(y, view) vs sub(y, copy)", k->name, dc_dtype_name(dtype));
    assert_same(what, dc_op_sub(tape, y, xt), dc_op_sub(tape, y, c), 0);
    snprintf(what, sizeof what, "%s, %s: exp(view) vs exp(copy)", k->name, dc_dtype_name(dtype));
    assert_same(what, dc_op_exp(tape, xt), dc_op_exp(tape, c), 0);

    /* Sums over every axis, the first, the last (keepdims) and a pair. */
    const int first[1] = {0}, last[1] = {-1}, pair[2] = {0, -1};
    struct {
        const char *name;
        int n_axes;
        const int *axes;
        bool keepdims;
        unsigned mask;
    } sums[] = {
        {"all axes", 0, NULL, false, (1u << ts.nd) - 1},
        {"axis 0", 1, first, false, 1u},
        {"axis -1, keepdims", 1, last, true, 1u << (ts.nd - 1)},
        {"axes 0 and -1", 2, pair, false, 1u | (1u << (ts.nd - 1))},
    };
    for (size_t s = 0; s < sizeof sums / sizeof sums[0]; ++s) {
        dc_tensor *sv = dc_op_sum(tape, xt, sums[s].n_axes, sums[s].axes, sums[s].keepdims);
        dc_tensor *sc = dc_op_sum(tape, c, sums[s].n_axes, sums[s].axes, sums[s].keepdims);
        TEST_NONNULL(ctx, sv);
        TEST_NONNULL(ctx, sc);
        snprintf(what, sizeof what, "%s, %s: sum of the view over %s", k->name, dc_dtype_name(dtype), sums[s].name);
        check_sum(what, sv, &ts, tv, sums[s].mask, sum_rtol);
        snprintf(what, sizeof what, "%s, %s: sum of the copy over %s", k->name, dc_dtype_name(dtype), sums[s].name);
        check_sum(what, sc, &ts, tv, sums[s].mask, sum_rtol);
    }
    dc_tape_free(tape);

    /* The gradient through the view: x's gradient is G * y transposed back. */
    tape = dc_tape_new(ctx);
    dc_tensor *out = dc_op_mul(tape, dc_op_transpose(tape, x, k->a0, k->a1), y);
    TEST_NONNULL(ctx, out);
    dc_tensor *g = test_random(ctx, dtype, ts.nd, ts.d, -1.0, 1.0);
    TEST_OK(ctx, dc_backward_with(tape, out, g));
    snprintf(what, sizeof what, "%s, %s: gradient through the view", k->name, dc_dtype_name(dtype));
    double *gv = test_values(g), *yv = test_values(y);
    double *prod = malloc((size_t)(n ? n : 1) * sizeof *prod);
    assert_non_null(prod);
    for (int64_t e = 0; e < n; ++e)
        prod[e] = gv[e] * yv[e];
    /* Transposing the transposed shape back gives x's layout. */
    shp back;
    double *want = transposed_values(&ts, prod, a0, a1, &back);
    double *got = grad_values(ctx, what, "x", x);
    test_assert_close(got, want, n, 0, dtype == DC_F32 ? 1e-6 : 1e-15, what);
    free(got);
    free(want);
    free(prod);
    free(gv);
    free(yv);
    dc_tensor_free(g);
    dc_tape_free(tape);

    dc_tensor_free(y);
    dc_tensor_free(row);
    dc_tensor_free(x);
    free(xv);
    free(tv);
}

/* ---- outputs that share elements ---- */

typedef struct overlap_case {
    const char *what;
    int ndim;
    int64_t shape[2];
    int64_t strides_a[2], strides_b[2];
    ptrdiff_t byte_offset_b; /* b's first element, in bytes after a's */
    dc_write_mode mode_b;
    bool overlap;
} overlap_case;

/* dc_outputs_overlap on two float views of one buffer: exact for views with
 * the same strides, cautious (spans that meet) for others. */
static void test_outputs_overlap(void **state)
{
    (void)state;
    static float buf[1 << 14];
    float *const a = buf + (1 << 13); /* room on both sides */
    const overlap_case cases[] = {
        {"1-D views shifted by half", 1, {16}, {1}, {1}, 8 * 4, DC_WRITE_ACCUMULATE, true},
        {"1-D views end to end", 1, {16}, {1}, {1}, 16 * 4, DC_WRITE_ACCUMULATE, false},
        {"the same view twice", 2, {4, 8}, {8, 1}, {8, 1}, 0, DC_WRITE_ACCUMULATE, false},
        {"columns 0.. and 128.. of [32, 513]", 2, {32, 128}, {513, 1}, {513, 1}, 128 * 4, DC_WRITE_ACCUMULATE, false},
        {"columns 0.. and 384.. of [32, 513]", 2, {32, 128}, {513, 1}, {513, 1}, 384 * 4, DC_WRITE_ASSIGN, false},
        {"column blocks overlapping by 5 columns", 2, {4, 10}, {20, 1}, {20, 1}, 5 * 4, DC_WRITE_ASSIGN, true},
        {"row blocks shifted by one row", 2, {31, 100}, {100, 1}, {100, 1}, 100 * 4, DC_WRITE_ACCUMULATE, true},
        {"rows shifted by a row and a column", 2, {31, 100}, {101, 1}, {101, 1}, 102 * 4, DC_WRITE_ACCUMULATE, true},
        {"even and odd elements", 1, {8}, {2}, {2}, 4, DC_WRITE_ACCUMULATE, false},
        {"every third element, shifted by three", 1, {8}, {3}, {3}, 12, DC_WRITE_ACCUMULATE, true},
        {"sums over axis 0, shifted", 2, {4, 8}, {0, 1}, {0, 1}, 4 * 4, DC_WRITE_ACCUMULATE, true},
        {"shifted by half, the second discarded", 1, {16}, {1}, {1}, 8 * 4, DC_WRITE_DISCARD, false},
        {"other strides, spans meet", 2, {4, 4}, {4, 1}, {1, 4}, 4, DC_WRITE_ACCUMULATE, true},
        {"other strides, spans apart", 2, {4, 4}, {4, 1}, {1, 4}, 16 * 4, DC_WRITE_ACCUMULATE, false},
        {"shifted by part of an element", 1, {16}, {1}, {1}, 2, DC_WRITE_ACCUMULATE, true},
        /* elements {0, 4, 5, 9} and those + 1: 5 = 4 + 1 (the second candidate along axis 0) */
        {"[2, 2] strides [5, 4], shifted by 1", 2, {2, 2}, {5, 4}, {5, 4}, 1 * 4, DC_WRITE_ACCUMULATE, true},
        /* {0, 4, 5, 9} and {2, 6, 7, 11}: both candidates along axis 0 fail */
        {"[2, 2] strides [5, 4], shifted by 2", 2, {2, 2}, {5, 4}, {5, 4}, 2 * 4, DC_WRITE_ACCUMULATE, false},
        /* stride 3 below the reach of stride 2 (4): undecided, so yes (and they do share 3) */
        {"[3, 3] strides [3, 2], shifted by 1", 2, {3, 3}, {3, 2}, {3, 2}, 1 * 4, DC_WRITE_ACCUMULATE, true},
        {"backward views, b 8 elements below a", 1, {16}, {-1}, {-1}, -8 * 4, DC_WRITE_ACCUMULATE, true},
        {"backward views, b 16 elements below a", 1, {16}, {-1}, {-1}, -16 * 4, DC_WRITE_ACCUMULATE, false},
        /* even and odd elements again, the stride of the axis of one differing */
        {"strides differ only along an axis of one", 2, {1, 8}, {100, 2}, {7, 2}, 4, DC_WRITE_ACCUMULATE, false},
        {"no elements", 1, {0}, {1}, {1}, 0, DC_WRITE_ACCUMULATE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const overlap_case *c = &cases[i];
        dc_loop_out out[2];
        memset(out, 0, sizeof out);
        out[0].data = a;
        out[0].mode = DC_WRITE_ACCUMULATE;
        out[1].data = (unsigned char *)a + c->byte_offset_b;
        out[1].mode = c->mode_b;
        for (int d = 0; d < c->ndim; ++d) {
            out[0].strides[d] = c->strides_a[d];
            out[1].strides[d] = c->strides_b[d];
        }
        const bool got = dc_outputs_overlap(DC_F32, c->ndim, c->shape, 2, out);
        if (got != c->overlap)
            fail_msg("%s: dc_outputs_overlap says %d, expected %d", c->what, got, c->overlap);
        /* the order of the two outputs does not matter */
        const dc_loop_out swapped[2] = {out[1], out[0]};
        if (dc_outputs_overlap(DC_F32, c->ndim, c->shape, 2, swapped) != c->overlap)
            fail_msg("%s, outputs swapped: expected %d", c->what, c->overlap);
    }
}

static void test_strided_inputs(void **state)
{
    (void)state;
    dc_ctx *ctx = threaded_ctx();
    for (size_t c = 0; c < sizeof strided_cases / sizeof strided_cases[0]; ++c)
        for (int dt = 0; dt < 2; ++dt)
            run_strided(ctx, &strided_cases[c], dt ? DC_F64 : DC_F32);
    dc_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_shape_rules),
        cmocka_unit_test(test_op_shape_errors),
        cmocka_unit_test(test_op_dtype_errors),
        cmocka_unit_test(test_unbroadcast_patterns),
        cmocka_unit_test(test_unbroadcast_second_operand),
        cmocka_unit_test(test_strided_inputs),
        cmocka_unit_test(test_outputs_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
