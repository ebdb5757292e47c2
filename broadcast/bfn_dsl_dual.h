/* The body language on dual numbers: dc_var is the dual type DC_BFN_DUAL
 * (made by dual/dual_impl.h with one partial per differentiable input) and
 * dc_real the plain scalar. Operations accept any mix of dc_var and dc_real
 * operands: C selects the function with _Generic, CUDA C++ by overloading.
 * A mix of two dc_real operands stays a dc_real.
 *
 * Include with DC_S, DC_SFX and DC_BFN_DUAL defined; the dc_ macros take
 * effect until bfn_dsl_end.h. */

#include "../dual/scalar_math.h"

#define dc_var DC_BFN_DUAL
#define dc_real DC_S
#define DC_BFN_SEED(value, wrt_index) DC_BFN_D_(seed)((value), (wrt_index))
#define DC_BFN_VALUE(v) ((v).v)
#define DC_BFN_PARTIAL(v, j) ((v).d[j])

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
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_add)(DC_S a, DC_S b) { return a + b; }
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_sub)(DC_S a, DC_S b) { return a - b; }
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_mul)(DC_S a, DC_S b) { return a * b; }
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_div)(DC_S a, DC_S b) { return a / b; }
DC_INLINE DC_HD DC_S DC_BFN_D_(ss_neg)(DC_S a) { return -a; }

#if defined(__cplusplus)

/* Overload sets named dc_bfnd_<op>, one per pass (each pass lives in its own
 * namespace, see bfn_cuda_instance.cuh). */
#define DC_BFN_OVL_UNARY(op, dual_fn, real_fn)                                                     \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a) { return dual_fn(a); }                 \
    DC_INLINE DC_HD DC_S dc_bfnd_##op(DC_S a) { return real_fn(a); }
#define DC_BFN_OVL_BINARY(op, vv, vs, sv, ss)                                                      \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a, DC_BFN_DUAL b) { return vv(a, b); }    \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_BFN_DUAL a, DC_S b) { return vs(a, b); }           \
    DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_##op(DC_S a, DC_BFN_DUAL b) { return sv(a, b); }           \
    DC_INLINE DC_HD DC_S dc_bfnd_##op(DC_S a, DC_S b) { return ss(a, b); }

DC_INLINE DC_HD DC_S dc_bfnd_val(DC_BFN_DUAL a) { return a.v; }
DC_INLINE DC_HD DC_S dc_bfnd_val(DC_S a) { return a; }
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_const(DC_BFN_DUAL a) { return a; }
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_const(DC_S a) { return DC_BFN_D_(const)(a); }
DC_BFN_OVL_UNARY(neg, DC_BFN_D_(neg), DC_BFN_D_(ss_neg))
DC_BFN_OVL_UNARY(exp, DC_BFN_D_(exp), DC_BFN_P_(exp))
DC_BFN_OVL_UNARY(log, DC_BFN_D_(log), DC_BFN_P_(log))
DC_BFN_OVL_UNARY(log1p, DC_BFN_D_(log1p), DC_BFN_P_(log1p))
DC_BFN_OVL_UNARY(expm1, DC_BFN_D_(expm1), DC_BFN_P_(expm1))
DC_BFN_OVL_UNARY(sqrt, DC_BFN_D_(sqrt), DC_BFN_P_(sqrt))
DC_BFN_OVL_UNARY(sin, DC_BFN_D_(sin), DC_BFN_P_(sin))
DC_BFN_OVL_UNARY(cos, DC_BFN_D_(cos), DC_BFN_P_(cos))
DC_BFN_OVL_UNARY(tanh, DC_BFN_D_(tanh), DC_BFN_P_(tanh))
DC_BFN_OVL_UNARY(sigmoid, DC_BFN_D_(sigmoid), DC_BFN_P_(sigmoid))
DC_BFN_OVL_UNARY(softplus, DC_BFN_D_(softplus), DC_BFN_P_(softplus))
DC_BFN_OVL_UNARY(relu, DC_BFN_D_(relu), DC_BFN_P_(relu))
DC_BFN_OVL_UNARY(abs, DC_BFN_D_(abs), DC_BFN_P_(abs_raw))
DC_BFN_OVL_UNARY(erf, DC_BFN_D_(erf), DC_BFN_P_(erf))
DC_BFN_OVL_BINARY(add, DC_BFN_D_(add), DC_BFN_D_(adds), DC_BFN_D_(sadd), DC_BFN_D_(ss_add))
DC_BFN_OVL_BINARY(sub, DC_BFN_D_(sub), DC_BFN_D_(subs), DC_BFN_D_(ssub), DC_BFN_D_(ss_sub))
DC_BFN_OVL_BINARY(mul, DC_BFN_D_(mul), DC_BFN_D_(muls), DC_BFN_D_(smul), DC_BFN_D_(ss_mul))
DC_BFN_OVL_BINARY(div, DC_BFN_D_(div), DC_BFN_D_(divs), DC_BFN_D_(sdiv), DC_BFN_D_(ss_div))
DC_BFN_OVL_BINARY(pow, DC_BFN_D_(pow), DC_BFN_D_(pows), DC_BFN_D_(spow), DC_BFN_P_(pow))
DC_BFN_OVL_BINARY(min, DC_BFN_D_(min), DC_BFN_D_(mins), DC_BFN_D_(smin), DC_BFN_P_(min))
DC_BFN_OVL_BINARY(max, DC_BFN_D_(max), DC_BFN_D_(maxs), DC_BFN_D_(smax), DC_BFN_P_(max))
DC_INLINE DC_HD DC_BFN_DUAL dc_bfnd_hard_sigmoid(DC_BFN_DUAL a, DC_S slope)
{
    return DC_BFN_D_(hard_sigmoid)(a, slope);
}
DC_INLINE DC_HD DC_S dc_bfnd_hard_sigmoid(DC_S a, DC_S slope) { return DC_BFN_P_(hard_sigmoid)(a, slope); }
#undef DC_BFN_OVL_UNARY
#undef DC_BFN_OVL_BINARY

#define dc_val dc_bfnd_val
#define dc_const dc_bfnd_const
#define dc_neg dc_bfnd_neg
#define dc_exp dc_bfnd_exp
#define dc_log dc_bfnd_log
#define dc_log1p dc_bfnd_log1p
#define dc_expm1 dc_bfnd_expm1
#define dc_sqrt dc_bfnd_sqrt
#define dc_sin dc_bfnd_sin
#define dc_cos dc_bfnd_cos
#define dc_tanh dc_bfnd_tanh
#define dc_sigmoid dc_bfnd_sigmoid
#define dc_softplus dc_bfnd_softplus
#define dc_relu dc_bfnd_relu
#define dc_abs dc_bfnd_abs
#define dc_erf dc_bfnd_erf
#define dc_add dc_bfnd_add
#define dc_sub dc_bfnd_sub
#define dc_mul dc_bfnd_mul
#define dc_div dc_bfnd_div
#define dc_pow dc_bfnd_pow
#define dc_min dc_bfnd_min
#define dc_max dc_bfnd_max
#define dc_hard_sigmoid dc_bfnd_hard_sigmoid

#else /* C11 */

#define DC_BFN_UNARY_(a, dual_fn, real_fn) _Generic((a), DC_BFN_DUAL: dual_fn, default: real_fn)(a)
#define DC_BFN_BINARY_(a, b, vv, vs, sv, ss)                                                       \
    _Generic((a), DC_BFN_DUAL: _Generic((b), DC_BFN_DUAL: vv, default: vs),                        \
             default: _Generic((b), DC_BFN_DUAL: sv, default: ss))(a, b)

#define dc_val(a) DC_BFN_UNARY_(a, DC_BFN_D_(val), DC_BFN_D_(ss_val))
#define dc_const(a) DC_BFN_UNARY_(a, DC_BFN_D_(as_var), DC_BFN_D_(const))
#define dc_neg(a) DC_BFN_UNARY_(a, DC_BFN_D_(neg), DC_BFN_D_(ss_neg))
#define dc_exp(a) DC_BFN_UNARY_(a, DC_BFN_D_(exp), DC_BFN_P_(exp))
#define dc_log(a) DC_BFN_UNARY_(a, DC_BFN_D_(log), DC_BFN_P_(log))
#define dc_log1p(a) DC_BFN_UNARY_(a, DC_BFN_D_(log1p), DC_BFN_P_(log1p))
#define dc_expm1(a) DC_BFN_UNARY_(a, DC_BFN_D_(expm1), DC_BFN_P_(expm1))
#define dc_sqrt(a) DC_BFN_UNARY_(a, DC_BFN_D_(sqrt), DC_BFN_P_(sqrt))
#define dc_sin(a) DC_BFN_UNARY_(a, DC_BFN_D_(sin), DC_BFN_P_(sin))
#define dc_cos(a) DC_BFN_UNARY_(a, DC_BFN_D_(cos), DC_BFN_P_(cos))
#define dc_tanh(a) DC_BFN_UNARY_(a, DC_BFN_D_(tanh), DC_BFN_P_(tanh))
#define dc_sigmoid(a) DC_BFN_UNARY_(a, DC_BFN_D_(sigmoid), DC_BFN_P_(sigmoid))
#define dc_softplus(a) DC_BFN_UNARY_(a, DC_BFN_D_(softplus), DC_BFN_P_(softplus))
#define dc_relu(a) DC_BFN_UNARY_(a, DC_BFN_D_(relu), DC_BFN_P_(relu))
#define dc_abs(a) DC_BFN_UNARY_(a, DC_BFN_D_(abs), DC_BFN_P_(abs_raw))
#define dc_erf(a) DC_BFN_UNARY_(a, DC_BFN_D_(erf), DC_BFN_P_(erf))
#define dc_add(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(add), DC_BFN_D_(adds), DC_BFN_D_(sadd), DC_BFN_D_(ss_add))
#define dc_sub(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(sub), DC_BFN_D_(subs), DC_BFN_D_(ssub), DC_BFN_D_(ss_sub))
#define dc_mul(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(mul), DC_BFN_D_(muls), DC_BFN_D_(smul), DC_BFN_D_(ss_mul))
#define dc_div(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(div), DC_BFN_D_(divs), DC_BFN_D_(sdiv), DC_BFN_D_(ss_div))
#define dc_pow(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(pow), DC_BFN_D_(pows), DC_BFN_D_(spow), DC_BFN_P_(pow))
#define dc_min(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(min), DC_BFN_D_(mins), DC_BFN_D_(smin), DC_BFN_P_(min))
#define dc_max(a, b) DC_BFN_BINARY_(a, b, DC_BFN_D_(max), DC_BFN_D_(maxs), DC_BFN_D_(smax), DC_BFN_P_(max))
#define dc_hard_sigmoid(a, slope)                                                                  \
    _Generic((a), DC_BFN_DUAL: DC_BFN_D_(hard_sigmoid), default: DC_BFN_P_(hard_sigmoid))(a, slope)

#endif /* __cplusplus */
