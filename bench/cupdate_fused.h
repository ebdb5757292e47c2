/* The hand-fused c-update: forward and gradient in one pass, as an expert
 * would write it without AD. It bounds how fast any AD approach can be. */
#ifndef DC_BENCH_CUPDATE_FUSED_H
#define DC_BENCH_CUPDATE_FUSED_H

#include <stdbool.h>
#include <stdint.h>

/* rows x cols matrices c, f, i, g and the adjoint of the output; control
 * z, zb holds one value per row (per_row) or per column. Writes the output
 * and the four gradients. */
void cupdate_fused(int64_t rows, int64_t cols, bool per_row, const float *z, const float *zb, const float *c,
                   const float *f, const float *i, const float *g, const float *adj, float *out, float *gc, float *gf,
                   float *gi, float *gg);

/* One row of n elements on the calling thread: control z[0], zb[0] for the
 * whole row (uniform) or z[e], zb[e] per element. */
void cupdate_fused_row(int64_t n, bool uniform, const float *z, const float *zb, const float *c, const float *f,
                       const float *i, const float *g, const float *adj, float *out, float *gc, float *gf, float *gi,
                       float *gg);

#endif /* DC_BENCH_CUPDATE_FUSED_H */
