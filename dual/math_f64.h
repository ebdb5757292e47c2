/* Double-precision elementary functions. Double precision serves gradient
 * checks and reference results, where accuracy matters more than SIMD, so
 * these are the C library's functions on the host and CUDA's on the device
 * (both spell them the same). */
#ifndef DC_DUAL_MATH_F64_H
#define DC_DUAL_MATH_F64_H

#include <math.h>

#include "hd.h"

/* cond ? a : b. Always the plain conditional: the double-precision loops
 * call the C library and stay scalar, so the bitwise form of dc_select_f32
 * would buy nothing. */
DC_INLINE DC_HD double dc_select_f64(int cond, double a, double b) { return cond ? a : b; }
/* if_neg where the sign bit of x is set, else if_pos */
DC_INLINE DC_HD double dc_select_sign_f64(double x, double if_neg, double if_pos)
{
    return signbit(x) ? if_neg : if_pos;
}
DC_INLINE DC_HD double dc_neg_abs_f64(double x) { return -fabs(x); }
DC_INLINE DC_HD double dc_exp_f64(double x) { return exp(x); }
/* exp(x) for x <= 0 (the float version is cheaper there) */
DC_INLINE DC_HD double dc_exp_nonpos_f64(double x) { return exp(x); }
DC_INLINE DC_HD double dc_log_f64(double x) { return log(x); }
DC_INLINE DC_HD double dc_expm1_f64(double x) { return expm1(x); }
DC_INLINE DC_HD double dc_log1p_f64(double x) { return log1p(x); }
DC_INLINE DC_HD double dc_tanh_f64(double x) { return tanh(x); }
/* tanh with its derivative 4e / (1 + e)^2, e = exp(-2|x|): accurate in the
 * tails, where 1 - tanh^2 rounds to zero. */
DC_INLINE DC_HD double dc_tanh_vd_f64(double x, double *dx)
{
    const double e = exp(-2.0 * fabs(x));
    *dx = 4.0 * e / ((1.0 + e) * (1.0 + e));
    return tanh(x);
}
DC_INLINE DC_HD double dc_erf_f64(double x) { return erf(x); }
DC_INLINE DC_HD double dc_sin_f64(double x) { return sin(x); }
DC_INLINE DC_HD double dc_cos_f64(double x) { return cos(x); }
DC_INLINE DC_HD double dc_pow_f64(double a, double b) { return pow(a, b); }
DC_INLINE DC_HD double dc_sqrt_f64(double x) { return sqrt(x); }

#endif /* DC_DUAL_MATH_F64_H */
