/* Functions built from the elementary ones, and the derivative helpers that
 * forward mode (dual numbers) and reverse mode (primitive adjoints) share.
 * Written once; dual/scalar_math.h includes this file for float and double
 * with DC_S (the type) and DC_SFX (the suffix, f32 or f64) defined.
 * No include guard: included once per scalar type. */

#define DC_SFN(name) DC_SFN_(name, DC_SFX)
#define DC_SFN_(name, sfx) DC_SFN__(name, sfx)
#define DC_SFN__(name, sfx) dc_##name##_##sfx

/* Logistic function; one exponential of -|x|, so it never overflows:
 * sigmoid(-100) is 3.7e-44 in float and its derivative is finite. */
DC_INLINE DC_HD DC_S DC_SFN(sigmoid)(DC_S x)
{
    const DC_S e = DC_SFN(exp_nonpos)(DC_SFN(neg_abs)(x));
    const DC_S r = (DC_S)1 / ((DC_S)1 + e);
    return DC_SFN(select_sign)(x, e * r, r);
}

/* The logistic function and its derivative e / (1 + e)^2 from the same
 * e = exp(-|x|): y(1 - y) would round to zero for large |x|. */
DC_INLINE DC_HD DC_S DC_SFN(sigmoid_vd)(DC_S x, DC_S *dx)
{
    const DC_S e = DC_SFN(exp_nonpos)(DC_SFN(neg_abs)(x));
    const DC_S r = (DC_S)1 / ((DC_S)1 + e);
    *dx = e * r * r;
    return DC_SFN(select_sign)(x, e * r, r);
}

/* log(1 + exp(x)) without overflow: softplus(100) = 100. */
DC_INLINE DC_HD DC_S DC_SFN(softplus)(DC_S x)
{
    const DC_S pos = DC_SFN(select)(x > (DC_S)0, x, (DC_S)0);
    return pos + DC_SFN(log1p)(DC_SFN(exp_nonpos)(DC_SFN(neg_abs)(x)));
}

/* max(x, 0); a NaN stays NaN */
DC_INLINE DC_HD DC_S DC_SFN(relu)(DC_S x) { return DC_SFN(select)(x > (DC_S)0 || x != x, x, (DC_S)0); }

/* Minimum and maximum that propagate a NaN from either argument; on a tie
 * the first argument is taken (and gets the derivative). */
DC_INLINE DC_HD int DC_SFN(min_takes_first)(DC_S a, DC_S b) { return a <= b || a != a; }
DC_INLINE DC_HD int DC_SFN(max_takes_first)(DC_S a, DC_S b) { return a >= b || a != a; }
DC_INLINE DC_HD DC_S DC_SFN(min)(DC_S a, DC_S b) { return DC_SFN(select)(DC_SFN(min_takes_first)(a, b), a, b); }
DC_INLINE DC_HD DC_S DC_SFN(max)(DC_S a, DC_S b) { return DC_SFN(select)(DC_SFN(max_takes_first)(a, b), a, b); }

/* max(0, min(1, (slope * x + 1) / 2)), the HM-LSTM boundary gate. */
DC_INLINE DC_HD DC_S DC_SFN(hard_sigmoid)(DC_S x, DC_S slope)
{
    const DC_S y = (slope * x + (DC_S)1) * (DC_S)0.5;
    const DC_S lo = DC_SFN(select)(y < (DC_S)0, (DC_S)0, y);
    return DC_SFN(select)(lo > (DC_S)1, (DC_S)1, lo);
}

/* Derivatives. The _dy forms take the function's output, which both forward
 * and reverse mode have at hand, instead of recomputing it. */
DC_INLINE DC_HD DC_S DC_SFN(sigmoid_dy)(DC_S y) { return y * ((DC_S)1 - y); }
DC_INLINE DC_HD DC_S DC_SFN(tanh_dy)(DC_S y) { return (DC_S)1 - y * y; }
DC_INLINE DC_HD DC_S DC_SFN(relu_dx)(DC_S x) { return DC_SFN(select)(x > (DC_S)0, (DC_S)1, (DC_S)0); }
DC_INLINE DC_HD DC_S DC_SFN(abs_dx)(DC_S x)
{
    return DC_SFN(select)(x > (DC_S)0, (DC_S)1, DC_SFN(select)(x < (DC_S)0, (DC_S)-1, (DC_S)0));
}
DC_INLINE DC_HD DC_S DC_SFN(hard_sigmoid_dx)(DC_S x, DC_S slope)
{
    const DC_S u = slope * x + (DC_S)1;
    return DC_SFN(select)(u > (DC_S)0 && u < (DC_S)2, slope * (DC_S)0.5, (DC_S)0);
}
/* 2/sqrt(pi) exp(-x^2), with x^2 split exactly into hi + lo (Dekker): the
 * rounding error of x * x, magnified by x^2 in the exponential, would cost
 * tens of ulp in float near x = 8. */
DC_INLINE DC_HD DC_S DC_SFN(erf_dx)(DC_S x)
{
    const DC_S split = sizeof(DC_S) == 4 ? (DC_S)4097 : (DC_S)134217729; /* 2^12 + 1, 2^27 + 1 */
    const DC_S c = split * x;
    const DC_S xh = c - (c - x), xl = x - xh;
    const DC_S hi = x * x;
    const DC_S lo = ((xh * xh - hi) + (DC_S)2 * xh * xl) + xl * xl;
    return (DC_S)1.12837916709551257390 * DC_SFN(exp_nonpos)(-hi) * ((DC_S)1 - lo);
}

/* Product of an adjoint and a local partial derivative, in which a zero
 * adjoint contributes exactly zero even when the partial is infinite or NaN.
 * This keeps a NaN computed on the side of a select that was not taken (or in
 * a branch of a broadcast body that was not executed) out of the gradient. */
DC_INLINE DC_HD DC_S DC_SFN(adj_mul)(DC_S adj, DC_S partial)
{
    return DC_SFN(select)(adj == (DC_S)0, (DC_S)0, adj * partial);
}

#undef DC_SFN
#undef DC_SFN_
#undef DC_SFN__
