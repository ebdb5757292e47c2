/* CPU kernels of kernels.h for one scalar type: included by kernels_cpu.c
 * with DC_S (float or double) and DC_SFX (f32 or f64) defined. Each is a loop
 * over contiguous arrays around the kernel's formula (kernel_formulas.h);
 * gcc vectorizes it. */

#define KFN(name) DC_PP_CAT(DC_PP_CAT(name, _), DC_SFX)
#define KF(name) DC_PP_CAT(DC_PP_CAT(dc_kf_, name), DC_PP_CAT(_, DC_SFX))
#define KM(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, DC_SFX))

#if defined(__clang__)
#define KIVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KIVDEP _Pragma("GCC ivdep")
#endif

#define LOOP_KERNEL(ID, name, NI, NO)                                                              \
    static void KFN(k_##name)(int64_t n, const void *const *in, void *const *out, const void *arg) \
    {                                                                                              \
        const dc_affine_arg *p = arg;                                                              \
        const DC_S s = p ? (DC_S)p->s : (DC_S)0, t = p ? (DC_S)p->t : (DC_S)0;                               \
        const DC_S *src[NI];                                                                         \
        DC_S *dst[NO];                                                                               \
        for (int j = 0; j < NI; ++j)                                                               \
            src[j] = (const DC_S *)in[j];                                                            \
        for (int k = 0; k < NO; ++k)                                                               \
            dst[k] = (DC_S *)out[k];                                                                 \
        KIVDEP for (int64_t e = 0; e < n; ++e)                                                     \
        {                                                                                          \
            DC_S x[NI], y[NO];                                                                       \
            for (int j = 0; j < NI; ++j)                                                           \
                x[j] = src[j][e];                                                                  \
            KF(name)(x, y, s, t);                                                                  \
            for (int k = 0; k < NO; ++k)                                                           \
                dst[k][e] = y[k];                                                                  \
        }                                                                                          \
    }
#if defined(__clang__)
/* clang vectorizes no loop that calls libm (float64 exp, tanh, ...): those
 * stay scalar loops, without a warning that they asked for vectors */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
DC_KERNEL_LIST(LOOP_KERNEL)
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#undef LOOP_KERNEL

/* gx_j = sum over outputs k of g_k * P_(k,j), the store policy's backward,
 * in one pass in which every array is read or written in step with the
 * others: streams the hardware prefetcher follows across chunks, where one
 * pass per gradient restarted each stream at every chunk. A function with
 * one output and up to eight gradients gets one vectorized loop for its
 * count (the adjoint read and tested once per element); others go block by
 * block, each block through every gradient in turn. On the c-update (one
 * output, four gradients) the pass in step is faster than a pass per
 * gradient at every size measured, and the loop per count as fast as the
 * blocks or faster (figures: bench/RESULTS.md, section "Measurements behind
 * design choices in the code"). */
#define PARTIALS_BWD_ONE_OUTPUT(NW)                                                                \
    static void KFN(k_partials_bwd_1x##NW)(int64_t n, const void *const *in, void *const *out)     \
    {                                                                                              \
        const DC_S *g = (const DC_S *)in[0];                                                           \
        const DC_S *partial[NW];                                                                     \
        DC_S *gx[NW];                                                                                \
        for (int j = 0; j < NW; ++j) {                                                             \
            partial[j] = (const DC_S *)in[1 + j];                                                    \
            gx[j] = (DC_S *)out[j];                                                                  \
        }                                                                                          \
        _Pragma("omp simd") for (int64_t e = 0; e < n; ++e)                                        \
        {                                                                                          \
            const DC_S a = g[e];                                                                     \
            for (int j = 0; j < NW; ++j)                                                           \
                gx[j][e] = KM(adj_mul)(a, partial[j][e]);                                          \
        }                                                                                          \
    }
PARTIALS_BWD_ONE_OUTPUT(1)
PARTIALS_BWD_ONE_OUTPUT(2)
PARTIALS_BWD_ONE_OUTPUT(3)
PARTIALS_BWD_ONE_OUTPUT(4)
PARTIALS_BWD_ONE_OUTPUT(5)
PARTIALS_BWD_ONE_OUTPUT(6)
PARTIALS_BWD_ONE_OUTPUT(7)
PARTIALS_BWD_ONE_OUTPUT(8)
#undef PARTIALS_BWD_ONE_OUTPUT

static void KFN(k_partials_bwd)(int64_t n, const void *const *in, void *const *out, const void *arg)
{
    const dc_partials_arg *p = arg;
    const int m = p->n_out, nw = p->n_wrt;
    if (m == 1) {
        switch (nw) {
        case 1: KFN(k_partials_bwd_1x1)(n, in, out); return;
        case 2: KFN(k_partials_bwd_1x2)(n, in, out); return;
        case 3: KFN(k_partials_bwd_1x3)(n, in, out); return;
        case 4: KFN(k_partials_bwd_1x4)(n, in, out); return;
        case 5: KFN(k_partials_bwd_1x5)(n, in, out); return;
        case 6: KFN(k_partials_bwd_1x6)(n, in, out); return;
        case 7: KFN(k_partials_bwd_1x7)(n, in, out); return;
        case 8: KFN(k_partials_bwd_1x8)(n, in, out); return;
        default: break;
        }
    }
    const int64_t block = 256;
    for (int64_t e0 = 0; e0 < n; e0 += block) {
        const int64_t e1 = n - e0 < block ? n : e0 + block;
        for (int j = 0; j < nw; ++j) {
            DC_S *restrict gx = (DC_S *)out[j];
            const DC_S *restrict g0 = (const DC_S *)in[0], *restrict p0 = (const DC_S *)in[m + j];
            for (int64_t e = e0; e < e1; ++e)
                gx[e] = KM(adj_mul)(g0[e], p0[e]);
            for (int k = 1; k < m; ++k) {
                const DC_S *restrict gk = (const DC_S *)in[k], *restrict pk = (const DC_S *)in[m + k * nw + j];
                for (int64_t e = e0; e < e1; ++e)
                    gx[e] += KM(adj_mul)(gk[e], pk[e]);
            }
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
