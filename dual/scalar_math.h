/* The scalar math of dualcast, written once for the CPU and the GPU, for float
 * (dc_<name>_f32) and double (dc_<name>_f64). Dual numbers (dual/dual_impl.h),
 * the primitive ops' kernels and their adjoints all call these functions. */
#ifndef DC_DUAL_SCALAR_MATH_H
#define DC_DUAL_SCALAR_MATH_H

#if defined(DC_S) || defined(DC_SFX)
/* DC_S and DC_SFX name the scalar type and its suffix (f32, f64) for every
 * header instantiated per type (here, dual_impl.h, the kernels); this file
 * defines them for its own instantiations, so it comes first. */
#error "include dual/scalar_math.h before defining DC_S and DC_SFX"
#endif

#include "hd.h"
#include "math_f32.h"
#include "math_f64.h"

DC_INLINE DC_HD float dc_abs_f32(float x) { return fabsf(x); }
DC_INLINE DC_HD double dc_abs_f64(double x) { return fabs(x); }

/* The arithmetic operators as functions, so that every operator of the
 * broadcast-function body language (broadcast/bfn_dsl_ops.h) has its plain
 * form dc_<op>_f32 / dc_<op>_f64. */
#define DC_ARITHMETIC(T, SFX)                                                                      \
    DC_INLINE DC_HD T dc_neg_##SFX(T a) { return -a; }                                             \
    DC_INLINE DC_HD T dc_add_##SFX(T a, T b) { return a + b; }                                     \
    DC_INLINE DC_HD T dc_sub_##SFX(T a, T b) { return a - b; }                                     \
    DC_INLINE DC_HD T dc_mul_##SFX(T a, T b) { return a * b; }                                     \
    DC_INLINE DC_HD T dc_div_##SFX(T a, T b) { return a / b; }
DC_ARITHMETIC(float, f32)
DC_ARITHMETIC(double, f64)
#undef DC_ARITHMETIC

#define DC_S float
#define DC_SFX f32
#include "math_composite_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_S double
#define DC_SFX f64
#include "math_composite_impl.h"
#undef DC_S
#undef DC_SFX

#endif /* DC_DUAL_SCALAR_MATH_H */
