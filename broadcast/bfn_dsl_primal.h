/* The body language on plain numbers: dc_var and dc_real are both the scalar
 * type, so every operator is the scalar math of dual/scalar_math.h. Used by
 * the primal instantiations (outputs only, no partials) and the counting
 * pass of the dual ones.
 *
 * Include with DC_S (float or double) and DC_SFX (f32 or f64) defined; the
 * pass's macros take effect until bfn_dsl_end.h. */

#include "../dual/scalar_math.h"
#include "bfn_dsl_ops.h"

#define dc_var DC_S
#define dc_real DC_S
#define DC_BFN_SEED(value, wrt_index) (value)
#define DC_BFN_VALUE(v) (v)
#define DC_BFN_PARTIAL(v, j) ((DC_S)0)

#define DC_BFN_P_(op) DC_PP_CAT(DC_PP_CAT(dc_, op), DC_PP_CAT(_, DC_SFX))

#define DC_BFN_VAL(a) ((DC_S)(a))
#define DC_BFN_CONST(a) ((DC_S)(a))
#define DC_BFN_UNARY(op, a) DC_BFN_P_(op)((DC_S)(a))
#define DC_BFN_BINARY(op, a, b) DC_BFN_P_(op)((DC_S)(a), (DC_S)(b))
#define DC_BFN_HARD_SIGMOID(a, slope) DC_BFN_P_(hard_sigmoid)((DC_S)(a), (DC_S)(slope))
