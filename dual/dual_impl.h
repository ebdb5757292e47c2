/* A dual number with DC_DUAL_N partials: the value v and the partials d[k]
 * (the derivative of v with respect to the k-th seeded input). Include this
 * file with these macros defined, once per type you need:
 *
 *   DC_DUAL_T  name of the struct type, prefix of every function
 *   DC_DUAL_N  number of partials, a positive integer constant
 *   DC_S       scalar type, float or double
 *   DC_SFX     suffix of the scalar math in dual/scalar_math.h: f32 or f64
 *
 * Each operation computes the value and its local derivative once, with the
 * same scalar functions the rest of dualcast uses, then applies the chain rule
 * to the partials. Operations whose name ends in s take a plain scalar as the
 * second operand (muls: dual * scalar); those starting with s take it first
 * (ssub: scalar - dual). Every function is host+device and inlines into the
 * element loops. DC_DUAL_T and DC_DUAL_N are undefined at the end of this
 * file; DC_S and DC_SFX are the includer's, as in every header instantiated
 * per scalar type, and stay defined.
 *
 * No include guard: included once per instantiation. */

#include "scalar_math.h"
#include "tangent_ops.h"

#define DC_D_CAT_(a, b) a##_##b
#define DC_D_CAT(a, b) DC_D_CAT_(a, b)
#define DC_DFN(op) DC_D_CAT(DC_DUAL_T, op)
#define DC_SCAL(fn) DC_D_CAT(DC_D_CAT(dc, fn), DC_SFX)
/* Tangent times a local derivative that can be infinite or NaN for a finite
 * input (sqrt and log at 0, pow, division by 0): a zero tangent contributes
 * zero, so a singularity in one input never poisons the partials of the
 * others; so does exp, whose derivative overflows with it. Derivatives that
 * stay finite (tanh, sigmoid, softplus, products) use the plain product,
 * which costs less. */
#define DC_TMUL(tangent, deriv) (DC_KNOWN_ZERO(tangent) ? (tangent) : DC_SCAL(adj_mul)(tangent, deriv))

/* With one partial the struct would be exactly two scalars wide, a size gcc
 * copies as one integer: a value chosen by a branch then stays a branch and
 * the element loop is left scalar, many times slower than the vectorized
 * loop (figures: bench/RESULTS.md, section "Measurements behind design
 * choices in the code"). One spare slot (never read) keeps every dual
 * number a plain aggregate of scalars, whose branches gcc if-converts and
 * vectorizes. */
#define DC_DUAL_SLOTS (DC_DUAL_N == 1 ? 2 : DC_DUAL_N)

typedef struct DC_DUAL_T {
    DC_S v;
    DC_S d[DC_DUAL_SLOTS];
} DC_DUAL_T;

/* A constant: zero partials. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(const)(DC_S v)
{
    DC_DUAL_T r;
    r.v = v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = (DC_S)0;
    return r;
}

/* An input seeded as the k-th independent variable: partial k is one. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(seed)(DC_S v, int k)
{
    DC_DUAL_T r;
    r.v = v;
    DC_UNROLL for (int j = 0; j < DC_DUAL_N; ++j)
        r.d[j] = j == k ? (DC_S)1 : (DC_S)0;
    return r;
}

DC_INLINE DC_HD DC_S DC_DFN(val)(DC_DUAL_T a) { return a.v; }

/* value y = f(a.v) with local derivative dy: partials scale by dy. Partials
 * that are zero by construction cost nothing here nor in the operations
 * below (dual/tangent_ops.h). */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(chain)(DC_DUAL_T a, DC_S y, DC_S dy)
{
    DC_DUAL_T r;
    r.v = y;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TSCALE(a.d[k], dy);
    return r;
}

/* chain for a derivative that may be infinite or NaN (see DC_TMUL). */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(chain_singular)(DC_DUAL_T a, DC_S y, DC_S dy)
{
    DC_DUAL_T r;
    r.v = y;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TMUL(a.d[k], dy);
    return r;
}

/* ---- arithmetic ---- */

DC_INLINE DC_HD DC_DUAL_T DC_DFN(add)(DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = a.v + b.v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TADD(a.d[k], b.d[k]);
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(adds)(DC_DUAL_T a, DC_S s)
{
    a.v = a.v + s;
    return a;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(sub)(DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = a.v - b.v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TSUB(a.d[k], b.d[k]);
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(subs)(DC_DUAL_T a, DC_S s)
{
    a.v = a.v - s;
    return a;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(neg)(DC_DUAL_T a)
{
    DC_DUAL_T r;
    r.v = -a.v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TNEG(a.d[k]);
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(ssub)(DC_S s, DC_DUAL_T a)
{
    DC_DUAL_T r = DC_DFN(neg)(a);
    r.v = s - a.v;
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(mul)(DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = a.v * b.v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_TADD(DC_TSCALE(a.d[k], b.v), DC_TSCALE(b.d[k], a.v));
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(muls)(DC_DUAL_T a, DC_S s)
{
    return DC_DFN(chain)(a, a.v * s, s);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(div)(DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = a.v / b.v;
    const DC_S inv = (DC_S)1 / b.v;
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
    {
        /* named, so that DC_KNOWN_ZERO sees values, not calls */
        const DC_S ta = DC_TMUL(a.d[k], inv), tb = DC_TMUL(b.d[k], r.v * inv);
        r.d[k] = DC_TSUB(ta, tb);
    }
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(divs)(DC_DUAL_T a, DC_S s)
{
    return DC_DFN(chain_singular)(a, a.v / s, (DC_S)1 / s);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(sdiv)(DC_S s, DC_DUAL_T b)
{
    const DC_S y = s / b.v;
    return DC_DFN(chain_singular)(b, y, -y / b.v);
}

/* ---- elementary functions ---- */

/* exp is its own derivative, infinite where it overflows */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(exp)(DC_DUAL_T a)
{
    const DC_S y = DC_SCAL(exp)(a.v);
    return DC_DFN(chain_singular)(a, y, y);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(log)(DC_DUAL_T a)
{
    return DC_DFN(chain_singular)(a, DC_SCAL(log)(a.v), (DC_S)1 / a.v);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(log1p)(DC_DUAL_T a)
{
    return DC_DFN(chain_singular)(a, DC_SCAL(log1p)(a.v), (DC_S)1 / ((DC_S)1 + a.v));
}

/* the derivative is exp(x) itself (y + 1 would cancel for negative x),
 * infinite where it overflows */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(expm1)(DC_DUAL_T a)
{
    return DC_DFN(chain_singular)(a, DC_SCAL(expm1)(a.v), DC_SCAL(exp)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(sqrt)(DC_DUAL_T a)
{
    const DC_S y = DC_SCAL(sqrt)(a.v);
    return DC_DFN(chain_singular)(a, y, (DC_S)0.5 / y);
}

/* a^p for a constant exponent p; the partial NaN where y is (a < 0 and p
 * not an integer: p - 1 can round to one), as in pow. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(pows)(DC_DUAL_T a, DC_S p)
{
    const DC_S y = DC_SCAL(pow)(a.v, p);
    const DC_S dy = p == (DC_S)0 ? (DC_S)0 : y != y ? y : p * DC_SCAL(pow)(a.v, p - (DC_S)1);
    return DC_DFN(chain_singular)(a, y, dy);
}

/* s^b for a constant base s; the partial y log s is taken as zero at s == 0
 * (its limit for b > 0), as in pow. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(spow)(DC_S s, DC_DUAL_T b)
{
    const DC_S y = DC_SCAL(pow)(s, b.v);
    return DC_DFN(chain_singular)(b, y, s == (DC_S)0 ? (DC_S)0 : y * DC_SCAL(log)(s));
}

/* a^b for two duals. The partial for the exponent is y*log(a), taken as zero
 * at a == 0 (its limit for b > 0); for the base NaN where y is, as in
 * pows. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(pow)(DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = DC_SCAL(pow)(a.v, b.v);
    const DC_S da = b.v == (DC_S)0 ? (DC_S)0 : r.v != r.v ? r.v : b.v * DC_SCAL(pow)(a.v, b.v - (DC_S)1);
    const DC_S db = a.v == (DC_S)0 ? (DC_S)0 : r.v * DC_SCAL(log)(a.v);
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
    {
        const DC_S ta = DC_TMUL(a.d[k], da), tb = DC_TMUL(b.d[k], db);
        r.d[k] = DC_TADD(ta, tb);
    }
    return r;
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(sin)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(sin)(a.v), DC_SCAL(cos)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(cos)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(cos)(a.v), -DC_SCAL(sin)(a.v));
}

/* Value and derivative from one exponential, accurate in the tails. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(tanh)(DC_DUAL_T a)
{
    DC_S dy;
    const DC_S y = DC_SCAL(tanh_vd)(a.v, &dy);
    return DC_DFN(chain)(a, y, dy);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(sigmoid)(DC_DUAL_T a)
{
    DC_S dy;
    const DC_S y = DC_SCAL(sigmoid_vd)(a.v, &dy);
    return DC_DFN(chain)(a, y, dy);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(softplus)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(softplus)(a.v), DC_SCAL(sigmoid)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(relu)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(relu)(a.v), DC_SCAL(relu_dx)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(abs)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(abs)(a.v), DC_SCAL(abs_dx)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(erf)(DC_DUAL_T a)
{
    return DC_DFN(chain)(a, DC_SCAL(erf)(a.v), DC_SCAL(erf_dx)(a.v));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(hard_sigmoid)(DC_DUAL_T a, DC_S slope)
{
    return DC_DFN(chain)(a, DC_SCAL(hard_sigmoid)(a.v, slope), DC_SCAL(hard_sigmoid_dx)(a.v, slope));
}

/* cond ? a : b, value and partials, through the scalar math's select (see
 * dc_select_f32). */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(pick)(int cond, DC_DUAL_T a, DC_DUAL_T b)
{
    DC_DUAL_T r;
    r.v = DC_SCAL(select)(cond, a.v, b.v);
    DC_UNROLL for (int k = 0; k < DC_DUAL_N; ++k)
        r.d[k] = DC_SCAL(select)(cond, a.d[k], b.d[k]);
    return r;
}

/* min and max pick one operand whole, value and partials; a tie takes the
 * first, a NaN in either is propagated. */
DC_INLINE DC_HD DC_DUAL_T DC_DFN(min)(DC_DUAL_T a, DC_DUAL_T b)
{
    return DC_DFN(pick)(DC_SCAL(min_takes_first)(a.v, b.v), a, b);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(max)(DC_DUAL_T a, DC_DUAL_T b)
{
    return DC_DFN(pick)(DC_SCAL(max_takes_first)(a.v, b.v), a, b);
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(mins)(DC_DUAL_T a, DC_S s)
{
    return DC_DFN(pick)(DC_SCAL(min_takes_first)(a.v, s), a, DC_DFN(const)(s));
}

DC_INLINE DC_HD DC_DUAL_T DC_DFN(maxs)(DC_DUAL_T a, DC_S s)
{
    return DC_DFN(pick)(DC_SCAL(max_takes_first)(a.v, s), a, DC_DFN(const)(s));
}

#undef DC_D_CAT_
#undef DC_D_CAT
#undef DC_DFN
#undef DC_SCAL
#undef DC_TMUL
#undef DC_DUAL_T
#undef DC_DUAL_N
#undef DC_DUAL_SLOTS
