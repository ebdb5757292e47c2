/* The formulas of the prefix scans (dc_op_scan), written once for the CPU
 * (src/ops/scan.c) and CUDA (src/cuda/scan.cu). Every scan computes in
 * double (a float32 input converted exactly), whatever its dtype.
 *
 * Forward: y_i = y_{i-1} (op) a_i from op's neutral element. Adjoint, the
 * reverse linear recurrence of the scan:
 *     lambda_i = c_i + k_i * lambda_{i+1},   abar_i = s_i * lambda_i,
 * with c_i the output's adjoint at i (exclusive scans: at i + 1, the output
 * shifted), k_i = d y_{i+1} / d y_i (0 at the last position) and
 * s_i = d y_i / d a_i:
 *     sum:      k = 1,        s = 1;
 *     prod:     k = a_{i+1},  s = y_{i-1} (the product before i; 1 at i = 0;
 *               0 where a zero comes before i: dc_scan_zero_safe_output);
 *     max, min: k = 0 where a_{i+1} takes over from y_i, else 1;
 *               s = 1 where a_i takes over (i = 0 always), else 0.
 * a_i takes over (becomes the prefix's winner) where the prefix before it is
 * not NaN and a_i is NaN or strictly beyond it, so the winner is the first
 * element equal to the result, or the first NaN. Every product of the
 * adjoint is zero-safe (dc_scan_mul): no division, and a zero factor gives
 * zero even against an infinite or NaN one. A run of positions composes to
 * one affine map lambda_start = C + M * lambda_end (dc_scan_affine), which
 * is associative: chunks of a line are summarized alone and chained after.
 *
 * Included after dual/hd.h; the part that reads elements is included once
 * per scalar type with DC_S (float or double) and DC_SFX (f32 or f64)
 * defined, as model_formulas.h is. */

#ifndef DC_OPS_SCAN_FORMULAS_COMMON
#define DC_OPS_SCAN_FORMULAS_COMMON

#include <dualcast/reduce.h>

/* op's neutral element: 0, 1, -inf, +inf */
DC_INLINE DC_HD double dc_scan_neutral(int op)
{
    return op == DC_REDUCE_SUM ? 0.0 : op == DC_REDUCE_PROD ? 1.0 : op == DC_REDUCE_MAX ? -INFINITY : INFINITY;
}

/* Whether v, coming after a prefix whose result is prev, becomes the
 * prefix's winner (max and min). */
DC_INLINE DC_HD bool dc_scan_takes_over(int op, double prev, double v)
{
    return prev == prev && (v != v || (op == DC_REDUCE_MAX ? v > prev : v < prev));
}

/* The result of an earlier part (acc) followed by a later one (v). */
DC_INLINE DC_HD double dc_scan_combine(int op, double acc, double v)
{
    switch (op) {
    case DC_REDUCE_SUM:
        return acc + v;
    case DC_REDUCE_PROD:
        return acc * v;
    default:
        return dc_scan_takes_over(op, acc, v) ? v : acc;
    }
}

/* k * lambda, zero where either is zero (even against an infinite or NaN
 * other), every zero +0: a product that underflows to -0 is made +0 too,
 * so that dc_scan_mul_nonzero gives the same bits. */
DC_INLINE DC_HD double dc_scan_mul(double k, double lambda)
{
    return k == 0 || lambda == 0 ? 0.0 : k * lambda + 0.0;
}

/* dc_scan_mul where k is finite and not zero, without a test: k * lambda,
 * a zero made +0, which is dc_scan_mul's value bit for bit (for lambda
 * zero, and where k * lambda underflows). The products' adjoint takes it
 * over pieces where every factor is finite and not zero
 * (dc_scan_prod_factor_ok), so that the pieces' lanes run without branches:
 * which pieces do, and which pieces share lanes, changes no bit. */
DC_INLINE DC_HD double dc_scan_mul_nonzero(double k, double lambda) { return k * lambda + 0.0; }

/* Whether v, as a factor k or s of the products' adjoint, lets
 * dc_scan_mul_nonzero stand for dc_scan_mul: finite and not zero. */
DC_INLINE DC_HD bool dc_scan_prod_factor_ok(double v) { return (v != 0.0) & (v - v == 0.0); }

/* Whether no element of a run of positions of a maximum or minimum takes
 * over, from the inclusive results before the run (first) and at its last
 * position (last): the result changes only where an element takes over,
 * and then moves strictly beyond or to NaN, where it stays. In such a run
 * every s is 0 and every k 1: the adjoint is the sum's. */
DC_INLINE DC_HD bool dc_scan_run_quiet(int op, double first, double last)
{
    return !dc_scan_takes_over(op, first, last);
}

/* The scan's output at position p of a line as the products' adjoint
 * takes it for s, where the line's first zero element is at `zero` (len
 * or beyond where it has none): 0 where s's product runs over that zero,
 * else y. s is a zero-safe product like the others: the product before a
 * position holding a zero is 0 even where y, the plain product, is NaN (a
 * zero times an infinity). An inclusive scan's s at i is y at p = i - 1,
 * over positions up to p; an exclusive one's is y at p = i, over positions
 * before p. */
DC_INLINE DC_HD double dc_scan_zero_safe_output(bool exclusive, int64_t zero, int64_t p, double y)
{
    return (exclusive ? zero < p : zero <= p) ? 0.0 : y;
}

/* lambda_start = c + m * lambda_end over a run of positions. */
typedef struct dc_scan_affine {
    double c, m;
} dc_scan_affine;

/* The map that does nothing (an empty run). */
DC_INLINE DC_HD dc_scan_affine dc_scan_affine_identity(void)
{
    dc_scan_affine a = {0.0, 1.0};
    return a;
}

/* The run `left` followed by the run `right` (the adjoint goes from right to
 * left: right's map applies first). */
DC_INLINE DC_HD dc_scan_affine dc_scan_affine_then(dc_scan_affine right, dc_scan_affine left)
{
    dc_scan_affine a = {left.c + dc_scan_mul(left.m, right.c), dc_scan_mul(left.m, right.m)};
    return a;
}

/* The terms of one position of the adjoint's recurrence. */
typedef struct dc_scan_terms {
    double c, k, s;
} dc_scan_terms;

/* The values around position i that its terms read: the output's adjoint
 * at i and i + 1, the element at i and i + 1, and the scan's output at
 * i - 1, i and i + 1. Those beyond the line (before its first position,
 * after its last) are not read. */
typedef struct dc_scan_window {
    double g, g_next, x, x_next, y_prev, y, y_next;
} dc_scan_window;

/* The terms of a position from its window; first and last: whether it
 * begins or ends its line. */
DC_INLINE DC_HD dc_scan_terms dc_scan_terms_of(int op, bool exclusive, bool first, bool last, dc_scan_window w)
{
    dc_scan_terms t;
    /* the output's adjoint at this position of the inclusive scan */
    t.c = exclusive ? (last ? 0.0 : w.g_next) : w.g;
    if (op == DC_REDUCE_SUM) {
        t.k = last ? 0.0 : 1.0;
        t.s = 1.0;
        return t;
    }
    /* the inclusive result before this position, and before the next */
    const double prev = first ? dc_scan_neutral(op) : exclusive ? w.y : w.y_prev;
    const double next_a = last ? 0.0 : w.x_next;
    if (op == DC_REDUCE_PROD) {
        t.k = next_a;
        t.s = prev;
        return t;
    }
    const double next_prev = last ? 0.0 : exclusive ? w.y_next : w.y;
    t.k = last || dc_scan_takes_over(op, next_prev, next_a) ? 0.0 : 1.0;
    t.s = first || dc_scan_takes_over(op, prev, w.x) ? 1.0 : 0.0;
    return t;
}

#endif /* DC_OPS_SCAN_FORMULAS_COMMON */

#define DC_SCF(name) DC_PP_CAT(DC_PP_CAT(dc_scan_, name), DC_PP_CAT(_, DC_SFX))

/* The terms of position i of a line, which it begins (first) or ends
 * (last) or neither: x, y (the scan's output) and g (its adjoint) read at
 * element i * stride, each value only where the op needs it. */
DC_INLINE DC_HD dc_scan_terms DC_SCF(terms_at)(int op, bool exclusive, bool first, bool last, const DC_S *x,
                                               const DC_S *y, const DC_S *g, int64_t i, int64_t stride)
{
    dc_scan_window w = {0, 0, 0, 0, 0, 0, 0};
    if (exclusive)
        w.g_next = last ? 0.0 : (double)g[(i + 1) * stride];
    else
        w.g = (double)g[i * stride];
    if (op != DC_REDUCE_SUM) {
        w.x_next = last ? 0.0 : (double)x[(i + 1) * stride];
        if (exclusive || op != DC_REDUCE_PROD) /* prod: only the inclusive's before-value */
            w.y = (double)y[i * stride];
        if (!exclusive && !first)
            w.y_prev = (double)y[(i - 1) * stride];
        if (op != DC_REDUCE_PROD) {
            w.x = (double)x[i * stride];
            if (exclusive && !last)
                w.y_next = (double)y[(i + 1) * stride];
        }
    }
    return dc_scan_terms_of(op, exclusive, first, last, w);
}

/* The terms of position i of a line of len elements. */
DC_INLINE DC_HD dc_scan_terms DC_SCF(terms)(int op, bool exclusive, const DC_S *x, const DC_S *y, const DC_S *g,
                                            int64_t i, int64_t len, int64_t stride)
{
    return DC_SCF(terms_at)(op, exclusive, i == 0, i + 1 == len, x, y, g, i, stride);
}

/* The inclusive result at position i (i >= 0) of a maximum or minimum from
 * the scan's output y: exclusive scans store it at i + 1, and the one
 * before at i, which combined with x_i gives it exactly (the results are
 * elements). */
DC_INLINE DC_HD double DC_SCF(inclusive_at)(int op, bool exclusive, const DC_S *x, const DC_S *y, int64_t i,
                                            int64_t stride)
{
    return exclusive ? dc_scan_combine(op, (double)y[i * stride], (double)x[i * stride]) : (double)y[i * stride];
}

#undef DC_SCF
