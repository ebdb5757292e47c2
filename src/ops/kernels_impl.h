/* CPU kernels of kernels.h for one scalar type: included by kernels_cpu.c
 * with KS (float or double) and KSFX (f32 or f64) defined. Each is a loop
 * over contiguous arrays around the kernel's formula (kernel_formulas.h);
 * gcc vectorizes it. */

#define KFN(name) DC_PP_CAT(DC_PP_CAT(name, _), KSFX)
#define KF(name) DC_PP_CAT(DC_PP_CAT(dc_kf_, name), DC_PP_CAT(_, KSFX))
#define KM(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, KSFX))

#if defined(__clang__)
#define KIVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KIVDEP _Pragma("GCC ivdep")
#endif

#define LOOP_KERNEL(ID, name, NI, NO)                                                              \
    static void KFN(k_##name)(int64_t n, const void *const *in, void *const *out, const void *arg) \
    {                                                                                              \
        const dc_affine_arg *p = arg;                                                              \
        const KS s = p ? (KS)p->s : (KS)0, t = p ? (KS)p->t : (KS)0;                               \
        const KS *src[NI];                                                                         \
        KS *dst[NO];                                                                               \
        for (int j = 0; j < NI; ++j)                                                               \
            src[j] = (const KS *)in[j];                                                            \
        for (int k = 0; k < NO; ++k)                                                               \
            dst[k] = (KS *)out[k];                                                                 \
        KIVDEP for (int64_t e = 0; e < n; ++e)                                                     \
        {                                                                                          \
            KS x[NI], y[NO];                                                                       \
            for (int j = 0; j < NI; ++j)                                                           \
                x[j] = src[j][e];                                                                  \
            KF(name)(x, y, s, t);                                                                  \
            for (int k = 0; k < NO; ++k)                                                           \
                dst[k][e] = y[k];                                                                  \
        }                                                                                          \
    }
DC_KERNEL_LIST(LOOP_KERNEL)
#undef LOOP_KERNEL

/* gx_j = sum over outputs k of g_k * P_(k,j): one pass over the partials. */
static void KFN(k_partials_bwd)(int64_t n, const void *const *in, void *const *out, const void *arg)
{
    const dc_partials_arg *p = arg;
    const int m = p->n_out, nw = p->n_wrt;
    for (int j = 0; j < nw; ++j) {
        KS *restrict gx = (KS *)out[j];
        const KS *restrict g0 = (const KS *)in[0], *restrict p0 = (const KS *)in[m + j];
        for (int64_t e = 0; e < n; ++e)
            gx[e] = KM(adj_mul)(g0[e], p0[e]);
        for (int k = 1; k < m; ++k) {
            const KS *restrict gk = (const KS *)in[k], *restrict pk = (const KS *)in[m + k * nw + j];
            for (int64_t e = 0; e < n; ++e)
                gx[e] += KM(adj_mul)(gk[e], pk[e]);
        }
    }
}

#define TABLE_ROW(ID, name, NI, NO) [DC_K_##ID] = KFN(k_##name),
static const dc_chunk_fn KFN(kernel_table)[DC_K_COUNT] = {
    DC_KERNEL_LIST(TABLE_ROW)[DC_K_PARTIALS_BWD] = KFN(k_partials_bwd),
};
#undef TABLE_ROW

#undef KFN
#undef KF
#undef KM
#undef KIVDEP
