/* CPU kernels of src/ops/kernels.h for one scalar type: included by
 * kernels_cpu.c with KS (float or double) and KSFX (f32 or f64) defined.
 * Each is a plain loop over contiguous arrays that gcc vectorizes; every
 * product of an adjoint with a local derivative goes through adj_mul, so a
 * zero adjoint stays zero through infinite or NaN derivatives. */

#define KFN(name) DC_PP_CAT(DC_PP_CAT(name, _), KSFX)
#define KMATH(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, KSFX))
#define KERNEL(name) static void KFN(name)(int64_t n, const void *const *in, void *const *out, const void *arg)
#define IN(k) ((const KS *)in[k])
#define OUT(k) ((KS *)out[k])

#define UNARY(name, expr)                                                                          \
    KERNEL(name)                                                                                   \
    {                                                                                              \
        (void)arg;                                                                                 \
        const KS *restrict xs = IN(0);                                                             \
        KS *restrict o = OUT(0);                                                                   \
        for (int64_t e = 0; e < n; ++e) {                                                          \
            const KS x = xs[e];                                                                    \
            o[e] = (expr);                                                                         \
        }                                                                                          \
    }

#define BINARY(name, expr)                                                                         \
    KERNEL(name)                                                                                   \
    {                                                                                              \
        (void)arg;                                                                                 \
        const KS *restrict as = IN(0), *restrict bs = IN(1);                                       \
        KS *restrict o = OUT(0);                                                                   \
        for (int64_t e = 0; e < n; ++e) {                                                          \
            const KS a = as[e], b = bs[e];                                                         \
            o[e] = (expr);                                                                         \
        }                                                                                          \
    }

/* Adjoint of a unary function from the adjoint g and one saved array v. */
#define UNARY_BWD(name, expr)                                                                      \
    KERNEL(name)                                                                                   \
    {                                                                                              \
        (void)arg;                                                                                 \
        const KS *restrict gs = IN(0), *restrict vs = IN(1);                                       \
        KS *restrict o = OUT(0);                                                                   \
        for (int64_t e = 0; e < n; ++e) {                                                          \
            const KS g = gs[e], v = vs[e];                                                         \
            o[e] = KMATH(adj_mul)(g, (expr));                                                      \
        }                                                                                          \
    }

UNARY(k_copy, x)
UNARY(k_neg, -x)
UNARY(k_exp, KMATH(exp)(x))
UNARY(k_log, KMATH(log)(x))
UNARY(k_tanh, KMATH(tanh)(x))
UNARY(k_sigmoid, KMATH(sigmoid)(x))
UNARY(k_relu, KMATH(relu)(x))

KERNEL(k_affine)
{
    const dc_affine_arg *p = arg;
    const KS s = (KS)p->s, t = (KS)p->t;
    const KS *restrict xs = IN(0);
    KS *restrict o = OUT(0);
    for (int64_t e = 0; e < n; ++e)
        o[e] = xs[e] * s + t;
}

BINARY(k_add, a + b)
BINARY(k_sub, a - b)
BINARY(k_mul, a * b)
BINARY(k_div, a / b)
BINARY(k_pow, KMATH(pow)(a, b))

KERNEL(k_hard_sigmoid)
{
    const KS slope = (KS)((const dc_affine_arg *)arg)->s;
    const KS *restrict xs = IN(0);
    KS *restrict o = OUT(0);
    for (int64_t e = 0; e < n; ++e)
        o[e] = KMATH(hard_sigmoid)(xs[e], slope);
}

KERNEL(k_step)
{
    const KS threshold = (KS)((const dc_affine_arg *)arg)->s;
    const KS *restrict xs = IN(0);
    KS *restrict o = OUT(0);
    for (int64_t e = 0; e < n; ++e)
        o[e] = xs[e] > threshold ? (KS)1 : (KS)0;
}

KERNEL(k_hard_sigmoid_bwd)
{
    const KS slope = (KS)((const dc_affine_arg *)arg)->s;
    const KS *restrict gs = IN(0), *restrict xs = IN(1);
    KS *restrict o = OUT(0);
    for (int64_t e = 0; e < n; ++e)
        o[e] = KMATH(adj_mul)(gs[e], KMATH(hard_sigmoid_dx)(xs[e], slope));
}

KERNEL(k_select)
{
    (void)arg;
    const KS *restrict cs = IN(0), *restrict as = IN(1), *restrict bs = IN(2);
    KS *restrict o = OUT(0);
    for (int64_t e = 0; e < n; ++e)
        o[e] = cs[e] != (KS)0 ? as[e] : bs[e];
}

KERNEL(k_add_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        ga[e] = gs[e];
        gb[e] = gs[e];
    }
}

KERNEL(k_sub_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        ga[e] = gs[e];
        gb[e] = -gs[e];
    }
}

KERNEL(k_mul_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0), *restrict as = IN(1), *restrict bs = IN(2);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        ga[e] = KMATH(adj_mul)(gs[e], bs[e]);
        gb[e] = KMATH(adj_mul)(gs[e], as[e]);
    }
}

KERNEL(k_div_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0), *restrict bs = IN(1), *restrict ys = IN(2);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        const KS inv = (KS)1 / bs[e];
        ga[e] = KMATH(adj_mul)(gs[e], inv);
        gb[e] = KMATH(adj_mul)(gs[e], -ys[e] * inv);
    }
}

/* d(a^b)/da = b a^(b-1), taken as 0 when b == 0; d(a^b)/db = a^b log a,
 * taken as 0 when a == 0 (the limit for b > 0). */
KERNEL(k_pow_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0), *restrict as = IN(1), *restrict bs = IN(2), *restrict ys = IN(3);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        const KS a = as[e], b = bs[e];
        const KS da = b == (KS)0 ? (KS)0 : b * KMATH(pow)(a, b - (KS)1);
        const KS db = a == (KS)0 ? (KS)0 : ys[e] * KMATH(log)(a);
        ga[e] = KMATH(adj_mul)(gs[e], da);
        gb[e] = KMATH(adj_mul)(gs[e], db);
    }
}

UNARY_BWD(k_exp_bwd, v)
UNARY_BWD(k_log_bwd, (KS)1 / v)
UNARY_BWD(k_tanh_bwd, KMATH(tanh_dy)(v))
UNARY_BWD(k_sigmoid_bwd, KMATH(sigmoid_dy)(v))
UNARY_BWD(k_relu_bwd, KMATH(relu_dx)(v))

KERNEL(k_select_bwd)
{
    (void)arg;
    const KS *restrict gs = IN(0), *restrict cs = IN(1);
    KS *restrict ga = OUT(0), *restrict gb = OUT(1);
    for (int64_t e = 0; e < n; ++e) {
        const int take_a = cs[e] != (KS)0;
        ga[e] = take_a ? gs[e] : (KS)0;
        gb[e] = take_a ? (KS)0 : gs[e];
    }
}

/* gx_j = sum over outputs k of g_k * P_(k,j): the store policy's backward of
 * a broadcast node, one pass over the partials. */
KERNEL(k_partials_bwd)
{
    const dc_partials_arg *p = arg;
    const int m = p->n_out, nw = p->n_wrt;
    for (int j = 0; j < nw; ++j) {
        KS *restrict gx = OUT(j);
        const KS *restrict g0 = IN(0), *restrict p0 = IN(m + j);
        for (int64_t e = 0; e < n; ++e)
            gx[e] = KMATH(adj_mul)(g0[e], p0[e]);
        for (int k = 1; k < m; ++k) {
            const KS *restrict gk = IN(k), *restrict pk = IN(m + k * nw + j);
            for (int64_t e = 0; e < n; ++e)
                gx[e] += KMATH(adj_mul)(gk[e], pk[e]);
        }
    }
}

static const dc_chunk_fn KFN(kernel_table)[DC_K_COUNT] = {
    [DC_K_COPY] = KFN(k_copy),
    [DC_K_AFFINE] = KFN(k_affine),
    [DC_K_ADD] = KFN(k_add),
    [DC_K_SUB] = KFN(k_sub),
    [DC_K_MUL] = KFN(k_mul),
    [DC_K_DIV] = KFN(k_div),
    [DC_K_POW] = KFN(k_pow),
    [DC_K_NEG] = KFN(k_neg),
    [DC_K_EXP] = KFN(k_exp),
    [DC_K_LOG] = KFN(k_log),
    [DC_K_TANH] = KFN(k_tanh),
    [DC_K_SIGMOID] = KFN(k_sigmoid),
    [DC_K_RELU] = KFN(k_relu),
    [DC_K_HARD_SIGMOID] = KFN(k_hard_sigmoid),
    [DC_K_STEP] = KFN(k_step),
    [DC_K_SELECT] = KFN(k_select),
    [DC_K_ADD_BWD] = KFN(k_add_bwd),
    [DC_K_SUB_BWD] = KFN(k_sub_bwd),
    [DC_K_MUL_BWD] = KFN(k_mul_bwd),
    [DC_K_DIV_BWD] = KFN(k_div_bwd),
    [DC_K_POW_BWD] = KFN(k_pow_bwd),
    [DC_K_EXP_BWD] = KFN(k_exp_bwd),
    [DC_K_LOG_BWD] = KFN(k_log_bwd),
    [DC_K_TANH_BWD] = KFN(k_tanh_bwd),
    [DC_K_SIGMOID_BWD] = KFN(k_sigmoid_bwd),
    [DC_K_RELU_BWD] = KFN(k_relu_bwd),
    [DC_K_HARD_SIGMOID_BWD] = KFN(k_hard_sigmoid_bwd),
    [DC_K_SELECT_BWD] = KFN(k_select_bwd),
    [DC_K_PARTIALS_BWD] = KFN(k_partials_bwd),
};

#undef KFN
#undef KMATH
#undef KERNEL
#undef IN
#undef OUT
#undef UNARY
#undef BINARY
#undef UNARY_BWD
