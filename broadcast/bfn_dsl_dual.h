/* The body language on dual numbers: dc_var is the dual type DC_BFN_DUAL
 * (made by dual/dual_impl.h with one partial per differentiable input) and
 * dc_real the plain scalar. Operations accept any mix of dc_var and dc_real
 * operands: C selects the function with _Generic, CUDA C++ by overloading.
 * A mix of two dc_real operands stays a dc_real.
 *
 * Include with DC_S, DC_SFX and DC_BFN_DUAL defined; the pass's macros take
 * effect until bfn_dsl_end.h. */

#include "../dual/scalar_math.h"
#include "bfn_dsl_ops.h"

#define dc_var DC_BFN_DUAL
#define dc_real DC_S
#define DC_BFN_SEED(value, wrt_index) DC_BFN_D_(seed)((value), (wrt_index))
#define DC_BFN_VALUE(x) ((x).v)
#define DC_BFN_PARTIAL(x, j) ((x).d[j])

#define DC_BFN_D_(op) DC_PP_CAT(DC_BFN_DUAL, DC_PP_CAT(_, op))
#define DC_BFN_P_(op) DC_PP_CAT(DC_PP_CAT(dc_, op), DC_PP_CAT(_, DC_SFX))

/* The operand orders dual/dual_impl.h leaves out, and plain-plain forms. */
DC_INLINE DC_HD DC_BFN_DUAL DC_BFN_D_(sadd)(DC_S s, DC_BFN_DUAL a) { return DC_BFN_D_(adds)(a, s); }
DC_INLINE DC_HD DC_BFN_DUAL DC_BFN_D_(smul)(DC_S s, DC_BFN_DUAL a) { return DC_BFN_D_(muls)(a, s); }
DC_INLINE DC_HD DC_BFN_DUAL DC_BFN_D_(smin)(DC_S s, DC_BFN_DUAL a)
{
    return DC_BFN_D_(pick)(DC_BFN_P_(min_takes_first)(s, a.v), DC_BFN_D_(const)(s), a);
}
DC_INLINE DC_HD DC_BFN_DUAL DC_BFN_D_(smax)(DC_S s, DC_BFN_DUAL a)
{
    return DC_BFN_D_(pick)(DC_BFN_P_(max_takes_first)(s, a.v), DC_BFN_D_(const)(s), a);
}
DC_INLINE DC_HD DC_BFN_DUAL DC_BFN_D_(as_var)(DC_BFN_DUAL a) { return a; }
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_val)(DC_S a) { return a; }

#if defined(__cplusplus)

/* Overload sets named dc_bfnd_<op>, one per pass (each pass lives in its own
 * namespace, see bfn_cuda_instance.cuh). */
#define DC_BFN_OVERLOAD_UNARY(op)                                                                  \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a) { return DC_BFN_D_(op)(a); }           \
    DC_INLINE DC_HD DC_S dc_bfnd_##op(DC_S a) { return DC_BFN_P_(op)(a); }
#define DC_BFN_OVERLOAD_BINARY(op)                                                                 \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a, DC_BFN_DUAL b) { return DC_BFN_D_(op)(a, b); } \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a, DC_S b) { return DC_BFN_D_(op##s)(a, b); } \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_S a, DC_BFN_DUAL b) { return DC_BFN_D_(s##op)(a, b); } \
    DC_INLINE DC_HD DC_S dc_bfnd_##op(DC_S a, DC_S b) { return DC_BFN_P_(op)(a, b); }
DC_BFN_UNARY_OPS(DC_BFN_OVERLOAD_UNARY)
DC_BFN_BINARY_OPS(DC_BFN_OVERLOAD_BINARY)
#undef DC_BFN_OVERLOAD_UNARY
#undef DC_BFN_OVERLOAD_BINARY

DC_INLINE DC_HD DC_S dc_bfnd_val(DC_BFN_DUAL a) { return a.v; }
DC_INLINE DC_HD DC_S dc_bfnd_val(DC_S a) { return a; }
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_const(DC_BFN_DUAL a) { return a; }
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_const(DC_S a) { return DC_BFN_D_(const)(a); }
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_hard_sigmoid(DC_BFN_DUAL a, DC_S slope)
{
    return DC_BFN_D_(hard_sigmoid)(a, slope);
}
DC_INLINE DC_HD DC_S dc_bfnd_hard_sigmoid(DC_S a, DC_S slope) { return DC_BFN_P_(hard_sigmoid)(a, slope); }

#define DC_BFN_VAL(a) dc_bfnd_val(a)
#define DC_BFN_CONST(a) dc_bfnd_const(a)
#define DC_BFN_UNARY(op, a) dc_bfnd_##op(a)
#define DC_BFN_BINARY(op, a, b) dc_bfnd_##op(a, b)
#define DC_BFN_HARD_SIGMOID(a, slope) dc_bfnd_hard_sigmoid(a, slope)

#else /* C11: the function chosen by the operands' types */

#define DC_BFN_VAL(a) _Generic((a), DC_BFN_DUAL: DC_BFN_D_(val), default: DC_BFN_D_(ss_val))(a)
#define DC_BFN_CONST(a) _Generic((a), DC_BFN_DUAL: DC_BFN_D_(as_var), default: DC_BFN_D_(const))(a)
#define DC_BFN_UNARY(op, a) _Generic((a), DC_BFN_DUAL: DC_BFN_D_(op), default: DC_BFN_P_(op))(a)
#define DC_BFN_BINARY(op, a, b)                                                                    \
    _Generic((a), DC_BFN_DUAL: _Generic((b), DC_BFN_DUAL: DC_BFN_D_(op), default: DC_BFN_D_(op##s)), \
             default: _Generic((b), DC_BFN_DUAL: DC_BFN_D_(s##op), default: DC_BFN_P_(op)))(a, b)
#define DC_BFN_HARD_SIGMOID(a, slope)                                                              \
    _Generic((a), DC_BFN_DUAL: DC_BFN_D_(hard_sigmoid), default: DC_BFN_P_(hard_sigmoid))(a, slope)

#endif /* __cplusplus */
