/* The element loops of the reductions' CPU kernels (reduce_cpu.c), written
 * once per kind: each function takes the kind as its first argument and is
 * always inlined, and reduce_cpu.c calls it from a switch with a constant
 * kind, so that every loop is compiled for one kind (no branch on the kind
 * per element) and the compiler can vectorize it.
 *
 * Whole rows (inner 1) are walked in kLanes interleaved lanes, element l in
 * lane l % kLanes, the lanes then combined in lane order: a fixed order that
 * depends on neither the thread count nor the machine. Maxima and minima
 * pick an element (reduce_formulas.h's rule: a total order on the value and
 * the position), so any order gives the same winner; products and
 * log-sum-exp's sums are rounded in this order (as CUDA rounds in its own).
 *
 * Included by reduce_cpu.c after reduce_formulas.h with DC_S (float or
 * double) and DC_SFX (f32 or f64) defined, once per scalar type (no include
 * guard). */

#define DC_RK(name) DC_PP_CAT(DC_PP_CAT(dc_rk_, name), DC_PP_CAT(_, DC_SFX))
#define DC_RK_F(name) DC_PP_CAT(DC_PP_CAT(dc_rf_, name), DC_PP_CAT(_, DC_SFX))

/* Whether v at a later position takes a lane's win from m (reduce_formulas.h's
 * beats for a later position and a lane that has a winner). */
DC_INLINE bool DC_RK(takes)(int kind, DC_S v, DC_S m)
{
    /* & and |, not && and ||: no branch, so that the lanes' loop vectorizes */
    return (m == m) & ((v != v) | (kind == DC_RK_MIN ? v < m : v > m));
}

/* Elements l0..l1 of row (positions l0..l1) stepped into a state (log-sum-exp:
 * its first walk, the maximum). */
DC_INLINE DC_RF(state) DC_RK(row)(int kind, const DC_S *row, int64_t l0, int64_t l1)
{
    DC_RF(state) st = DC_RK_F(init)(kind);
    int64_t l = l0;
    if (l1 - l0 >= kLanes) {
        if (kind == DC_RK_SUM || kind == DC_RK_PROD) {
            DC_RK_F(wide) acc[kLanes], nz[kLanes], zeros[kLanes]; /* in double: reduce_formulas.h */
            for (int k = 0; k < kLanes; ++k) {
                acc[k] = kind == DC_RK_SUM ? (DC_S)0 : (DC_S)1;
                nz[k] = 1;
                zeros[k] = 0;
            }
            for (; l + kLanes <= l1; l += kLanes) {
                /* one type throughout (the count of zeros too, exact in
                 * double) and no branch: z is 1 for a zero, else 0, and
                 * v + z is 1 for a zero, else exactly v; gcc then
                 * vectorizes the lanes */
                _Pragma("omp simd") for (int k = 0; k < kLanes; ++k)
                {
                    const DC_RK_F(wide) v = row[l + k], z = (DC_RK_F(wide))(v == 0);
                    acc[k] = kind == DC_RK_SUM ? acc[k] + v : acc[k] * v;
                    nz[k] *= v + z;
                    zeros[k] += z;
                }
            }
            for (int k = 0; k < kLanes; ++k) {
                const DC_RF(state) lane = {acc[k], nz[k], (int64_t)zeros[k]};
                st = DC_RK_F(combine)(kind, st, lane);
            }
        } else {
            /* each lane's winner, from the lane's first element on */
            DC_S m[kLanes];
            int32_t p[kLanes]; /* the position less l0 (a piece is at most kSplit long) */
            for (int k = 0; k < kLanes; ++k) {
                m[k] = row[l0 + k];
                p[k] = k;
            }
            for (l = l0 + kLanes; l + kLanes <= l1; l += kLanes) {
                const int32_t base = (int32_t)(l - l0);
                _Pragma("omp simd") for (int k = 0; k < kLanes; ++k)
                {
                    const DC_S v = row[l + k];
                    const bool take = DC_RK(takes)(kind, v, m[k]);
                    m[k] = take ? v : m[k];
                    p[k] = take ? base + k : p[k];
                }
            }
            for (int k = 0; k < kLanes; ++k) {
                const DC_RF(state) lane = {m[k], 1, l0 + p[k]};
                st = DC_RK_F(combine)(kind, st, lane);
            }
        }
    }
    for (; l < l1; ++l)
        DC_RK_F(step)(kind, &st, row[l], l);
    return st;
}

/* The sum of log-sum-exp's terms exp(row[l] - m) over l0..l1, m finite. */
DC_INLINE DC_S DC_RK(lse_sum)(const DC_S *row, int64_t l0, int64_t l1, DC_S m)
{
    DC_S s[kLanes];
    for (int k = 0; k < kLanes; ++k)
        s[k] = 0;
    int64_t l = l0;
    for (; l + kLanes <= l1; l += kLanes)
        for (int k = 0; k < kLanes; ++k)
            s[k] += DC_RK_F(lse_term)(row[l + k], m);
    for (int k = 0; l < l1; ++l, ++k)
        s[k] += DC_RK_F(lse_term)(row[l], m);
    DC_S sum = 0;
    for (int k = 0; k < kLanes; ++k)
        sum += s[k];
    return sum;
}

/* g[l] for the elements l0..l1 of one output's row x (positions l0..l1),
 * the output's y, nz, aux and adjoint gy. */
DC_INLINE void DC_RK(grad_row)(int kind, const DC_S *x, int64_t l0, int64_t l1, DC_S y, DC_S nz, int64_t aux,
                               DC_S gy, DC_S *g)
{
    if (kind == DC_RK_MAX || kind == DC_RK_MIN) {
        for (int64_t l = l0; l < l1; ++l)
            g[l] = 0;
        if (aux >= l0 && aux < l1)
            g[aux] = gy;
    } else if (kind == DC_RK_PROD && aux == 0) {
        for (int64_t l = l0; l < l1; ++l)
            g[l] = gy * (nz / x[l]);
    } else if (kind == DC_RK_LSE && y == y && y != (DC_S)INFINITY && y != (DC_S)-INFINITY) {
        for (int64_t l = l0; l < l1; ++l)
            g[l] = gy * DC_RK_F(lse_grad_term)(x[l], y, nz);
    } else {
        for (int64_t l = l0; l < l1; ++l)
            g[l] = DC_RK_F(grad)(kind, x[l], l, y, nz, aux, gy);
    }
}

/* g[c] for the columns c0..c1 at position l of outputs whose y, nz, aux and
 * gy start at column 0. */
DC_INLINE void DC_RK(grad_columns)(int kind, const DC_S *x, int64_t l, int64_t c0, int64_t c1, const DC_S *y,
                                   const DC_S *nz, const int64_t *aux, const DC_S *gy, DC_S *g)
{
    for (int64_t c = c0; c < c1; ++c)
        g[c] = DC_RK_F(grad)(kind, x[c], l, y[c], nz[c], aux[c], gy[c]);
}

/* The values' gradient g over the elements e0..e1 (row e / width). */
DC_INLINE void DC_RK(segment_grad)(int kind, const DC_S *v, int64_t width, const int64_t *index, const DC_S *y,
                                   const DC_S *nz, const int64_t *aux, const DC_S *gy, DC_S *g, int64_t e0, int64_t e1)
{
    if (width == 1) {
        for (int64_t i = e0; i < e1; ++i) {
            const int64_t out = index[i];
            g[i] = DC_RK_F(grad)(kind, v[i], i, y[out], nz[out], aux[out], gy[out]);
        }
        return;
    }
    int64_t i = e0 / width, c = e0 % width;
    for (int64_t e = e0; e < e1; ++i, c = 0) {
        const int64_t run = width - c < e1 - e ? width - c : e1 - e, base = index[i] * width + c;
        for (int64_t k = 0; k < run; ++k)
            g[e + k] = DC_RK_F(grad)(kind, v[e + k], i, y[base + k], nz[base + k], aux[base + k], gy[base + k]);
        e += run;
    }
}

#undef DC_RK
#undef DC_RK_F
