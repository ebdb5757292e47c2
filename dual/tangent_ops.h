/* Arithmetic on single partials that skips structural zeros.
 *
 * A function of D differentiable inputs carries D partials on every value,
 * but most values depend on only a few inputs: a seed has one nonzero
 * partial, sigmoid(x) of a seed still one, a product of two seeds two. The
 * rest are zero by construction, and once the element loop is inlined the
 * compiler can see that (DC_KNOWN_ZERO). These macros let it drop every
 * operation on such a zero, so each value pays for the partials it really
 * has, not for all D.
 *
 * Results: a known zero times anything stays zero and adding one changes
 * nothing. For finite values that is what the plain formulas give, up to the
 * sign of a zero. Where the plain formula would multiply a structural zero by
 * an infinite or NaN derivative (0 * inf), the partial stays zero, which is
 * the chain rule's answer: the value does not depend on that input at all.
 *
 * Arguments may be evaluated more than once: pass plain expressions. */
#ifndef DC_DUAL_TANGENT_OPS_H
#define DC_DUAL_TANGENT_OPS_H

#include "hd.h"

/* partial t times a local derivative s */
#define DC_TSCALE(t, s) (DC_KNOWN_ZERO(t) ? (t) : (t) * (s))
/* sum and difference of two partials */
#define DC_TADD(x, y) (DC_KNOWN_ZERO(y) ? (x) : DC_KNOWN_ZERO(x) ? (y) : (x) + (y))
#define DC_TSUB(x, y) (DC_KNOWN_ZERO(y) ? (x) : DC_KNOWN_ZERO(x) ? -(y) : (x) - (y))
#define DC_TNEG(x) (DC_KNOWN_ZERO(x) ? (x) : -(x))

#endif /* DC_DUAL_TANGENT_OPS_H */
