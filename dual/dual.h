/* Ready-made dual-number types: dc_dual<N>f (float) and dc_dual<N>d (double)
 * for N = 1 to 16 partials, each with the operations of dual/dual_impl.h
 * (dc_dual4f_mul, dc_dual4f_sigmoid, ...). For other N include dual_impl.h
 * with your own definitions. */
#ifndef DC_DUAL_DUAL_H
#define DC_DUAL_DUAL_H

#include "scalar_math.h"

#define DC_DUAL_T dc_dual1f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 1
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual1d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 1
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual2f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 2
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual2d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 2
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual3f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 3
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual3d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 3
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual4f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 4
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual4d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 4
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual5f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 5
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual5d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 5
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual6f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 6
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual6d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 6
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual7f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 7
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual7d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 7
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual8f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 8
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual8d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 8
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual9f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 9
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual9d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 9
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual10f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 10
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual10d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 10
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual11f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 11
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual11d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 11
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual12f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 12
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual12d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 12
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual13f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 13
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual13d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 13
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual14f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 14
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual14d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 14
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual15f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 15
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual15d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 15
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual16f
#define DC_S float
#define DC_SFX f32
#define DC_DUAL_N 16
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_DUAL_T dc_dual16d
#define DC_S double
#define DC_SFX f64
#define DC_DUAL_N 16
#include "dual_impl.h"
#undef DC_S
#undef DC_SFX

#endif /* DC_DUAL_DUAL_H */
