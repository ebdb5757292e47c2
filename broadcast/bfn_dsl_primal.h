/* The body language on plain numbers: dc_var and dc_real are both the scalar
 * type, so every dc_ operation is the scalar math of dual/scalar_math.h.
 * Used by the primal instantiations (outputs only, no partials).
 *
 * Include with DC_S (float or double) and DC_SFX (f32 or f64) defined; the
 * dc_ macros take effect until bfn_dsl_end.h. */

#include "../dual/scalar_math.h"

#define dc_var DC_S
#define dc_real DC_S
#define DC_BFN_SEED(value, wrt_index) (value)
#define DC_BFN_VALUE(v) (v)
#define DC_BFN_PARTIAL(v, j) ((DC_S)0)

#define DC_BFN_P_(op) DC_PP_CAT(DC_PP_CAT(dc_, op), DC_PP_CAT(_, DC_SFX))

#define dc_val(a) ((DC_S)(a))
#define dc_const(a) ((DC_S)(a))
#define dc_add(a, b) ((DC_S)(a) + (DC_S)(b))
#define dc_sub(a, b) ((DC_S)(a) - (DC_S)(b))
#define dc_mul(a, b) ((DC_S)(a) * (DC_S)(b))
#define dc_div(a, b) ((DC_S)(a) / (DC_S)(b))
#define dc_neg(a) (-(DC_S)(a))
#define dc_exp(a) DC_BFN_P_(exp)((DC_S)(a))
#define dc_log(a) DC_BFN_P_(log)((DC_S)(a))
#define dc_log1p(a) DC_BFN_P_(log1p)((DC_S)(a))
#define dc_expm1(a) DC_BFN_P_(expm1)((DC_S)(a))
#define dc_sqrt(a) DC_BFN_P_(sqrt)((DC_S)(a))
#define dc_sin(a) DC_BFN_P_(sin)((DC_S)(a))
#define dc_cos(a) DC_BFN_P_(cos)((DC_S)(a))
#define dc_tanh(a) DC_BFN_P_(tanh)((DC_S)(a))
#define dc_sigmoid(a) DC_BFN_P_(sigmoid)((DC_S)(a))
#define dc_softplus(a) DC_BFN_P_(softplus)((DC_S)(a))
#define dc_relu(a) DC_BFN_P_(relu)((DC_S)(a))
#define dc_abs(a) DC_BFN_P_(abs_raw)((DC_S)(a))
#define dc_erf(a) DC_BFN_P_(erf)((DC_S)(a))
#define dc_hard_sigmoid(a, slope) DC_BFN_P_(hard_sigmoid)((DC_S)(a), (DC_S)(slope))
#define dc_pow(a, b) DC_BFN_P_(pow)((DC_S)(a), (DC_S)(b))
#define dc_min(a, b) DC_BFN_P_(min)((DC_S)(a), (DC_S)(b))
#define dc_max(a, b) DC_BFN_P_(max)((DC_S)(a), (DC_S)(b))
