/* The per-element math of the reductions (include/dualcast/reduce.h):
 * product, maximum, minimum and log-sum-exp over axes, and the segment
 * reductions' sum, product, maximum and minimum, written once for the CPU
 * (src/ops/reduce_cpu.c) and CUDA (src/cuda/reduce.cu).
 *
 * A reduction walks the elements of each output in a fixed order, stepping
 * a state; CUDA's tree combines two states, the earlier first. What the
 * forward leaves in the state is what the adjoint reads back, per output:
 * - prod: the product of the nonzero elements (nz) and the number of zeros
 *   (aux), so that the adjoint never divides by zero;
 * - max and min: the winner's position (aux): the first (lowest position)
 *   among the elements equal to the result, NaN beating every number (the
 *   first NaN), -0.0 and +0.0 equal (the first of them wins, its sign kept);
 * - log-sum-exp: the maximum (acc, then aux its position) of a first walk,
 *   and the sum of exp(x - maximum) of a second; nz the rounding of the
 *   result (lse_error), which the adjoint's softmax takes off.
 *
 * Included after dual/scalar_math.h and broadcast/pp.h with DC_S (float or
 * double) and DC_SFX (f32 or f64) defined, once per scalar type (no
 * include guard). */

#include "reduce_kinds.h"

#define DC_RF(name) DC_PP_CAT(DC_PP_CAT(dc_rf_, name), DC_PP_CAT(_, DC_SFX))
#define DC_RF_MATH(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, DC_SFX))

/* What a state accumulates in: double, for float32 elements too. A float32
 * product of 10^6 factors near 1 rounded at every factor drifts by about
 * 10^-4; accumulated in double and rounded once it is exact to float32's
 * rounding. Maxima and minima hold one of the elements (exact in double). */
typedef double DC_RF(wide);

/* The running reduction of one output. */
typedef struct DC_RF(state) {
    DC_RF(wide) acc; /* the sum, the product, the extremum (log-sum-exp: the maximum) */
    DC_RF(wide) nz;  /* prod: the product of the nonzero elements */
    int64_t aux;     /* prod: the zeros met; max, min, log-sum-exp: the winner's position, -1 before one */
} DC_RF(state);

/* The state before any element: the neutral element, no winner. */
DC_INLINE DC_HD DC_RF(state) DC_RF(init)(int kind)
{
    DC_RF(state) s;
    s.acc = kind == DC_RK_SUM    ? 0.0
            : kind == DC_RK_PROD ? 1.0
            : kind == DC_RK_MIN  ? (DC_RF(wide))INFINITY
                                 : (DC_RF(wide))-INFINITY;
    s.nz = 1.0;
    s.aux = kind == DC_RK_SUM || kind == DC_RK_PROD ? 0 : -1;
    return s;
}

/* Whether v at position pv takes the win from w at position pw (pw < 0: no
 * winner yet): a NaN beats any number, a number beats the other by its
 * order, and between equals (or two NaNs) the lower position wins. */
DC_INLINE DC_HD bool DC_RF(beats)(int kind, DC_RF(wide) v, int64_t pv, DC_RF(wide) w, int64_t pw)
{
    if (pv < 0)
        return false;
    if (pw < 0)
        return true;
    const bool v_nan = v != v, w_nan = w != w;
    if (w_nan || v_nan)
        return v_nan && (!w_nan || pv < pw);
    if (v == w)
        return pv < pw;
    return kind == DC_RK_MIN ? v < w : v > w;
}

/* One more element, v at position pos, into the state (log-sum-exp: its
 * first walk, the maximum). */
DC_INLINE DC_HD void DC_RF(step)(int kind, DC_RF(state) * s, DC_S v, int64_t pos)
{
    if (kind == DC_RK_SUM) {
        s->acc += v;
    } else if (kind == DC_RK_PROD) {
        s->acc *= v;
        if (v == 0)
            s->aux++;
        else
            s->nz *= v;
    } else if (DC_RF(beats)(kind, v, pos, s->acc, s->aux)) {
        s->acc = v;
        s->aux = pos;
    }
}

/* Two states of consecutive runs of elements, a's before b's, as one. */
DC_INLINE DC_HD DC_RF(state) DC_RF(combine)(int kind, DC_RF(state) a, DC_RF(state) b)
{
    if (kind == DC_RK_SUM) {
        a.acc += b.acc;
    } else if (kind == DC_RK_PROD) {
        a.acc *= b.acc;
        a.nz *= b.nz;
        a.aux += b.aux;
    } else if (DC_RF(beats)(kind, b.acc, b.aux, a.acc, a.aux)) {
        a = b;
    }
    return a;
}

/* A term of log-sum-exp's second walk: exp(v - m), m the maximum (finite:
 * the walk is skipped otherwise). */
DC_INLINE DC_HD DC_S DC_RF(lse_term)(DC_S v, DC_S m) { return DC_RF_MATH(exp)(v - m); }

/* log-sum-exp from the maximum m and the sum of the terms: m where it is
 * NaN or infinite (an empty run, every element -inf, some +inf), else
 * m + log(sum). */
DC_INLINE DC_HD DC_S DC_RF(lse_finish)(DC_S m, DC_S sum)
{
    return m != m || m == (DC_S)INFINITY || m == (DC_S)-INFINITY ? m : m + DC_RF_MATH(log)(sum);
}

/* Whether log-sum-exp's second walk is needed for maximum m. */
DC_INLINE DC_HD bool DC_RF(lse_sums)(DC_S m) { return m == m && m != (DC_S)INFINITY && m != (DC_S)-INFINITY; }

/* log-sum-exp's rounding: (m + log(sum)) - y for its result y =
 * lse_finish(m, sum), in wide (0 where the second walk is not needed).
 * Where |m| is large against log(sum), y rounds to within an ulp of m and
 * exp(x - y) is no softmax: at two elements of 1e38 in float32 it gives 1
 * for each, not 1/2. The adjoint takes x - y less this error instead
 * (lse_grad_term), the forward leaving it in the output's nz. */
DC_INLINE DC_HD DC_S DC_RF(lse_error)(DC_S m, DC_S sum, DC_S y)
{
    if (!DC_RF(lse_sums)(m))
        return (DC_S)0;
    return (DC_S)(((DC_RF(wide))m - (DC_RF(wide))y) + log((DC_RF(wide))sum));
}

/* The softmax at v of an output whose log-sum-exp is y, rounded by e
 * (lse_error): exp(v - (y + e)), v - y exact where it matters (v and y
 * within a factor of two of each other; elsewhere the term is tiny next
 * to the rounding of the largest). */
DC_INLINE DC_HD DC_S DC_RF(lse_grad_term)(DC_S v, DC_S y, DC_S e) { return DC_RF_MATH(exp)((v - y) - e); }

/* The gradient of element v at position pos of an output whose result is
 * y, whose adjoint is gy, and whose forward left nz and aux (see above). */
DC_INLINE DC_HD DC_S DC_RF(grad)(int kind, DC_S v, int64_t pos, DC_S y, DC_S nz, int64_t aux, DC_S gy)
{
    switch (kind) {
    case DC_RK_SUM:
        return gy;
    case DC_RK_PROD: /* the product of the others, never dividing by zero */
        if (aux == 0)
            return gy * (nz / v);
        return aux == 1 && v == 0 ? gy * nz : (DC_S)0;
    case DC_RK_MAX:
    case DC_RK_MIN:
        return pos == aux ? gy : (DC_S)0;
    default: /* log-sum-exp */
        if (y == (DC_S)-INFINITY)
            return (DC_S)0;
        if (y == (DC_S)INFINITY)
            return v == (DC_S)INFINITY ? (DC_S)NAN : (DC_S)0;
        return gy * DC_RF(lse_grad_term)(v, y, nz);
    }
}

#undef DC_RF_MATH
