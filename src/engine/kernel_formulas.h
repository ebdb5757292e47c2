/* The per-element formulas of the kernels in kernels.h, written once for the
 * CPU loops (kernels_impl.h) and the CUDA kernel (src/cuda/elementwise.cu).
 * Included with DC_S (float or double) and DC_SFX (f32 or f64) defined. Each
 * formula reads its inputs x[] and writes its outputs y[]; s is the
 * kernel's scalar argument (a scale, slope or threshold). Every product of
 * an adjoint with a local derivative goes through adj_mul, so a zero adjoint
 * stays zero through infinite or NaN derivatives.
 * No include guard: included once per scalar type. */

#define KF(name) DC_PP_CAT(DC_PP_CAT(dc_kf_, name), DC_PP_CAT(_, DC_SFX))
#define KM(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, DC_SFX))
#define FORMULA(name) DC_INLINE DC_HD void KF(name)(const DC_S *x, DC_S *y, DC_S s, DC_S t)
#define UNUSED_ST ((void)s, (void)t)

FORMULA(copy) { UNUSED_ST; y[0] = x[0]; }
FORMULA(affine) { y[0] = x[0] * s + t; }
FORMULA(add) { UNUSED_ST; y[0] = x[0] + x[1]; }
FORMULA(sub) { UNUSED_ST; y[0] = x[0] - x[1]; }
FORMULA(mul) { UNUSED_ST; y[0] = x[0] * x[1]; }
FORMULA(div) { UNUSED_ST; y[0] = x[0] / x[1]; }
FORMULA(pow) { UNUSED_ST; y[0] = KM(pow)(x[0], x[1]); }
FORMULA(neg) { UNUSED_ST; y[0] = -x[0]; }
FORMULA(exp) { UNUSED_ST; y[0] = KM(exp)(x[0]); }
FORMULA(log) { UNUSED_ST; y[0] = KM(log)(x[0]); }
FORMULA(tanh) { UNUSED_ST; y[0] = KM(tanh)(x[0]); }
FORMULA(sigmoid) { UNUSED_ST; y[0] = KM(sigmoid)(x[0]); }
FORMULA(relu) { UNUSED_ST; y[0] = KM(relu)(x[0]); }
FORMULA(hard_sigmoid) { (void)t; y[0] = KM(hard_sigmoid)(x[0], s); }
FORMULA(step) { (void)t; y[0] = x[0] > s ? (DC_S)1 : (DC_S)0; }
FORMULA(select) { UNUSED_ST; y[0] = x[0] != (DC_S)0 ? x[1] : x[2]; }

/* adjoints: x[0] is g, the output's adjoint */
FORMULA(add_bwd)
{
    UNUSED_ST;
    y[0] = x[0];
    y[1] = x[0];
}
FORMULA(sub_bwd)
{
    UNUSED_ST;
    y[0] = x[0];
    y[1] = -x[0];
}
FORMULA(mul_bwd) /* g, a, b */
{
    UNUSED_ST;
    y[0] = KM(adj_mul)(x[0], x[2]);
    y[1] = KM(adj_mul)(x[0], x[1]);
}
FORMULA(div_bwd) /* g, b, y */
{
    UNUSED_ST;
    const DC_S inv = (DC_S)1 / x[1];
    y[0] = KM(adj_mul)(x[0], inv);
    y[1] = KM(adj_mul)(x[0], -x[2] * inv);
}
/* d(a^b)/da = b a^(b-1), taken as 0 when b == 0, NaN where a^b is (a < 0
 * and b not an integer: b - 1 can round to one, b = 1e-8 to -1); d(a^b)/db
 * = a^b log a, taken as 0 when a == 0 (its limit for b > 0). */
FORMULA(pow_bwd) /* g, a, b, y */
{
    UNUSED_ST;
    const DC_S a = x[1], b = x[2];
    const DC_S da = b == (DC_S)0 ? (DC_S)0 : x[3] != x[3] ? x[3] : b * KM(pow)(a, b - (DC_S)1);
    const DC_S db = a == (DC_S)0 ? (DC_S)0 : x[3] * KM(log)(a);
    y[0] = KM(adj_mul)(x[0], da);
    y[1] = KM(adj_mul)(x[0], db);
}
FORMULA(exp_bwd) { UNUSED_ST; y[0] = KM(adj_mul)(x[0], x[1]); }              /* g, y */
FORMULA(log_bwd) { UNUSED_ST; y[0] = KM(adj_mul)(x[0], (DC_S)1 / x[1]); }      /* g, x */
FORMULA(tanh_bwd) { UNUSED_ST; y[0] = KM(adj_mul)(x[0], KM(tanh_dy)(x[1])); } /* g, y */
FORMULA(sigmoid_bwd) { UNUSED_ST; y[0] = KM(adj_mul)(x[0], KM(sigmoid_dy)(x[1])); }
FORMULA(relu_bwd) { UNUSED_ST; y[0] = KM(adj_mul)(x[0], KM(relu_dx)(x[1])); }
FORMULA(hard_sigmoid_bwd) { (void)t; y[0] = KM(adj_mul)(x[0], KM(hard_sigmoid_dx)(x[1], s)); }
FORMULA(select_bwd) /* g, cond */
{
    UNUSED_ST;
    const int take_a = x[1] != (DC_S)0;
    y[0] = take_a ? x[0] : (DC_S)0;
    y[1] = take_a ? (DC_S)0 : x[0];
}

#undef KF
#undef KM
#undef FORMULA
#undef UNUSED_ST
