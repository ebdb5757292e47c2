/* The shared table of op cases (op_cases.h): build functions, the rows,
 * their input values and the references in double. */
#include "op_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* ---- build functions: the op on the tape ---- */

#define BUILD(name, expr)                                                                                             \
    static dc_tensor *build_##name(dc_tape *t, dc_tensor *const *x, const op_arg *a)                                  \
    {                                                                                                                 \
        (void)a;                                                                                                      \
        return (expr);                                                                                                \
    }

BUILD(add, dc_op_add(t, x[0], x[1]))
BUILD(sub, dc_op_sub(t, x[0], x[1]))
BUILD(mul, dc_op_mul(t, x[0], x[1]))
BUILD(div, dc_op_div(t, x[0], x[1]))
BUILD(pow, dc_op_pow(t, x[0], x[1]))
BUILD(affine, dc_op_affine(t, x[0], a->s, a->t))
BUILD(neg, dc_op_neg(t, x[0]))
BUILD(exp, dc_op_exp(t, x[0]))
BUILD(log, dc_op_log(t, x[0]))
BUILD(tanh, dc_op_tanh(t, x[0]))
BUILD(sigmoid, dc_op_sigmoid(t, x[0]))
BUILD(relu, dc_op_relu(t, x[0]))
BUILD(select, dc_op_select(t, x[0], x[1], x[2]))
BUILD(sum, dc_op_sum(t, x[0], a->n_axes, a->axes, a->keepdims))
BUILD(mean, dc_op_mean(t, x[0], a->n_axes, a->axes, a->keepdims))
BUILD(transpose, dc_op_transpose(t, x[0], a->ax0, a->ax1))

BUILD(hard_sigmoid, dc_op_hard_sigmoid(t, x[0], a->s))
BUILD(step_st, dc_op_step_st(t, x[0], a->s))
BUILD(slice, dc_op_slice(t, x[0], a->ax0, a->start, a->len))
BUILD(embedding, dc_op_embedding(t, x[0], x[1]))
BUILD(cross_entropy, dc_op_cross_entropy(t, x[0], x[1]))

BUILD(concat2, dc_op_concat(t, 2, x, a->ax0))
BUILD(concat3, dc_op_concat(t, 3, x, a->ax0))

static dc_tensor *matmul_operand(dc_tape *t, dc_tensor *x, bool trans, bool swap02)
{
    if (trans)
        x = dc_op_transpose(t, x, -1, -2);
    if (swap02)
        x = dc_op_transpose(t, x, 0, 2);
    return x;
}

dc_tensor *build_matmul(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    return dc_op_matmul(t, matmul_operand(t, x[0], a->trans[0], a->swap02[0]),
                        matmul_operand(t, x[1], a->trans[1], a->swap02[1]));
}

dc_tensor *build_reshape(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    dc_tensor *v = a->pre_transpose ? dc_op_transpose(t, x[0], a->ax0, a->ax1) : x[0];
    return dc_op_reshape(t, v, a->nd, a->shape);
}


/* Compositions the device runs on paths of their own (REF_NONE rows). */
DC_BFN_DECLARE(hmlstm_update_c);

/* transpose, then a reshape of the strided result */
BUILD(transpose_reshape, dc_op_reshape(t, dc_op_transpose(t, x[0], 0, 1), a->nd, a->shape))
/* two column slices put back together in the other order */
static dc_tensor *build_slice_concat(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    (void)a;
    dc_tensor *parts[2] = {dc_op_slice(t, x[0], 1, 2, 5), dc_op_slice(t, x[0], 1, 0, 2)};
    return dc_op_concat(t, 2, parts, 1);
}
/* 40 parts, each an op's result (x0 times 1, 2, ... 40), joined along axis
 * 0: on CUDA two launches of 32 and 8 parts, forward and backward */
static dc_tensor *build_concat_many(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    (void)a;
    dc_tensor *parts[40];
    for (int k = 0; k < 40; ++k)
        parts[k] = dc_op_affine(t, x[0], 1.0 + k, 0.0);
    return dc_op_concat(t, 40, parts, 0);
}
/* concat(y, y) of y = tanh(x0): one tensor twice, its gradient the sum */
static dc_tensor *build_concat_repeated(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    (void)a;
    dc_tensor *y = dc_op_tanh(t, x[0]);
    dc_tensor *parts[2] = {y, y};
    return dc_op_concat(t, 2, parts, 1);
}
/* concat(concat(y, x1), y * y) with y = tanh(x0): when the inner concat's
 * backward runs, y's gradient already holds the product's part (added to) */
static dc_tensor *build_concat_accumulates(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    (void)a;
    dc_tensor *y = dc_op_tanh(t, x[0]);
    dc_tensor *inner[2] = {y, x[1]};
    dc_tensor *c = dc_op_concat(t, 2, inner, 0);
    dc_tensor *outer[2] = {c, dc_op_mul(t, y, y)};
    return dc_op_concat(t, 2, outer, 0);
}
/* x[0:200] * x[100:300]: two gradients that share x's elements 100..199 */
BUILD(mul_overlap, dc_op_mul(t, dc_op_slice(t, x[0], 0, 0, 200), dc_op_slice(t, x[0], 0, 100, 200)))
/* (x0 + b) + b: b's gradient is routed twice, the second time added to the first */
BUILD(add_twice, dc_op_add(t, dc_op_add(t, x[0], x[1]), x[1]))
/* cross entropy of columns 1..10 of [N, 12] logits: the gradient is a view with rows of 12 */
BUILD(cross_entropy_sliced, dc_op_cross_entropy(t, dc_op_slice(t, x[0], 1, 1, 10), x[1]))
/* the rows of columns 3..302 of a wider table: rows of the view are 320 apart */
BUILD(embedding_sliced, dc_op_embedding(t, dc_op_slice(t, x[0], 1, 3, 300), x[1]))
/* the c-update on UPDATE everywhere with c_prev = x[0:200] and f = x[100:300]:
 * one launch writes two gradients that share elements */
static dc_tensor *build_cupdate_overlap(dc_tape *t, dc_tensor *const *x, const op_arg *a)
{
    const dc_dtype dtype = dc_tensor_dtype(x[0]);
    dc_tensor *in[6] = {dc_tape_scalar(t, dtype, 0.0), dc_tape_scalar(t, dtype, 1.0),
                        dc_op_slice(t, x[0], 0, 0, 200), dc_op_slice(t, x[0], 0, 100, 200), x[1], x[2]};
    dc_tensor *c = NULL;
    if (dc_broadcast_policy(t, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &c, a->policy) != DC_OK)
        return NULL;
    return c;
}

/* ---- scalar references ---- */

#define EW_REF(name, expr)                                                                                            \
    static double ew_##name(const double *v, const op_arg *a)                                                         \
    {                                                                                                                 \
        (void)a;                                                                                                      \
        return (expr);                                                                                                \
    }

EW_REF(add, v[0] + v[1])
EW_REF(sub, v[0] - v[1])
EW_REF(mul, v[0] * v[1])
EW_REF(div, v[0] / v[1])
EW_REF(pow, pow(v[0], v[1]))
EW_REF(affine, v[0] * a->s + a->t)
EW_REF(neg, -v[0])
EW_REF(exp, exp(v[0]))
EW_REF(log, log(v[0]))
EW_REF(tanh, tanh(v[0]))
EW_REF(sigmoid, 1.0 / (1.0 + exp(-v[0])))
EW_REF(relu, v[0] > 0 ? v[0] : 0.0)
EW_REF(select, v[0] != 0 ? v[1] : v[2])
EW_REF(hard_sigmoid, fmax(0.0, fmin(1.0, (a->s * v[0] + 1) / 2)))
EW_REF(step_st, v[0] > a->s ? 1.0 : 0.0)

/* ---- the table ---- */

#define ALL3 {true, true, true}
#define NOARG {.s = 0}
#define EW(fn) build_##fn, REF_EW, ew_##fn

/* A binary elementwise op with each side broadcast in turn, both sides, and
 * with only one side requiring a gradient. */
#define BINARY_ROWS(fn, ra, rb)                                                                                       \
    {#fn " [4, 5] . [4, 5]", EW(fn), 2, {S2(4, 5), S2(4, 5)}, {ra, rb}, ALL3, NOARG},                                 \
    {#fn " [4, 5] . [5]", EW(fn), 2, {S2(4, 5), S1(5)}, {ra, rb}, ALL3, NOARG},                                       \
    {#fn " [5] . [4, 5]", EW(fn), 2, {S1(5), S2(4, 5)}, {ra, rb}, ALL3, NOARG},                                       \
    {#fn " [4, 1] . [4, 5]", EW(fn), 2, {S2(4, 1), S2(4, 5)}, {ra, rb}, ALL3, NOARG},                                 \
    {#fn " [4, 5] . [4, 1]", EW(fn), 2, {S2(4, 5), S2(4, 1)}, {ra, rb}, ALL3, NOARG},                                 \
    {#fn " [] . [4, 5]", EW(fn), 2, {SC, S2(4, 5)}, {ra, rb}, ALL3, NOARG},                                           \
    {#fn " [4, 5] . []", EW(fn), 2, {S2(4, 5), SC}, {ra, rb}, ALL3, NOARG},                                           \
    {#fn " [] . []", EW(fn), 2, {SC, SC}, {ra, rb}, ALL3, NOARG},                                                     \
    {#fn " [4, 1] . [1, 5]", EW(fn), 2, {S2(4, 1), S2(1, 5)}, {ra, rb}, ALL3, NOARG},                                 \
    {#fn " [3, 1, 5] . [4, 1]", EW(fn), 2, {S3(3, 1, 5), S2(4, 1)}, {ra, rb}, ALL3, NOARG},                           \
    {#fn " [4, 5] . [5], b constant", EW(fn), 2, {S2(4, 5), S1(5)}, {ra, rb}, {true, false, false}, NOARG},           \
    {#fn " [4, 1] . [4, 5], a constant", EW(fn), 2, {S2(4, 1), S2(4, 5)}, {ra, rb}, {false, true, false}, NOARG}

#define UNARY_ROWS(fn, r)                                                                                             \
    {#fn " [4, 5]", EW(fn), 1, {S2(4, 5)}, {r}, ALL3, NOARG},                                                         \
    {#fn " []", EW(fn), 1, {SC}, {r}, ALL3, NOARG},                                                                   \
    {#fn " [2, 3, 4]", EW(fn), 1, {S3(2, 3, 4)}, {r}, ALL3, NOARG}

#define SELECT_ROW(name, sc, sa, sb)                                                                                  \
    {"select " name, EW(select), 3, {sc, sa, sb}, {COND, U(-2, 2), U(-2, 2)}, {false, true, true}, NOARG}

#define SUM_ROW(name, xs, n, keep, ...)                                                                               \
    {"sum " name, build_sum, REF_SUM, NULL, 1, {xs}, {U(-2, 2)}, ALL3,                                                \
     {.n_axes = n, .axes = {__VA_ARGS__}, .keepdims = keep}}
#define MEAN_ROW(name, xs, n, keep, ...)                                                                              \
    {"mean " name, build_mean, REF_MEAN, NULL, 1, {xs}, {U(-2, 2)}, ALL3,                                             \
     {.n_axes = n, .axes = {__VA_ARGS__}, .keepdims = keep}}

#define MATMUL_ROW(name, sa, sb, ta, tb, ga, gb)                                                                      \
    {"matmul " name, build_matmul, REF_MATMUL, NULL, 2, {sa, sb}, {U(-1, 1), U(-1, 1)}, {ga, gb, false},              \
     {.trans = {ta, tb}}}
#define MATMUL_SWAP_ROW(name, sa, sb, sw_a, sw_b)                                                                     \
    {"matmul " name, build_matmul, REF_MATMUL, NULL, 2, {sa, sb}, {U(-1, 1), U(-1, 1)}, ALL3,                         \
     {.swap02 = {sw_a, sw_b}}}

#define SLICE_ROW(name, xs, axis, from, n)                                                                            \
    {"slice " name, build_slice, REF_SLICE, NULL, 1, {xs}, {U(-2, 2)}, ALL3,                                          \
     {.ax0 = axis, .start = from, .len = n}}

#define TRANSPOSE_ROW(name, xs, a0, a1)                                                                               \
    {"transpose " name, build_transpose, REF_TRANSPOSE, NULL, 1, {xs}, {U(-2, 2)}, ALL3,                              \
     {.ax0 = a0, .ax1 = a1}}

#define RESHAPE_ROW(name, xs, pre, a0, a1, n, ...)                                                                    \
    {"reshape " name, build_reshape, REF_RESHAPE, NULL, 1, {xs}, {U(-2, 2)}, ALL3,                                    \
     {.pre_transpose = pre, .ax0 = a0, .ax1 = a1, .nd = n, .shape = {__VA_ARGS__}}}

const op_case cases[] = {
    BINARY_ROWS(add, U(-2, 2), U(-2, 2)),
    BINARY_ROWS(sub, U(-2, 2), U(-2, 2)),
    BINARY_ROWS(mul, U(-2, 2), U(-2, 2)),
    BINARY_ROWS(div, U(-2, 2), AWAY0(0.5, 2)),
    BINARY_ROWS(pow, U(0.5, 2), U(-2, 2)),

    {"affine [4, 5] (2.5, -0.75)", EW(affine), 1, {S2(4, 5)}, {U(-2, 2)}, ALL3, {.s = 2.5, .t = -0.75}},
    {"affine [] (-3, 1)", EW(affine), 1, {SC}, {U(-2, 2)}, ALL3, {.s = -3, .t = 1}},
    {"affine [2, 3, 4] (0.5, 0)", EW(affine), 1, {S3(2, 3, 4)}, {U(-2, 2)}, ALL3, {.s = 0.5, .t = 0}},
    UNARY_ROWS(neg, U(-2, 2)),
    UNARY_ROWS(exp, U(-2, 2)),
    UNARY_ROWS(log, U(0.2, 3)),
    UNARY_ROWS(tanh, U(-3, 3)),
    UNARY_ROWS(sigmoid, U(-4, 4)),
    UNARY_ROWS(relu, AWAY0(0.1, 2)),
    {"hard_sigmoid [4, 5] slope 1.5", EW(hard_sigmoid), 1, {S2(4, 5)}, {U(-2, 2)}, ALL3, {.s = 1.5}},
    {"hard_sigmoid [] slope 0.5", EW(hard_sigmoid), 1, {SC}, {U(-2, 2)}, ALL3, {.s = 0.5}},
    {"hard_sigmoid [2, 3, 4] slope 3", EW(hard_sigmoid), 1, {S3(2, 3, 4)}, {U(-1, 1)}, ALL3, {.s = 3}},
    {"step_st [4, 5] threshold 0.25", EW(step_st), 1, {S2(4, 5)}, {U(-2, 2)}, ALL3,
     {.s = 0.25, .straight_through = true}},
    {"step_st [] threshold -1", EW(step_st), 1, {SC}, {U(-2, 2)}, ALL3, {.s = -1, .straight_through = true}},

    SELECT_ROW("[4, 5] [4, 5] [4, 5]", S2(4, 5), S2(4, 5), S2(4, 5)),
    SELECT_ROW("cond [4, 1]", S2(4, 1), S2(4, 5), S2(4, 5)),
    SELECT_ROW("cond [5]", S1(5), S2(4, 5), S2(4, 5)),
    SELECT_ROW("cond []", SC, S2(4, 5), S2(4, 5)),
    SELECT_ROW("a [5]", S2(4, 5), S1(5), S2(4, 5)),
    SELECT_ROW("a [4, 1]", S2(4, 5), S2(4, 1), S2(4, 5)),
    SELECT_ROW("a []", S2(4, 5), SC, S2(4, 5)),
    SELECT_ROW("b [5]", S2(4, 5), S2(4, 5), S1(5)),
    SELECT_ROW("b [4, 1]", S2(4, 5), S2(4, 5), S2(4, 1)),
    SELECT_ROW("b []", S2(4, 5), S2(4, 5), SC),
    SELECT_ROW("cond [1, 5], a [4, 1], b []", S2(1, 5), S2(4, 1), SC),
    SELECT_ROW("cond [3, 1, 1], a [4, 1], b [5]", S3(3, 1, 1), S2(4, 1), S1(5)),

    SUM_ROW("[3, 4, 5] all axes", S3(3, 4, 5), 0, false, 0),
    SUM_ROW("[3, 4, 5] all axes, keepdims", S3(3, 4, 5), 0, true, 0),
    SUM_ROW("[3, 4, 5] axes 0 1 2 given", S3(3, 4, 5), 3, false, 0, 1, 2),
    SUM_ROW("[3, 4, 5] axis 1", S3(3, 4, 5), 1, false, 1),
    SUM_ROW("[3, 4, 5] axis 1, keepdims", S3(3, 4, 5), 1, true, 1),
    SUM_ROW("[3, 4, 5] axis -1", S3(3, 4, 5), 1, false, -1),
    SUM_ROW("[3, 4, 5] axis -3, keepdims", S3(3, 4, 5), 1, true, -3),
    SUM_ROW("[3, 4, 5] axes 0 2, keepdims", S3(3, 4, 5), 2, true, 0, 2),
    SUM_ROW("[3, 4, 5] axes 2 0", S3(3, 4, 5), 2, false, 2, 0),
    SUM_ROW("[3, 4, 5] axes -3 -1", S3(3, 4, 5), 2, false, -3, -1),
    SUM_ROW("[3, 4, 5] axes -1 1, keepdims", S3(3, 4, 5), 2, true, -1, 1),
    SUM_ROW("[3, 1, 5] axis 1 (size 1)", S3(3, 1, 5), 1, false, 1),
    SUM_ROW("[6] axis 0", S1(6), 1, false, 0),
    SUM_ROW("[] all axes", SC, 0, false, 0),
    SUM_ROW("[] all axes, keepdims", SC, 0, true, 0),
    MEAN_ROW("[3, 4, 5] all axes", S3(3, 4, 5), 0, false, 0),
    MEAN_ROW("[3, 4, 5] all axes, keepdims", S3(3, 4, 5), 0, true, 0),
    MEAN_ROW("[3, 4, 5] axis 1, keepdims", S3(3, 4, 5), 1, true, 1),
    MEAN_ROW("[3, 4, 5] axis -2", S3(3, 4, 5), 1, false, -2),
    MEAN_ROW("[3, 4, 5] axes 0 -1", S3(3, 4, 5), 2, false, 0, -1),
    MEAN_ROW("[3, 4, 5] axes -1 0, keepdims", S3(3, 4, 5), 2, true, -1, 0),
    MEAN_ROW("[4, 6] axis 0", S2(4, 6), 1, false, 0),

    MATMUL_ROW("[4, 6] x [6, 3]", S2(4, 6), S2(6, 3), false, false, true, true),
    MATMUL_ROW("[1, 6] x [6, 1]", S2(1, 6), S2(6, 1), false, false, true, true),
    MATMUL_ROW("[5, 1] x [1, 4] (k = 1)", S2(5, 1), S2(1, 4), false, false, true, true),
    MATMUL_ROW("batched [2, 4, 6] x [2, 6, 3]", S3(2, 4, 6), S3(2, 6, 3), false, false, true, true),
    MATMUL_ROW("batch broadcast [2, 4, 6] x [6, 3]", S3(2, 4, 6), S2(6, 3), false, false, true, true),
    MATMUL_ROW("batch broadcast [4, 6] x [3, 6, 2]", S2(4, 6), S3(3, 6, 2), false, false, true, true),
    MATMUL_ROW("batch broadcast [1, 4, 6] x [3, 6, 2]", S3(1, 4, 6), S3(3, 6, 2), false, false, true, true),
    MATMUL_ROW("batch broadcast [2, 1, 4, 6] x [3, 6, 5]", S4(2, 1, 4, 6), S3(3, 6, 5), false, false, true, true),
    MATMUL_ROW("transposed a: [6, 4]^T x [6, 3]", S2(6, 4), S2(6, 3), true, false, true, true),
    MATMUL_ROW("transposed b: [4, 6] x [3, 6]^T", S2(4, 6), S2(3, 6), false, true, true, true),
    MATMUL_ROW("both transposed: [6, 4]^T x [3, 6]^T", S2(6, 4), S2(3, 6), true, true, true, true),
    MATMUL_ROW("transposed row: [6, 1]^T x [6, 3]", S2(6, 1), S2(6, 3), true, false, true, true),
    MATMUL_ROW("batched, transposed a: [2, 6, 4]^T x [2, 6, 3]", S3(2, 6, 4), S3(2, 6, 3), true, false, true, true),
    MATMUL_ROW("batch broadcast, transposed b: [2, 4, 6] x [3, 6]^T", S3(2, 4, 6), S2(3, 6), false, true, true, true),
    MATMUL_SWAP_ROW("non-BLAS a: [6, 4, 3] (0 2 swapped) x [6, 5]", S3(6, 4, 3), S2(6, 5), true, false),
    MATMUL_SWAP_ROW("non-BLAS b: [2, 4, 6] x [5, 6, 2] (0 2 swapped)", S3(2, 4, 6), S3(5, 6, 2), false, true),
    MATMUL_ROW("[4, 6] x [6, 3], only a", S2(4, 6), S2(6, 3), false, false, true, false),
    MATMUL_ROW("batch broadcast [2, 4, 6] x [6, 3], only b", S3(2, 4, 6), S2(6, 3), false, false, false, true),

    TRANSPOSE_ROW("[3, 4] (0, 1)", S2(3, 4), 0, 1),
    TRANSPOSE_ROW("[3, 4] (1, 0)", S2(3, 4), 1, 0),
    TRANSPOSE_ROW("[2, 3, 4] (0, 2)", S3(2, 3, 4), 0, 2),
    TRANSPOSE_ROW("[2, 3, 4] (-1, -2)", S3(2, 3, 4), -1, -2),
    TRANSPOSE_ROW("[2, 3, 4] (1, 1)", S3(2, 3, 4), 1, 1),
    TRANSPOSE_ROW("[3, 1, 4] (0, 1)", S3(3, 1, 4), 0, 1),

    RESHAPE_ROW("[3, 4] -> [2, -1, 3]", S2(3, 4), false, 0, 0, 3, 2, -1, 3),
    RESHAPE_ROW("[3, 4] -> [12]", S2(3, 4), false, 0, 0, 1, 12),
    RESHAPE_ROW("[2, 3, 4] -> [-1, 4]", S3(2, 3, 4), false, 0, 0, 2, -1, 4),
    RESHAPE_ROW("[1] -> []", S1(1), false, 0, 0, 0, 0),
    RESHAPE_ROW("[3, 4]^T -> [-1]", S2(3, 4), true, 0, 1, 1, -1),
    RESHAPE_ROW("[3, 4]^T -> [2, -1]", S2(3, 4), true, 0, 1, 2, 2, -1),
    RESHAPE_ROW("[2, 3, 4] (0 2 swapped) -> [6, -1]", S3(2, 3, 4), true, 0, 2, 2, 6, -1),
    RESHAPE_ROW("[2, 3, 4] (1 2 swapped) -> [-1, 2, 3]", S3(2, 3, 4), true, 1, 2, 3, -1, 2, 3),

    SLICE_ROW("[4, 6] axis 1, 2..4", S2(4, 6), 1, 2, 3),
    SLICE_ROW("[4, 6] axis 0, 1..2", S2(4, 6), 0, 1, 2),
    SLICE_ROW("[4, 6] axis -1, all", S2(4, 6), -1, 0, 6),
    SLICE_ROW("[4, 6] axis -2, last", S2(4, 6), -2, 3, 1),
    SLICE_ROW("[2, 3, 4] axis 1, 1..2", S3(2, 3, 4), 1, 1, 2),
    SLICE_ROW("[4, 6] axis 1, empty", S2(4, 6), 1, 3, 0),

    {"concat [2, 3] [4, 3] axis 0", build_concat2, REF_CONCAT, NULL, 2, {S2(2, 3), S2(4, 3)}, {U(-2, 2), U(-2, 2)},
     ALL3, {.ax0 = 0}},
    {"concat [2, 3] [2, 1] [2, 2] axis -1", build_concat3, REF_CONCAT, NULL, 3, {S2(2, 3), S2(2, 1), S2(2, 2)},
     {U(-2, 2), U(-2, 2), U(-2, 2)}, ALL3, {.ax0 = -1}},
    {"concat [2, 2, 3] [2, 1, 3] axis 1, second constant", build_concat2, REF_CONCAT, NULL, 2,
     {S3(2, 2, 3), S3(2, 1, 3)}, {U(-2, 2), U(-2, 2)}, {true, false, false}, {.ax0 = 1}},
    {"concat [3] [4] axis 0", build_concat2, REF_CONCAT, NULL, 2, {S1(3), S1(4)}, {U(-2, 2), U(-2, 2)},
     ALL3, {.ax0 = 0}},

    {"embedding [4, 3] by ids [2, 3]", build_embedding, REF_EMBEDDING, NULL, 2, {S2(4, 3), S2(2, 3)},
     {U(-2, 2), INDEX(4)}, {true, false, false}, NOARG},
    {"embedding [5, 2] by ids [7]", build_embedding, REF_EMBEDDING, NULL, 2, {S2(5, 2), S1(7)},
     {U(-2, 2), INDEX(5)}, {true, false, false}, NOARG},
    {"embedding [3, 4] by ids []", build_embedding, REF_EMBEDDING, NULL, 2, {S2(3, 4), SC}, {U(-2, 2), INDEX(3)},
     {true, false, false}, NOARG},

    {"cross_entropy [4, 5]", build_cross_entropy, REF_CROSS_ENTROPY, NULL, 2, {S2(4, 5), S1(4)},
     {U(-3, 3), INDEX(5)}, {true, false, false}, NOARG},
    {"cross_entropy [1, 3]", build_cross_entropy, REF_CROSS_ENTROPY, NULL, 2, {S2(1, 3), S1(1)},
     {U(-3, 3), INDEX(3)}, {true, false, false}, NOARG},
    {"cross_entropy [6, 2], large logits", build_cross_entropy, REF_CROSS_ENTROPY, NULL, 2, {S2(6, 2), S1(6)},
     {U(30, 40), INDEX(2)}, {true, false, false}, NOARG},

    /* Sizes for the device's paths: rows of 70 (16-byte loads with a tail),
     * broadcast columns and rows, long sums, many rows, views that
     * overlap. Checked against the reference (where the row has one) and
     * on CUDA against the CPU, not by central differences. */
    {"add [33, 70] + [70]", EW(add), 2, {S2(33, 70), S1(70)}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"add [33, 70] + [33, 1]", EW(add), 2, {S2(33, 70), S2(33, 1)}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"add [8, 9] + []", EW(add), 2, {S2(8, 9), SC}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"sub [1, 70] - [33, 70]", EW(sub), 2, {S2(1, 70), S2(33, 70)}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"mul [33, 70] * [33, 70]", EW(mul), 2, {S2(33, 70), S2(33, 70)}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG,
     .large = true},
    {"div [33, 70] / [70]", EW(div), 2, {S2(33, 70), S1(70)}, {U(-2, 2), U(0.5, 2)}, ALL3, NOARG, .large = true},
    {"pow [17, 40] ^ [17, 40]", EW(pow), 2, {S2(17, 40), S2(17, 40)}, {U(0.2, 3), U(-2, 2)}, ALL3, NOARG,
     .large = true},
    {"affine [33, 70] (-1.5, 0.25)", EW(affine), 1, {S2(33, 70)}, {U(-2, 2)}, ALL3, {.s = -1.5, .t = 0.25},
     .large = true},
    {"neg [33, 70]", EW(neg), 1, {S2(33, 70)}, {U(-2, 2)}, ALL3, NOARG, .large = true},
    {"exp [33, 70]", EW(exp), 1, {S2(33, 70)}, {U(-5, 5)}, ALL3, NOARG, .large = true},
    {"log [33, 70]", EW(log), 1, {S2(33, 70)}, {U(0.1, 5)}, ALL3, NOARG, .large = true},
    {"tanh [33, 70]", EW(tanh), 1, {S2(33, 70)}, {U(-6, 6)}, ALL3, NOARG, .large = true},
    {"sigmoid [33, 70]", EW(sigmoid), 1, {S2(33, 70)}, {U(-8, 8)}, ALL3, NOARG, .large = true},
    {"relu [33, 70]", EW(relu), 1, {S2(33, 70)}, {U(-2, 2)}, ALL3, NOARG, .large = true},
    {"hard_sigmoid [33, 70] slope 2.5", EW(hard_sigmoid), 1, {S2(33, 70)}, {U(-1, 1)}, ALL3, {.s = 2.5},
     .large = true},
    {"step_st [33, 70] threshold 0.1", EW(step_st), 1, {S2(33, 70)}, {U(-1, 1)}, ALL3,
     {.s = 0.1, .straight_through = true}, .large = true},
    {"select cond [33, 1], a [33, 70], b [70]", EW(select), 3, {S2(33, 1), S2(33, 70), S1(70)},
     {COND, U(-2, 2), U(-2, 2)}, {false, true, true}, NOARG, .large = true},
    {"sum [300, 513] all axes", build_sum, REF_SUM, NULL, 1, {S2(300, 513)}, {U(-1, 1)}, ALL3, {.n_axes = 0},
     .large = true},
    {"sum [300, 513] axis 0, keepdims", build_sum, REF_SUM, NULL, 1, {S2(300, 513)}, {U(-1, 1)}, ALL3,
     {.n_axes = 1, .axes = {0}, .keepdims = true}, .large = true},
    {"sum [20000, 7] axis 0, keepdims", build_sum, REF_SUM, NULL, 1, {S2(20000, 7)}, {U(-1, 1)}, ALL3,
     {.n_axes = 1, .axes = {0}, .keepdims = true}, .large = true},
    {"sum [0, 5] axis 1", build_sum, REF_SUM, NULL, 1, {S2(0, 5)}, {U(-1, 1)}, ALL3, {.n_axes = 1, .axes = {1}},
     .large = true},
    {"mean [300, 513] axis -1", build_mean, REF_MEAN, NULL, 1, {S2(300, 513)}, {U(-1, 1)}, ALL3,
     {.n_axes = 1, .axes = {-1}}, .large = true},
    {"add [20000, 7] + [7]", EW(add), 2, {S2(20000, 7), S1(7)}, {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"add [0, 5] + [5]", EW(add), 2, {S2(0, 5), S1(5)}, {U(-1, 1), U(-1, 1)}, ALL3, NOARG, .large = true},
    {"(a + b) + b, a [20000, 7], b [7]", build_add_twice, REF_NONE, NULL, 2, {S2(20000, 7), S1(7)},
     {U(-2, 2), U(-2, 2)}, ALL3, NOARG, .large = true},
    {"matmul [33, 40] x [40, 27]", build_matmul, REF_MATMUL, NULL, 2, {S2(33, 40), S2(40, 27)},
     {U(-1, 1), U(-1, 1)}, ALL3, NOARG, .large = true},
    {"matmul [40, 33]^T x [40, 27]", build_matmul, REF_MATMUL, NULL, 2, {S2(40, 33), S2(40, 27)},
     {U(-1, 1), U(-1, 1)}, ALL3, {.trans = {true, false}}, .large = true},
    {"matmul [4, 9, 8] x [8, 5]", build_matmul, REF_MATMUL, NULL, 2, {S3(4, 9, 8), S2(8, 5)}, {U(-1, 1), U(-1, 1)},
     ALL3, NOARG, .large = true},
    {"cross_entropy [8192, 12]", build_cross_entropy, REF_CROSS_ENTROPY, NULL, 2, {S2(8192, 12), S1(8192)},
     {U(-3, 3), INDEX(12)}, {true, false, false}, NOARG, .large = true},
    {"embedding [40, 37] by ids [20, 15]", build_embedding, REF_EMBEDDING, NULL, 2, {S2(40, 37), S2(20, 15)},
     {U(-1, 1), INDEX(25)}, {true, false, false}, NOARG, .large = true},
    {"embedding of columns 3..302 of [40, 320] by ids [20, 15]", build_embedding_sliced, REF_NONE, NULL, 2,
     {S2(40, 320), S2(20, 15)}, {U(-1, 1), INDEX(25)}, {true, false, false}, NOARG, .large = true},

    /* Compositions the device runs on paths of their own. */
    {"reshape [4, 9]^T -> [-1, 6]", build_transpose_reshape, REF_NONE, NULL, 1, {S2(4, 9)}, {U(-1, 1)}, ALL3,
     {.nd = 2, .shape = {-1, 6}}},
    {"concat of slices 2..6 and 0..1 of [16, 7]", build_slice_concat, REF_NONE, NULL, 1, {S2(16, 7)}, {U(-1, 1)},
     ALL3, NOARG},
    {"concat of 40 results [2, 3] along axis 0", build_concat_many, REF_NONE, NULL, 1, {S2(2, 3)}, {U(-1, 1)}, ALL3,
     NOARG},
    {"concat(tanh(x), tanh(x)) along axis 1", build_concat_repeated, REF_NONE, NULL, 1, {S2(3, 4)}, {U(-1, 1)}, ALL3,
     NOARG},
    {"concat(concat(y, x1), y * y), y = tanh(x0)", build_concat_accumulates, REF_NONE, NULL, 2, {S2(2, 3), S2(2, 3)},
     {U(-1, 1), U(-1, 1)}, ALL3, NOARG},
    {"mul of overlapping slices of [300]", build_mul_overlap, REF_NONE, NULL, 1, {S1(300)}, {U(-2, 2)}, ALL3, NOARG},
    {"cross_entropy of columns 1..10 of [33, 12]", build_cross_entropy_sliced, REF_NONE, NULL, 2, {S2(33, 12), S1(33)},
     {U(-3, 3), INDEX(10)}, {true, false, false}, NOARG},
    {"c-update on overlapping slices, store", build_cupdate_overlap, REF_NONE, NULL, 3, {S1(300), S1(200), S1(200)},
     {U(-2, 2), U(-2, 2), U(-2, 2)}, ALL3, {.policy = DC_PARTIALS_STORE}},
    {"c-update on overlapping slices, recompute", build_cupdate_overlap, REF_NONE, NULL, 3,
     {S1(300), S1(200), S1(200)}, {U(-2, 2), U(-2, 2), U(-2, 2)}, ALL3, {.policy = DC_PARTIALS_RECOMPUTE}},
};

const int n_cases = (int)(sizeof cases / sizeof cases[0]);

/* ---- values ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1.0p-53; }

int64_t shp_numel(const shp *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->nd; ++d)
        n *= s->d[d];
    return n;
}

const char *shp_str(const shp *s, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < s->nd && at < size; ++d)
        at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)s->d[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

shp tensor_shp(const dc_tensor *t)
{
    shp s = {dc_tensor_ndim(t), {0}};
    for (int d = 0; d < s.nd; ++d)
        s.d[d] = dc_tensor_shape(t)[d];
    return s;
}

bool shp_equal(const shp *a, const shp *b)
{
    if (a->nd != b->nd)
        return false;
    for (int d = 0; d < a->nd; ++d)
        if (a->d[d] != b->d[d])
            return false;
    return true;
}

/* Values of input i of case c: deterministic, and exactly representable in
 * float so that float32 and float64 runs see the same inputs. */
double *case_values(int c, int i)
{
    const op_case *k = &cases[c];
    const int64_t n = shp_numel(&k->shape[i]);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    uint64_t s = 0x5EEDull * (uint64_t)(c + 1) + 7919ull * (uint64_t)i;
    const range r = k->range[i];
    for (int64_t e = 0; e < n; ++e) {
        double x;
        if (r.kind == FILL_COND) {
            /* Both branches show up even in short tensors. */
            x = n > 1 && e < 2 ? (double)e : (double)(splitmix(&s) & 1);
        } else if (r.kind == FILL_INDEX) {
            x = (double)(splitmix(&s) % (uint64_t)r.hi);
        } else {
            x = r.lo + (r.hi - r.lo) * uniform01(&s);
            if (r.kind == FILL_AWAY0 && (splitmix(&s) & 1))
                x = -x;
        }
        v[e] = (double)(float)x;
    }
    return v;
}

void make_inputs(dc_ctx *ctx, int c, dc_dtype dtype, bool with_grads, case_inputs *in)
{
    const op_case *k = &cases[c];
    memset(in, 0, sizeof *in);
    for (int i = 0; i < k->n_in; ++i) {
        in->v[i] = case_values(c, i);
        in->t[i] = test_tensor(ctx, dtype, k->shape[i].nd, k->shape[i].d, in->v[i]);
        if (with_grads && k->grad[i])
            TEST_OK(ctx, dc_tensor_set_requires_grad(in->t[i], true));
    }
}

void free_inputs(case_inputs *in)
{
    for (int i = 0; i < 3; ++i) {
        dc_tensor_free(in->t[i]);
        free(in->v[i]);
    }
}

/* ---- references in double ---- */

/* The broadcast of shapes known to broadcast. */
shp broadcast_of(int n, const shp *in)
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

/* Flat index into t, broadcast to the shape `it` (aligned at the end), of
 * the element at coordinates c of `it`; c may go on past it->nd axes. */
static int64_t bcast_index(const shp *t, const shp *it, const int64_t *c)
{
    int64_t idx = 0, mul = 1;
    for (int td = t->nd - 1; td >= 0; --td) {
        const int d = td + (it->nd - t->nd);
        if (t->d[td] != 1)
            idx += c[d] * mul;
        mul *= t->d[td];
    }
    return idx;
}

void coords_of(const shp *s, int64_t e, int64_t *c)
{
    for (int d = s->nd - 1; d >= 0; --d) {
        c[d] = e % s->d[d];
        e /= s->d[d];
    }
}

int64_t flat_of(const shp *s, const int64_t *c)
{
    int64_t e = 0;
    for (int d = 0; d < s->nd; ++d)
        e = e * s->d[d] + c[d];
    return e;
}

static shp swapped(const shp *s, int a0, int a1)
{
    shp t = *s;
    t.d[a0] = s->d[a1];
    t.d[a1] = s->d[a0];
    return t;
}

/* x (shape s) with axes a0 and a1 swapped, into shape *ts. */
static double *transpose_values(const shp *s, const double *x, int a0, int a1, shp *ts)
{
    *ts = swapped(s, a0, a1);
    const int64_t n = shp_numel(s);
    double *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    assert_non_null(t);
    for (int64_t e = 0; e < n; ++e) {
        int64_t c[DC_MAX_DIMS];
        coords_of(ts, e, c);
        const int64_t tmp = c[a0];
        c[a0] = c[a1];
        c[a1] = tmp;
        t[e] = x[flat_of(s, c)];
    }
    return t;
}

int norm_axis(int a, int nd) { return a < 0 ? a + nd : a; }

void compute_reference(const op_case *k, double *const *v, reference *r)
{
    r->from_library = false;
    const op_arg *a = &k->arg;
    switch (k->ref) {
    case REF_EW: {
        r->shape = broadcast_of(k->n_in, k->shape);
        const int64_t n = shp_numel(&r->shape);
        r->y = malloc((size_t)(n ? n : 1) * sizeof(double));
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t e = 0; e < n; ++e) {
            int64_t c[DC_MAX_DIMS];
            coords_of(&r->shape, e, c);
            double args[3];
            for (int i = 0; i < k->n_in; ++i)
                args[i] = v[i][bcast_index(&k->shape[i], &r->shape, c)];
            r->y[e] = k->ew(args, a);
            /* a sum or difference rounds relative to its terms, the rest
             * relative to the result */
            r->mag[e] = (k->ew == ew_add || k->ew == ew_sub) ? fabs(args[0]) + fabs(args[1])
                        : k->ew == ew_affine                 ? fabs(args[0] * a->s) + fabs(a->t)
                        : k->ew == ew_hard_sigmoid           ? (fabs(args[0] * a->s) + 1) / 2
                                                             : fabs(r->y[e]);
        }
        break;
    }
    case REF_SUM:
    case REF_MEAN: {
        const shp *xs = &k->shape[0];
        bool red[DC_MAX_DIMS] = {false};
        for (int i = 0; i < a->n_axes; ++i)
            red[norm_axis(a->axes[i], xs->nd)] = true;
        if (a->n_axes == 0)
            for (int d = 0; d < xs->nd; ++d)
                red[d] = true;
        shp keep = *xs;
        int64_t count = 1;
        r->shape.nd = 0;
        for (int d = 0; d < xs->nd; ++d) {
            if (red[d]) {
                keep.d[d] = 1;
                count *= xs->d[d];
            }
            if (!red[d] || a->keepdims)
                r->shape.d[r->shape.nd++] = keep.d[d];
        }
        const int64_t n = shp_numel(&keep);
        r->y = calloc((size_t)(n ? n : 1), sizeof(double));
        r->mag = calloc((size_t)(n ? n : 1), sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t e = 0; e < shp_numel(xs); ++e) {
            int64_t c[DC_MAX_DIMS];
            coords_of(xs, e, c);
            for (int d = 0; d < xs->nd; ++d)
                if (red[d])
                    c[d] = 0;
            const int64_t o = flat_of(&keep, c);
            r->y[o] += v[0][e];
            r->mag[o] += fabs(v[0][e]);
        }
        if (k->ref == REF_MEAN)
            for (int64_t o = 0; o < n; ++o) {
                r->y[o] /= (double)count;
                r->mag[o] /= (double)count;
            }
        break;
    }
    case REF_MATMUL: {
        /* The logical operands, after the op's transposes. */
        shp ls[2];
        double *lv[2];
        for (int i = 0; i < 2; ++i) {
            const shp *s = &k->shape[i];
            if (a->trans[i]) {
                lv[i] = transpose_values(s, v[i], s->nd - 1, s->nd - 2, &ls[i]);
            } else if (a->swap02[i]) {
                lv[i] = transpose_values(s, v[i], 0, 2, &ls[i]);
            } else {
                ls[i] = *s;
                lv[i] = v[i];
            }
        }
        const int64_t m = ls[0].d[ls[0].nd - 2], kk = ls[0].d[ls[0].nd - 1], nn = ls[1].d[ls[1].nd - 1];
        shp batch[2] = {{ls[0].nd - 2, {0}}, {ls[1].nd - 2, {0}}};
        for (int i = 0; i < 2; ++i)
            memcpy(batch[i].d, ls[i].d, (size_t)batch[i].nd * sizeof(int64_t));
        const shp bs = broadcast_of(2, batch);
        r->shape = bs;
        r->shape.d[r->shape.nd++] = m;
        r->shape.d[r->shape.nd++] = nn;
        const int64_t n = shp_numel(&r->shape);
        r->y = calloc((size_t)(n ? n : 1), sizeof(double));
        r->mag = calloc((size_t)(n ? n : 1), sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t e = 0; e < n; ++e) {
            int64_t c[DC_MAX_DIMS];
            coords_of(&r->shape, e, c);
            const int64_t ba = bcast_index(&batch[0], &bs, c), bb = bcast_index(&batch[1], &bs, c);
            const int64_t i = c[bs.nd], j = c[bs.nd + 1];
            for (int64_t q = 0; q < kk; ++q) {
                const double p = lv[0][(ba * m + i) * kk + q] * lv[1][(bb * kk + q) * nn + j];
                r->y[e] += p;
                r->mag[e] += fabs(p);
            }
        }
        for (int i = 0; i < 2; ++i)
            if (a->trans[i] || a->swap02[i])
                free(lv[i]);
        break;
    }
    case REF_SLICE: {
        const shp *xs = &k->shape[0];
        const int ax = norm_axis(a->ax0, xs->nd);
        r->shape = *xs;
        r->shape.d[ax] = a->len;
        const int64_t n = shp_numel(&r->shape);
        r->y = malloc((size_t)(n ? n : 1) * sizeof(double));
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t e = 0; e < n; ++e) {
            int64_t c[DC_MAX_DIMS];
            coords_of(&r->shape, e, c);
            c[ax] += a->start;
            r->y[e] = v[0][flat_of(xs, c)];
            r->mag[e] = fabs(r->y[e]);
        }
        break;
    }
    case REF_CONCAT: {
        const int ax = norm_axis(a->ax0, k->shape[0].nd);
        r->shape = k->shape[0];
        r->shape.d[ax] = 0;
        for (int i = 0; i < k->n_in; ++i)
            r->shape.d[ax] += k->shape[i].d[ax];
        const int64_t n = shp_numel(&r->shape);
        r->y = malloc((size_t)(n ? n : 1) * sizeof(double));
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t e = 0; e < n; ++e) {
            int64_t c[DC_MAX_DIMS];
            coords_of(&r->shape, e, c);
            int i = 0;
            while (c[ax] >= k->shape[i].d[ax]) {
                c[ax] -= k->shape[i].d[ax];
                ++i;
            }
            r->y[e] = v[i][flat_of(&k->shape[i], c)];
            r->mag[e] = fabs(r->y[e]);
        }
        break;
    }
    case REF_EMBEDDING: {
        const int64_t width = k->shape[0].d[1], n_ids = shp_numel(&k->shape[1]);
        r->shape = k->shape[1];
        r->shape.d[r->shape.nd++] = width;
        const int64_t n = n_ids * width;
        r->y = malloc((size_t)(n ? n : 1) * sizeof(double));
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t i = 0; i < n_ids; ++i)
            for (int64_t j = 0; j < width; ++j) {
                r->y[i * width + j] = v[0][(int64_t)v[1][i] * width + j];
                r->mag[i * width + j] = fabs(r->y[i * width + j]);
            }
        break;
    }
    case REF_NONE: {
        /* No reference of its own: the library's float64 output stands in
         * (from_library), so that the float32 run and the device can be
         * compared with it; central differences check its gradient. */
        dc_ctx *ctx = test_cpu_ctx();
        dc_tensor *x[3] = {NULL, NULL, NULL};
        for (int i = 0; i < k->n_in; ++i)
            x[i] = test_tensor(ctx, DC_F64, k->shape[i].nd, k->shape[i].d, v[i]);
        dc_tape *tape = dc_tape_new(ctx);
        dc_tensor *y = k->build(tape, x, a);
        if (!y)
            fail_msg("%s: the op returned NULL: %s", k->name, dc_last_error(ctx));
        r->shape = tensor_shp(y);
        r->from_library = true;
        const int64_t n = shp_numel(&r->shape);
        r->y = test_values(y);
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_non_null(r->mag);
        /* the terms behind an output are unknown here: every output rounds
         * relative to the largest (compositions whose outputs cancel) */
        double largest = 0;
        for (int64_t e = 0; e < n; ++e)
            largest = fmax(largest, fabs(r->y[e]));
        for (int64_t e = 0; e < n; ++e)
            r->mag[e] = largest;
        dc_tape_free(tape);
        for (int i = 0; i < k->n_in; ++i)
            dc_tensor_free(x[i]);
        dc_ctx_free(ctx);
        break;
    }
    case REF_CROSS_ENTROPY: {
        const int64_t rows = k->shape[0].d[0], classes = k->shape[0].d[1];
        r->shape.nd = 0;
        r->y = calloc(1, sizeof(double));
        r->mag = calloc(1, sizeof(double));
        assert_true(r->y && r->mag);
        for (int64_t i = 0; i < rows; ++i) {
            const double *l = v[0] + i * classes;
            double m = l[0], sum = 0;
            for (int64_t q = 1; q < classes; ++q)
                m = fmax(m, l[q]);
            for (int64_t q = 0; q < classes; ++q)
                sum += exp(l[q] - m);
            const double lse = m + log(sum), target = l[(int64_t)v[1][i]];
            r->y[0] += (lse - target) / (double)rows;
            r->mag[0] += (fabs(lse) + fabs(target)) / (double)rows;
        }
        break;
    }
    case REF_TRANSPOSE:
    case REF_RESHAPE: {
        const shp *xs = &k->shape[0];
        const int64_t n = shp_numel(xs);
        if (k->ref == REF_TRANSPOSE || a->pre_transpose) {
            r->y = transpose_values(xs, v[0], norm_axis(a->ax0, xs->nd), norm_axis(a->ax1, xs->nd), &r->shape);
        } else {
            r->y = malloc((size_t)(n ? n : 1) * sizeof(double));
            assert_non_null(r->y);
            memcpy(r->y, v[0], (size_t)n * sizeof(double));
        }
        if (k->ref == REF_RESHAPE) {
            r->shape.nd = a->nd;
            int64_t known = 1;
            int infer = -1;
            for (int d = 0; d < a->nd; ++d) {
                r->shape.d[d] = a->shape[d];
                if (a->shape[d] == -1)
                    infer = d;
                else
                    known *= a->shape[d];
            }
            if (infer >= 0)
                r->shape.d[infer] = n / known;
        }
        r->mag = malloc((size_t)(n ? n : 1) * sizeof(double));
        assert_non_null(r->mag);
        /* the terms behind an output are unknown here: every output rounds
         * relative to the largest (compositions whose outputs cancel) */
        double largest = 0;
        for (int64_t e = 0; e < n; ++e)
            largest = fmax(largest, fabs(r->y[e]));
        for (int64_t e = 0; e < n; ++e)
            r->mag[e] = largest;
        break;
    }
    }
}

void free_reference(reference *r)
{
    free(r->y);
    free(r->mag);
}

const char *op_cases_missing_op(void)
{
    static const struct {
        build_fn build;
        const char *name;
    } every[] = {{build_add, "add"}, {build_sub, "sub"}, {build_mul, "mul"}, {build_div, "div"},
                 {build_pow, "pow"}, {build_affine, "affine"}, {build_neg, "neg"}, {build_exp, "exp"},
                 {build_log, "log"}, {build_tanh, "tanh"}, {build_sigmoid, "sigmoid"}, {build_relu, "relu"},
                 {build_hard_sigmoid, "hard_sigmoid"}, {build_step_st, "step_st"}, {build_select, "select"},
                 {build_sum, "sum"}, {build_mean, "mean"}, {build_matmul, "matmul"},
                 {build_transpose, "transpose"}, {build_reshape, "reshape"}, {build_slice, "slice"},
                 {build_concat2, "concat"}, {build_embedding, "embedding"},
                 {build_cross_entropy, "cross_entropy"}, {build_cupdate_overlap, "broadcast_policy"}};
    for (size_t f = 0; f < sizeof every / sizeof every[0]; ++f) {
        int rows = 0;
        for (int c = 0; c < n_cases; ++c)
            rows += cases[c].build == every[f].build;
        if (rows == 0)
            return every[f].name;
    }
    return NULL;
}
