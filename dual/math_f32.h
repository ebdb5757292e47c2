/* Single-precision elementary functions: exp, log, expm1, log1p, tanh, erf,
 * sin, cos, pow, sqrt.
 *
 * On the device these are CUDA's own math functions. On the host they are
 * written here without branches or library calls, so that gcc can inline them
 * into an element loop and vectorize it, also when the loop body has if/else
 * (the loop is if-converted; see broadcast/bfn_cpu_instance.h). The libm
 * versions are opaque calls that keep such a loop scalar. Every function
 * handles NaN, infinities and signed zeros, and stays within a few ulp of the
 * correctly rounded result over the whole range (sin and cos: for |x| < 1e4).
 * Polynomial coefficients are the classic Cephes minimax values, except the
 * exponential's with FMA (fitted for its reduction; see there). */
#ifndef DC_DUAL_MATH_F32_H
#define DC_DUAL_MATH_F32_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hd.h"

#if DC_ON_DEVICE

/* cond ? a : b (see the host version below) */
DC_INLINE DC_HD float dc_select_f32(int cond, float a, float b) { return cond ? a : b; }
DC_INLINE DC_HD float dc_select_sign_f32(float x, float if_neg, float if_pos) { return signbit(x) ? if_neg : if_pos; }
DC_INLINE DC_HD float dc_neg_abs_f32(float x) { return -fabsf(x); }

DC_INLINE DC_HD float dc_exp_f32(float x) { return expf(x); }
DC_INLINE DC_HD float dc_exp_nonpos_f32(float x) { return expf(x); }
DC_INLINE DC_HD float dc_log_f32(float x) { return logf(x); }
DC_INLINE DC_HD float dc_expm1_f32(float x) { return expm1f(x); }
DC_INLINE DC_HD float dc_log1p_f32(float x) { return log1pf(x); }
DC_INLINE DC_HD float dc_tanh_f32(float x) { return tanhf(x); }
DC_INLINE DC_HD float dc_tanh_vd_f32(float x, float *dx)
{
    const float e = expf(-2.0f * fabsf(x));
    *dx = 4.0f * e / ((1.0f + e) * (1.0f + e));
    return tanhf(x);
}
DC_INLINE DC_HD float dc_erf_f32(float x) { return erff(x); }
DC_INLINE DC_HD float dc_sin_f32(float x) { return sinf(x); }
DC_INLINE DC_HD float dc_cos_f32(float x) { return cosf(x); }
DC_INLINE DC_HD float dc_pow_f32(float a, float b) { return powf(a, b); }
DC_INLINE DC_HD float dc_sqrt_f32(float x) { return sqrtf(x); }

#else

DC_INLINE DC_HD float dc_f32_from_bits(int32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

DC_INLINE DC_HD int32_t dc_f32_bits(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

/* cond ? a : b, the one way every function here chooses between values.
 *
 * By default a plain conditional, which a vectorized loop turns into one
 * blend. A translation unit that defines DC_SELECT_BITWISE to 1 before
 * including any dualcast header gets the choice as bit operations on
 * unsigned integers instead (and, and-not, or). The broadcast kernels
 * for control values that vary per element do this (broadcast/
 * bfn_cpu_instance.h): there gcc if-converts the user's if/else, and every
 * conditional inside a branch becomes a blend whose mask includes that
 * branch's condition, so the same sigmoid written in two branches is
 * computed twice. Without conditionals inside the math, the two copies are
 * identical straight-line code and gcc computes them once, which leaves
 * the c-update's kernel with per-element control fewer divisions and a
 * shorter time per element (figures: bench/RESULTS.md, section
 * "Measurements behind design choices in the code"). Unsigned arithmetic
 * matters: signed operations in a branch are rewritten by the if-converter
 * and lose the blend pattern. */
#if defined(DC_SELECT_BITWISE) && DC_SELECT_BITWISE
DC_INLINE DC_HD float dc_select_f32(int cond, float a, float b)
{
    const uint32_t mask = 0u - (uint32_t)(cond != 0);
    const uint32_t ua = (uint32_t)dc_f32_bits(a), ub = (uint32_t)dc_f32_bits(b);
    return dc_f32_from_bits((int32_t)((ua & mask) | (ub & ~mask)));
}
/* if_neg where the sign bit of x is set (-0 and NaNs with it included),
 * else if_pos: the mask is the sign bit spread by an arithmetic shift, one
 * instruction instead of a comparison */
DC_INLINE DC_HD float dc_select_sign_f32(float x, float if_neg, float if_pos)
{
    const uint32_t mask = (uint32_t)(dc_f32_bits(x) >> 31);
    const uint32_t un = (uint32_t)dc_f32_bits(if_neg), up = (uint32_t)dc_f32_bits(if_pos);
    return dc_f32_from_bits((int32_t)((un & mask) | (up & ~mask)));
}
#else
DC_INLINE DC_HD float dc_select_f32(int cond, float a, float b) { return cond ? a : b; }
DC_INLINE DC_HD float dc_select_sign_f32(float x, float if_neg, float if_pos)
{
    return dc_f32_bits(x) < 0 ? if_neg : if_pos;
}
#endif

/* -|x| with one bit operation (gcc makes |x| and the negation two) */
DC_INLINE DC_HD float dc_neg_abs_f32(float x)
{
    return dc_f32_from_bits((int32_t)((uint32_t)dc_f32_bits(x) | 0x80000000u));
}

/* a * b + c, fused where the machine has FMA: one rounding instead of two,
 * and half the instructions in every polynomial below. (ISO C mode keeps gcc
 * from contracting a * b + c on its own.) */
DC_INLINE DC_HD float dc_madd_f32(float a, float b, float c)
{
#if defined(__FMA__)
    return __builtin_fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

/* Round to nearest integer for |x| < 2^22 with two additions: vectorizes
 * without -fno-trapping-math, unlike rintf/floorf. */
DC_INLINE DC_HD float dc_round_small_f32(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (x + magic) - magic;
}

/* exp(x) = 2^n e^r with n = round(x log2 e) and |r| <= ln 2 / 2: r = x - n ln 2
 * by Cody-Waite reduction, ln 2 in two parts (with FMA the first step is
 * exact, and r = x where n = 0), then e^r - 1 = r + r^2 P(r). With FMA, P is
 * of degree 4, a weighted least-squares fit (Lawson's iteration) for the
 * relative error of e^r - 1 over |r| <= ln 2 / 2: below 1.4e-8 before rounding;
 * without, the Cephes polynomial of degree 5. This is the part the
 * exponentials below share: for x already clamped to [-105, 88.8] or NaN, it
 * returns e^r - 1, rounded once and without cancellation near zero (expm1
 * and tanh use it so), and sets n. A NaN comes out as a NaN (and a
 * meaningless n), so the callers need no test for it. */
DC_INLINE DC_HD float dc_expm1_reduced_f32(float xc, uint32_t *n_out)
{
    /* Rounding by adding 1.5 * 2^23 leaves n in the low bits of t: read it
     * from there rather than converting a float to an integer, which C
     * leaves undefined for a NaN. */
    const float magic = 12582912.0f;
    const float t = dc_madd_f32(xc, 1.44269504088896341f, magic);
    const float n = t - magic;
#if defined(__FMA__)
    float r = __builtin_fmaf(-n, 0.693147182464599609375f, xc);
    r = __builtin_fmaf(-n, -1.9046542121259336e-09f, r);
    float p = 1.3882520143e-03f;
    p = dc_madd_f32(p, r, 8.3665270358e-03f);
    p = dc_madd_f32(p, r, 4.1667200625e-02f);
    p = dc_madd_f32(p, r, 1.6666543484e-01f);
    p = dc_madd_f32(p, r, 4.9999997020e-01f);
#else
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = dc_madd_f32(p, r, 1.3981999507E-3f);
    p = dc_madd_f32(p, r, 8.3334519073E-3f);
    p = dc_madd_f32(p, r, 4.1665795894E-2f);
    p = dc_madd_f32(p, r, 1.6666665459E-1f);
    p = dc_madd_f32(p, r, 5.0000001201E-1f);
#endif
    *n_out = (uint32_t)dc_f32_bits(t) - (uint32_t)dc_f32_bits(magic);
    return dc_madd_f32(p, r * r, r);
}

/* e^r and n, as above */
DC_INLINE DC_HD float dc_exp_reduced_f32(float xc, uint32_t *n_out) { return dc_expm1_reduced_f32(xc, n_out) + 1.0f; }

/* 2^k for k + 127 in [1, 254], built from its bits; unsigned, because k is
 * meaningless for a NaN argument (whose result is NaN anyway). */
DC_INLINE DC_HD float dc_pow2_bits_f32(uint32_t k) { return dc_f32_from_bits((int32_t)((k + 127u) << 23)); }

DC_INLINE DC_HD float dc_exp_f32(float x)
{
    /* Beyond these bounds the result is inf or rounds to zero; a NaN passes
     * both tests and propagates. */
    float xc = dc_select_f32(x < -105.0f, -105.0f, x);
    xc = dc_select_f32(xc > 88.8f, 88.8f, xc);
    uint32_t n;
    const float p = dc_exp_reduced_f32(xc, &n);
    /* n lies in [-152, 128]: split 2^n in two factors so both stay normal and
     * the product rounds correctly into the subnormal range or to inf. */
    const uint32_t n1 = (uint32_t)((int32_t)n >> 1);
    const uint32_t n2 = n - n1;
    return p * dc_pow2_bits_f32(n1) * dc_pow2_bits_f32(n2);
}

/* exp(x) for x <= 0 or NaN, the exponential inside sigmoid and softplus (of
 * -|x|) and in the derivative of erf (of -x^2): one bound to clamp and one
 * scaling factor instead of two. Wrong for x > 0. */
DC_INLINE DC_HD float dc_exp_nonpos_f32(float x)
{
    const float xc = dc_select_f32(x < -105.0f, -105.0f, x);
    uint32_t n;
    const float p = dc_exp_reduced_f32(xc, &n);
    /* n lies in [-152, 0]: p 2^(n + 64) is exact and normal, and the product
     * with 2^-64 rounds once, correctly, into the subnormal range. */
    return p * dc_pow2_bits_f32(n + 64u) * dc_pow2_bits_f32(0u - 64u);
}

DC_INLINE DC_HD float dc_log_f32(float x)
{
    const float tiny = 1.17549435e-38f; /* FLT_MIN */
    const int subnormal = x < tiny;
    const float xs = dc_select_f32(subnormal, x * 8388608.0f, x); /* 2^23 */
    const int32_t bits = dc_f32_bits(xs);
    float e = (float)(((bits >> 23) & 0xff) - 126) - dc_select_f32(subnormal, 23.0f, 0.0f);
    float m = dc_f32_from_bits((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    const int low = m < 0.707106781186547524f;
    e = dc_select_f32(low, e - 1.0f, e);
    m = dc_select_f32(low, m + m - 1.0f, m - 1.0f);
    const float z = m * m;
    float y = 7.0376836292E-2f;
    y = dc_madd_f32(y, m, -1.1514610310E-1f);
    y = dc_madd_f32(y, m, 1.1676998740E-1f);
    y = dc_madd_f32(y, m, -1.2420140846E-1f);
    y = dc_madd_f32(y, m, 1.4249322787E-1f);
    y = dc_madd_f32(y, m, -1.6668057665E-1f);
    y = dc_madd_f32(y, m, 2.0000714765E-1f);
    y = dc_madd_f32(y, m, -2.4999993993E-1f);
    y = dc_madd_f32(y, m, 3.3333331174E-1f);
    y = y * m * z;
    y = y - 2.12194440e-4f * e;
    y = y - 0.5f * z;
    float r = m + y + 0.693359375f * e;
    r = dc_select_f32(x == 0.0f, -INFINITY, r);
    r = dc_select_f32(x == INFINITY, INFINITY, r);
    r = dc_select_f32(x < 0.0f || x != x, NAN, r);
    return r;
}

/* e^x - 1 = (e^r - 1) 2^n + (2^n - 1) from the exponential's reduction:
 * e^r - 1 is rounded once, and where n = 0 (|x| < ln 2 / 2) the result is
 * it; elsewhere the sum does not cancel badly. It is formed at 2^(n - 1)
 * and doubled (exact), so that 2^(n - 1) stays finite up to n = 128, where
 * e^x still is. Below about -17.33 the result rounds to -1, so clamping at
 * -20 changes nothing; above 88.8 it overflows. Exhaustively over all
 * floats: at most 1.595 ulp with FMA (1.569 without). */
DC_INLINE DC_HD float dc_expm1_f32(float x)
{
    float xc = dc_select_f32(x < -20.0f, -20.0f, x);
    xc = dc_select_f32(xc > 88.8f, 88.8f, xc);
    uint32_t n;
    const float em1_r = dc_expm1_reduced_f32(xc, &n);
    const float h = dc_pow2_bits_f32(n - 1u); /* n - 1 in [-30, 127] */
    const float r = 2.0f * dc_madd_f32(em1_r, h, h - 0.5f);
    /* below 2^-25, e^x - 1 rounds to x: that keeps -0 and the subnormals,
     * which the halving above would round */
    return dc_select_f32(fabsf(x) < 0x1p-25f, x, r);
}

DC_INLINE DC_HD float dc_log1p_f32(float x)
{
    /* log(u) * x / (u - 1) with u = 1 + x cancels the rounding error of u. */
    const float u = 1.0f + x;
    const float d = u - 1.0f;
    const float safe_d = dc_select_f32(d == 0.0f, 1.0f, d);
    float r = dc_log_f32(u) * (x / safe_d);
    r = dc_select_f32(d == 0.0f, x, r);
    r = dc_select_f32(x == INFINITY, INFINITY, r);
    return r;
}

/* tanh|x| = (1 - e) / (1 + e) with e = exp(-2|x|), and the derivative
 * 4e / (1 + e)^2, which keeps its accuracy in the tails where 1 - tanh^2
 * rounds to zero. This part returns e - 1, taken from the exponential's
 * reduction as (e^r - 1) 2^n + (2^n - 1), which does not cancel near zero,
 * and sets *e64 to e 2^64 (normal, so that the derivative rounds once into
 * the subnormals). Beyond |x| = 52.5 tanh is 1 and its derivative underflows;
 * a NaN passes the clamp and propagates. */
DC_INLINE DC_HD float dc_tanh_em1_f32(float ax, float *e64)
{
    const float xc = dc_select_f32(ax > 52.5f, -105.0f, -2.0f * ax);
    uint32_t n;
    const float em1_r = dc_expm1_reduced_f32(xc, &n);
    /* 2^n for n in [-152, 0]: exact, or 0 below the subnormals */
    const float s64 = dc_pow2_bits_f32(n + 64u), s = s64 * dc_pow2_bits_f32(0u - 64u);
    *e64 = (em1_r + 1.0f) * s64;
    return dc_madd_f32(em1_r, s, s - 1.0f);
}

DC_INLINE DC_HD float dc_tanh_f32(float x)
{
    float e64;
    const float em1 = dc_tanh_em1_f32(fabsf(x), &e64);
    return copysignf(-em1 / (2.0f + em1), x);
}

DC_INLINE DC_HD float dc_tanh_vd_f32(float x, float *dx)
{
    float e64;
    const float em1 = dc_tanh_em1_f32(fabsf(x), &e64);
    const float d = 2.0f + em1; /* 1 + e */
    const float inv = 1.0f / d;
    /* -em1 / d from the reciprocal and one correction step (Markstein): the
     * quotient rounded once, the value dc_tanh_f32 divides out */
    const float t0 = -em1 * inv;
    const float t = dc_madd_f32(dc_madd_f32(-t0, d, -em1), inv, t0);
    *dx = 4.0f * e64 * inv * inv * dc_pow2_bits_f32(0u - 64u);
    return copysignf(t, x);
}

DC_INLINE DC_HD float dc_erf_f32(float x)
{
    const float ax = fabsf(x);
    /* Small |x|: the Maclaurin series keeps full relative accuracy. */
    const float z = x * x;
    float s = 1.0f / 9360.0f;
    s = dc_madd_f32(s, z, -1.0f / 1320.0f);
    s = dc_madd_f32(s, z, 1.0f / 216.0f);
    s = dc_madd_f32(s, z, -1.0f / 42.0f);
    s = dc_madd_f32(s, z, 1.0f / 10.0f);
    s = dc_madd_f32(s, z, -1.0f / 3.0f);
    s = dc_madd_f32(s, z, 1.0f);
    s = s * x; /* x - x^3/3 + x^5/10 - ... */
    const float small = 1.12837916709551257f * s;
    /* Otherwise 1 - erfc(|x|), erfc from a Chebyshev fit with relative error
     * below 1.2e-7 (Numerical Recipes, erfcc). */
    const float t = 1.0f / (1.0f + 0.5f * ax);
    float q = 0.17087277f;
    q = dc_madd_f32(q, t, -0.82215223f);
    q = dc_madd_f32(q, t, 1.48851587f);
    q = dc_madd_f32(q, t, -1.13520398f);
    q = dc_madd_f32(q, t, 0.27886807f);
    q = dc_madd_f32(q, t, -0.18628806f);
    q = dc_madd_f32(q, t, 0.09678418f);
    q = dc_madd_f32(q, t, 0.37409196f);
    q = dc_madd_f32(q, t, 1.00002368f);
    q = dc_madd_f32(q, t, -1.26551223f);
    const float erfc_ax = t * dc_exp_f32(q - ax * ax);
    const float large = copysignf(1.0f - erfc_ax, x);
    return dc_select_f32(ax < 0.5f, small, dc_select_f32(x != x, x, large));
}

/* x = j * pi/2 + r with |r| <= pi/4, in three parts so that r keeps its
 * accuracy for |x| up to about 1e4. */
DC_INLINE DC_HD float dc_reduce_half_pi_f32(float x, int32_t *quadrant)
{
    /* Beyond 4e6 the quadrant no longer fits the rounding trick; the result
     * there is bounded but meaningless, as single precision allows. */
    x = dc_select_f32(x > 4.0e6f, 4.0e6f, x);
    x = dc_select_f32(x < -4.0e6f, -4.0e6f, x);
    const float j = dc_round_small_f32(x * 0.636619772367581343f);
#if defined(__FMA__)
    /* pi/2 in three floats; each fused step is exact */
    float r = __builtin_fmaf(-j, 1.57079637050628662109375f, x);
    r = __builtin_fmaf(-j, -4.3711388286737928865e-8f, r);
    r = __builtin_fmaf(-j, -1.7151245100058818728e-15f, r);
#else
    /* pi/2 in four parts of few significant bits: every product j * C is
     * exact for |j| < 2^13 (Cody and Waite) */
    float r = x - j * 1.5703125f;
    r = r - j * 4.837512969970703125e-4f;
    r = r - j * 7.549533620476722717285e-08f;
    r = r - j * 2.563344068257089602980e-12f;
#endif
    *quadrant = (int32_t)j & 3;
    return r;
}

DC_INLINE DC_HD float dc_sin_poly_f32(float r)
{
    const float z = r * r;
    float p = -1.9515295891E-4f;
    p = dc_madd_f32(p, z, 8.3321608736E-3f);
    p = dc_madd_f32(p, z, -1.6666654611E-1f);
    return p * z * r + r;
}

DC_INLINE DC_HD float dc_cos_poly_f32(float r)
{
    const float z = r * r;
    float p = 2.443315711809948E-5f;
    p = dc_madd_f32(p, z, -1.388731625493765E-3f);
    p = dc_madd_f32(p, z, 4.166664568298827E-2f);
    return p * z * z - 0.5f * z + 1.0f;
}

DC_INLINE DC_HD float dc_sin_f32(float x)
{
    const int finite = fabsf(x) < INFINITY;
    int32_t q;
    const float r = dc_reduce_half_pi_f32(dc_select_f32(finite, x, 0.0f), &q);
    const float s = dc_sin_poly_f32(r), c = dc_cos_poly_f32(r);
    float y = dc_select_f32(q & 1, c, s);
    y = dc_select_f32(q & 2, -y, y);
    y = dc_select_f32(x == 0.0f, x, y); /* keeps the sign of zero */
    return dc_select_f32(finite, y, NAN);
}

DC_INLINE DC_HD float dc_cos_f32(float x)
{
    const int finite = fabsf(x) < INFINITY;
    int32_t q;
    const float r = dc_reduce_half_pi_f32(dc_select_f32(finite, x, 0.0f), &q);
    const float s = dc_sin_poly_f32(r), c = dc_cos_poly_f32(r);
    float y = dc_select_f32(q & 1, s, c);
    y = dc_select_f32((q + 1) & 2, -y, y);
    return dc_select_f32(finite, y, NAN);
}

DC_INLINE DC_HD float dc_sqrt_f32(float x) { return __builtin_sqrtf(x); }

/* a^b through the double-precision pow: exp(b log|a|) in float loses up to
 * |b log a| ulp, and the double result rounds to the correct float. It is a
 * library call, so a loop using dc_pow_f32 is not vectorized. */
DC_INLINE DC_HD float dc_pow_f32(float a, float b) { return (float)pow((double)a, (double)b); }

#endif /* DC_ON_DEVICE */

#endif /* DC_DUAL_MATH_F32_H */
