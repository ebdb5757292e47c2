/* The hand-fused c-update kernel; see cupdate_fused_cuda.h. */
#include "cupdate_fused_cuda.h"

#include <cuda_runtime.h>

#include "dual/scalar_math.h"

static const int kBlock = 256;

/* One thread per element; blockIdx.y is the row, so that per-row control is
 * one value for the whole block and no thread divides to find its row. Each
 * branch reads only the inputs it needs: FLUSH never touches c and f, COPY
 * only c. */
static __global__ void cupdate_fused_kernel(int cols, bool per_row, const float *__restrict__ z,
                                            const float *__restrict__ zb, const float *__restrict__ c,
                                            const float *__restrict__ f, const float *__restrict__ i,
                                            const float *__restrict__ g, const float *__restrict__ adj,
                                            float *__restrict__ out, float *__restrict__ gc, float *__restrict__ gf,
                                            float *__restrict__ gi, float *__restrict__ gg)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols)
        return;
    const int64_t e = (int64_t)blockIdx.y * cols + col;
    const int k = per_row ? (int)blockIdx.y : col;
    const float a = adj[e];
    if (z[k] == 1) { /* FLUSH */
        const float si = dc_sigmoid_f32(i[e]), tg = dc_tanh_f32(g[e]);
        out[e] = si * tg;
        gc[e] = 0;
        gf[e] = 0;
        gi[e] = a * tg * si * (1 - si);
        gg[e] = a * si * (1 - tg * tg);
    } else if (zb[k] == 0) { /* COPY */
        out[e] = c[e];
        gc[e] = a;
        gf[e] = 0;
        gi[e] = 0;
        gg[e] = 0;
    } else { /* UPDATE */
        const float ce = c[e];
        const float sf = dc_sigmoid_f32(f[e]), si = dc_sigmoid_f32(i[e]), tg = dc_tanh_f32(g[e]);
        out[e] = sf * ce + si * tg;
        gc[e] = a * sf;
        gf[e] = a * ce * sf * (1 - sf);
        gi[e] = a * tg * si * (1 - si);
        gg[e] = a * si * (1 - tg * tg);
    }
}

extern "C" int cupdate_fused_cuda(int64_t rows, int64_t cols, bool per_row, const float *z, const float *zb,
                                  const float *c, const float *f, const float *i, const float *g, const float *adj,
                                  float *out, float *gc, float *gf, float *gi, float *gg, void *stream)
{
    if (rows <= 0 || cols <= 0)
        return (int)cudaSuccess;
    /* the grid's y dimension holds the rows */
    if (rows > 65535 || cols > INT32_MAX)
        return (int)cudaErrorInvalidValue;
    const dim3 grid((unsigned)((cols + kBlock - 1) / kBlock), (unsigned)rows);
    cupdate_fused_kernel<<<grid, kBlock, 0, (cudaStream_t)stream>>>((int)cols, per_row, z, zb, c, f, i, g, adj, out, gc,
                                                                    gf, gi, gg);
    return (int)cudaGetLastError();
}
