/* The operators of the broadcast-function body language, written once: the
 * names a body calls and the lists every pass expands.
 *
 * A pass (bfn_dsl_primal.h on plain numbers, bfn_dsl_dual.h on dual
 * numbers) says how an operator runs by defining DC_BFN_UNARY(op, a),
 * DC_BFN_BINARY(op, a, b), DC_BFN_VAL(a), DC_BFN_CONST(a) and
 * DC_BFN_HARD_SIGMOID(a, slope); bfn_dsl_end.h removes them. Operator `op`
 * runs as
 *   on plain numbers: DC_BFN_P_(op), the scalar math dc_<op>_f32 / _f64
 *                     (dual/scalar_math.h);
 *   on dual numbers:  DC_BFN_D_(op) (dual/dual_impl.h), and for a binary
 *                     operator with one plain operand DC_BFN_D_(op##s)
 *                     (dual, plain) or DC_BFN_D_(s##op) (plain, dual).
 * Adding an operator: a row in its list and its name below, its scalar
 * math, and its dual form. */
#ifndef DC_BFN_DSL_OPS_H
#define DC_BFN_DSL_OPS_H

#define DC_BFN_UNARY_OPS(X)                                                                        \
    X(neg) X(exp) X(log) X(log1p) X(expm1) X(sqrt) X(sin) X(cos) X(tanh) X(sigmoid) X(softplus) X(relu) X(abs) \
    X(erf)
#define DC_BFN_BINARY_OPS(X) X(add) X(sub) X(mul) X(div) X(pow) X(min) X(max)

/* The names a body calls (README.md lists them). */
#define dc_val(a) DC_BFN_VAL(a)
#define dc_const(a) DC_BFN_CONST(a)
#define dc_hard_sigmoid(a, slope) DC_BFN_HARD_SIGMOID(a, slope)
#define dc_neg(a) DC_BFN_UNARY(neg, a)
#define dc_exp(a) DC_BFN_UNARY(exp, a)
#define dc_log(a) DC_BFN_UNARY(log, a)
#define dc_log1p(a) DC_BFN_UNARY(log1p, a)
#define dc_expm1(a) DC_BFN_UNARY(expm1, a)
#define dc_sqrt(a) DC_BFN_UNARY(sqrt, a)
#define dc_sin(a) DC_BFN_UNARY(sin, a)
#define dc_cos(a) DC_BFN_UNARY(cos, a)
#define dc_tanh(a) DC_BFN_UNARY(tanh, a)
#define dc_sigmoid(a) DC_BFN_UNARY(sigmoid, a)
#define dc_softplus(a) DC_BFN_UNARY(softplus, a)
#define dc_relu(a) DC_BFN_UNARY(relu, a)
#define dc_abs(a) DC_BFN_UNARY(abs, a)
#define dc_erf(a) DC_BFN_UNARY(erf, a)
#define dc_add(a, b) DC_BFN_BINARY(add, a, b)
#define dc_sub(a, b) DC_BFN_BINARY(sub, a, b)
#define dc_mul(a, b) DC_BFN_BINARY(mul, a, b)
#define dc_div(a, b) DC_BFN_BINARY(div, a, b)
#define dc_pow(a, b) DC_BFN_BINARY(pow, a, b)
#define dc_min(a, b) DC_BFN_BINARY(min, a, b)
#define dc_max(a, b) DC_BFN_BINARY(max, a, b)

#endif /* DC_BFN_DSL_OPS_H */
