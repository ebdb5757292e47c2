#include "cupdate_fused.h"

#include "dual/scalar_math.h"

/* One row whose control is known: only the branch taken is computed. */
static void row_uniform(int64_t n, float z, float zb, const float *restrict c, const float *restrict f,
                        const float *restrict i, const float *restrict g, const float *restrict a,
                        float *restrict out, float *restrict gc, float *restrict gf, float *restrict gi,
                        float *restrict gg)
{
    if (z == 1) { /* FLUSH */
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) {
            const float si = dc_sigmoid_f32(i[e]), tg = dc_tanh_f32(g[e]);
            out[e] = si * tg;
            gc[e] = 0;
            gf[e] = 0;
            gi[e] = a[e] * tg * si * (1 - si);
            gg[e] = a[e] * si * (1 - tg * tg);
        }
    } else if (zb == 0) { /* COPY */
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) {
            out[e] = c[e];
            gc[e] = a[e];
            gf[e] = 0;
            gi[e] = 0;
            gg[e] = 0;
        }
    } else { /* UPDATE */
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) {
            const float sf = dc_sigmoid_f32(f[e]), si = dc_sigmoid_f32(i[e]), tg = dc_tanh_f32(g[e]);
            out[e] = sf * c[e] + si * tg;
            gc[e] = a[e] * sf;
            gf[e] = a[e] * c[e] * sf * (1 - sf);
            gi[e] = a[e] * tg * si * (1 - si);
            gg[e] = a[e] * si * (1 - tg * tg);
        }
    }
}

/* One row whose control changes from column to column: every branch is
 * computed and the right one selected. c and the adjoint are read for every
 * element: read only where a branch needs them, gcc made them masked loads,
 * which made the loop slower, its time depending on the control pattern;
 * read for every element, it runs as fast as a version written with
 * bit-operation selects that has no branches at all (figures:
 * bench/RESULTS.md, section "Measurements behind design choices in the
 * code"). */
static void row_varying(int64_t n, const float *restrict z, const float *restrict zb, const float *restrict c,
                        const float *restrict f, const float *restrict i, const float *restrict g,
                        const float *restrict a, float *restrict out, float *restrict gc, float *restrict gf,
                        float *restrict gi, float *restrict gg)
{
#pragma omp simd
    for (int64_t e = 0; e < n; ++e) {
        const float ce = c[e], ae = a[e];
        const float sf = dc_sigmoid_f32(f[e]), si = dc_sigmoid_f32(i[e]), tg = dc_tanh_f32(g[e]);
        const int flush = z[e] == 1, copy = !flush && zb[e] == 0;
        out[e] = flush ? si * tg : copy ? ce : sf * ce + si * tg;
        gc[e] = flush ? 0 : copy ? ae : ae * sf;
        gf[e] = (flush || copy) ? 0 : ae * ce * sf * (1 - sf);
        gi[e] = copy ? 0 : ae * tg * si * (1 - si);
        gg[e] = copy ? 0 : ae * si * (1 - tg * tg);
    }
}

void cupdate_fused_row(int64_t n, bool uniform, const float *z, const float *zb, const float *c, const float *f,
                       const float *i, const float *g, const float *adj, float *out, float *gc, float *gf, float *gi,
                       float *gg)
{
    if (uniform)
        row_uniform(n, z[0], zb[0], c, f, i, g, adj, out, gc, gf, gi, gg);
    else
        row_varying(n, z, zb, c, f, i, g, adj, out, gc, gf, gi, gg);
}

void cupdate_fused(int64_t rows, int64_t cols, bool per_row, const float *z, const float *zb, const float *c,
                   const float *f, const float *i, const float *g, const float *adj, float *out, float *gc, float *gf,
                   float *gi, float *gg)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = r * cols;
        if (per_row)
            row_uniform(cols, z[r], zb[r], c + o, f + o, i + o, g + o, adj + o, out + o, gc + o, gf + o, gi + o,
                        gg + o);
        else
            row_varying(cols, z, zb, c + o, f + o, i + o, g + o, adj + o, out + o, gc + o, gf + o, gi + o, gg + o);
    }
}
