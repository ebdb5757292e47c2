/* The scalar math of dualcast, written once for the CPU and the GPU, for float
 * (dc_<name>_f32) and double (dc_<name>_f64). Dual numbers (dual/dual_impl.h),
 * the primitive ops' kernels and their adjoints all call these functions. */
#ifndef DC_DUAL_SCALAR_MATH_H
#define DC_DUAL_SCALAR_MATH_H

#include "hd.h"
#include "math_f32.h"
#include "math_f64.h"

DC_INLINE DC_HD float dc_abs_raw_f32(float x) { return fabsf(x); }
DC_INLINE DC_HD double dc_abs_raw_f64(double x) { return fabs(x); }

#define DC_MS float
#define DC_MSFX f32
#include "math_composite_impl.h"
#undef DC_MS
#undef DC_MSFX

#define DC_MS double
#define DC_MSFX f64
#include "math_composite_impl.h"
#undef DC_MS
#undef DC_MSFX

#endif /* DC_DUAL_SCALAR_MATH_H */
