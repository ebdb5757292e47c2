/* Device kernels of the model ops and optimizers: embedding (gather, and a
 * scatter-add adjoint with a thread per picked row and column, each sum in
 * position order), cross
 * entropy (a block per row, blocks taking several rows beyond the grid cap),
 * Adam and SGD updates, and the squared global norm of the gradients for
 * clipping (fixed-order trees, one copy to the host), with the largest
 * magnitude for a rescaled norm. */
#include "block_reduce.cuh"
#include "nn_cuda.h"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

/* The element formulas (src/ops/model_formulas.h), shared with the CPU. */
#define DC_S float
#define DC_SFX f32
#include "../ops/model_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "../ops/model_formulas.h"
#undef DC_S
#undef DC_SFX

using dc_cuda::block_reduce;
using dc_cuda::grid_for;
using dc_cuda::kBlock;

namespace {

template <typename T>
__global__ void gather_rows(const T *table, int64_t rs, int64_t cs, const int64_t *rows, int64_t n, int64_t width,
                            T *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * width; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width, j = i % width;
        out[i] = table[rows[r] * rs + j * cs];
    }
}

/* item (group u, column j) owns one element of the table's gradient: the row
 * of the u-th distinct id, column j, to which it adds the rows of gy at that
 * id's positions, in position order; neighbouring threads take neighbouring
 * columns */
template <typename T>
__global__ void scatter_groups(T *grad, int64_t rs, int64_t cs, const int64_t *groups, int64_t n_groups,
                               int64_t width, const T *gy)
{
    const int64_t *values = groups, *start = groups + n_groups, *positions = start + n_groups + 1;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_groups * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t u = i / width, j = i % width;
        T *g = grad + values[u] * rs + j * cs;
        T sum = *g;
        for (int64_t k = start[u]; k < start[u + 1]; ++k)
            sum += gy[positions[k] * width + j];
        *g = sum;
    }
}

/* the formulas by overloading, for the templates below */
__device__ __forceinline__ float softmax_term(float l, float m) { return dc_mf_softmax_term_f32(l, m); }
__device__ __forceinline__ double softmax_term(double l, double m) { return dc_mf_softmax_term_f64(l, m); }
__device__ __forceinline__ float ce_grad_of(float l, double lse, bool t, float scale)
{
    return dc_mf_cross_entropy_grad_f32(l, lse, t, scale);
}
__device__ __forceinline__ double ce_grad_of(double l, double lse, bool t, double scale)
{
    return dc_mf_cross_entropy_grad_f64(l, lse, t, scale);
}
__device__ __forceinline__ float adam_of(float w, float g, float *m, float *v, float lr_t, float b1, float b2,
                                         float eps_t, float decay)
{
    return dc_mf_adam_f32(w, g, m, v, lr_t, b1, b2, eps_t, decay);
}
__device__ __forceinline__ double adam_of(double w, double g, double *m, double *v, double lr_t, double b1,
                                          double b2, double eps_t, double decay)
{
    return dc_mf_adam_f64(w, g, m, v, lr_t, b1, b2, eps_t, decay);
}
__device__ __forceinline__ float sgd_of(float w, float g, float *buf, float lr, float mu)
{
    return dc_mf_sgd_f32(w, g, buf, lr, mu);
}
__device__ __forceinline__ double sgd_of(double w, double g, double *buf, double lr, double mu)
{
    return dc_mf_sgd_f64(w, g, buf, lr, mu);
}

/* row r (rows shared out over the blocks): lse[r] = max + log(sum exp(l - max));
 * loss[r] = lse[r] - l[target] */
template <typename T>
__global__ void ce_rows(const T *logits, int64_t n, int64_t c, const int64_t *target, double *lse, double *loss)
{
    __shared__ double part[kBlock];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) { /* uniform over the block */
        const T *l = logits + r * c;
        double m = -INFINITY;
        for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
            m = fmax(m, (double)l[k]);
        m = block_reduce(m, part, true);
        double s = 0;
        for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
            s += (double)softmax_term(l[k], (T)m); /* m is one of the logits: exact in T */
        s = block_reduce(s, part, false);
        if (threadIdx.x == 0) {
            lse[r] = m + log(s);
            loss[r] = lse[r] - (double)l[target[r]];
        }
    }
}

/* the sum of v[0..n) over one block, in a fixed order, or (take_max) the
 * largest of them (entries >= 0), returned to every thread */
__device__ double block_combine(const double *v, int64_t n, bool take_max, double *part)
{
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        s = take_max ? fmax(s, v[i]) : s + v[i];
    return block_reduce(s, part, take_max);
}

/* the mean of the per-row losses, in a fixed order, into a scalar */
template <typename T> __global__ void mean_of(const double *v, int64_t n, T *out)
{
    __shared__ double part[kBlock];
    const double s = block_combine(v, n, false, part);
    if (threadIdx.x == 0)
        *out = (T)(n ? s / (double)n : NAN);
}

/* one block: the sum of v[0..n) in a fixed order, or (take_max) the
 * largest of them (entries >= 0) */
__global__ void combine_of(const double *v, int64_t n, bool take_max, double *out)
{
    __shared__ double part[kBlock];
    const double s = block_combine(v, n, take_max, part);
    if (threadIdx.x == 0)
        *out = s;
}

template <typename T>
__global__ void ce_grad(T *g, int64_t rs, int64_t cs, const T *logits, int64_t n, int64_t c, const int64_t *target,
                        const double *lse, const T *gy, int add)
{
    const T scale = (T)(n ? (double)*gy / (double)n : 0.0);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * c; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / c, k = i % c;
        const T v = ce_grad_of(logits[i], lse[r], k == target[r], scale);
        T *gi = g + r * rs + k * cs;
        *gi = add ? *gi + v : v;
    }
}

template <typename T>
__global__ void adam(int64_t n, T *w, const T *g, T *m, T *v, T lr_t, T b1, T b2, T eps_t, T decay)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        w[e] = adam_of(w[e], g[e], &m[e], &v[e], lr_t, b1, b2, eps_t, decay);
}

template <typename T> __global__ void sgd(int64_t n, T *w, const T *g, T *buf, T lr, T mu)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        w[e] = sgd_of(w[e], g[e], &buf[e], lr, mu);
}

/* per-block partial results; block b writes part[b]: the sum of the squares
 * of x[e] * scale, or (take_max) the largest |x[e]| */
template <typename T> __global__ void grad_reduce(const T *x, int64_t n, double scale, bool take_max, double *part_out)
{
    __shared__ double part[kBlock];
    double s = 0;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const double v = (double)x[e];
        s = take_max ? fmax(s, fabs(v)) : s + (v * scale) * (v * scale);
    }
    s = block_reduce(s, part, take_max);
    if (threadIdx.x == 0)
        part_out[blockIdx.x] = s;
}

/* the product in double, as on the CPU: a float32 scale may underflow where
 * the scaled elements do not */
template <typename T> __global__ void scale_by(T *x, int64_t n, double s)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        x[e] = (T)((double)x[e] * s);
}

} // namespace

extern "C" {

dc_status dc_cuda_gather_rows(dc_ctx *ctx, dc_dtype dtype, const void *table, int64_t rs, int64_t cs,
                              const int64_t *rows, int64_t n, int64_t width, void *out)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (n * width == 0)
        return DC_OK;
    if (dtype == DC_F32)
        gather_rows<float><<<grid_for(ctx, n * width), kBlock, 0, st>>>((const float *)table, rs, cs, rows, n, width,
                                                                          (float *)out);
    else
        gather_rows<double><<<grid_for(ctx, n * width), kBlock, 0, st>>>((const double *)table, rs, cs, rows, n,
                                                                           width, (double *)out);
    return dc_cuda_check(ctx, cudaGetLastError(), "embedding gather");
}

dc_status dc_cuda_scatter_rows(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                               const int64_t *groups, int64_t n_groups, int64_t width, const void *gy)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    const int64_t items = n_groups * width;
    if (items == 0)
        return DC_OK;
    if (dtype == DC_F32)
        scatter_groups<float><<<grid_for(ctx, items), kBlock, 0, st>>>((float *)grad, rs, cs, groups, n_groups, width,
                                                                         (const float *)gy);
    else
        scatter_groups<double><<<grid_for(ctx, items), kBlock, 0, st>>>((double *)grad, rs, cs, groups, n_groups,
                                                                          width, (const double *)gy);
    return dc_cuda_check(ctx, cudaGetLastError(), "embedding scatter");
}

dc_status dc_cuda_cross_entropy(dc_ctx *ctx, dc_dtype dtype, const void *logits, int64_t n, int64_t c,
                                const int64_t *targets, double *lse, double *loss_rows, void *out)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (n > 0) {
        /* a block per row, up to the grid cap; beyond it blocks take several */
        const unsigned rows_grid = (unsigned)(n < ctx->cuda->max_blocks ? n : ctx->cuda->max_blocks);
        if (dtype == DC_F32)
            ce_rows<float><<<rows_grid, kBlock, 0, st>>>((const float *)logits, n, c, targets, lse, loss_rows);
        else
            ce_rows<double><<<rows_grid, kBlock, 0, st>>>((const double *)logits, n, c, targets, lse, loss_rows);
    }
    if (dtype == DC_F32)
        mean_of<float><<<1, kBlock, 0, st>>>(loss_rows, n, (float *)out);
    else
        mean_of<double><<<1, kBlock, 0, st>>>(loss_rows, n, (double *)out);
    return dc_cuda_check(ctx, cudaGetLastError(), "cross entropy");
}

dc_status dc_cuda_cross_entropy_grad(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                                     const void *logits, int64_t n, int64_t c, const int64_t *targets,
                                     const double *lse, const void *gy, bool add)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (n * c == 0)
        return DC_OK;
    if (dtype == DC_F32)
        ce_grad<float><<<grid_for(ctx, n * c), kBlock, 0, st>>>((float *)grad, rs, cs, (const float *)logits, n, c,
                                                                  targets, lse, (const float *)gy, add);
    else
        ce_grad<double><<<grid_for(ctx, n * c), kBlock, 0, st>>>((double *)grad, rs, cs, (const double *)logits, n,
                                                                   c, targets, lse, (const double *)gy, add);
    return dc_cuda_check(ctx, cudaGetLastError(), "cross entropy gradient");
}

dc_status dc_cuda_adam(dc_ctx *ctx, dc_dtype dtype, int64_t n, void *w, const void *g, void *m, void *v, double lr_t,
                       double b1, double b2, double eps_t, double decay)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        adam<float><<<grid_for(ctx, n), kBlock, 0, st>>>(n, (float *)w, (const float *)g, (float *)m, (float *)v,
                                                           (float)lr_t, (float)b1, (float)b2, (float)eps_t,
                                                           (float)decay);
    else
        adam<double><<<grid_for(ctx, n), kBlock, 0, st>>>(n, (double *)w, (const double *)g, (double *)m, (double *)v,
                                                            lr_t, b1, b2, eps_t, decay);
    return dc_cuda_check(ctx, cudaGetLastError(), "adam");
}

dc_status dc_cuda_sgd(dc_ctx *ctx, dc_dtype dtype, int64_t n, void *w, const void *g, void *buf, double lr, double mu)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        sgd<float><<<grid_for(ctx, n), kBlock, 0, st>>>(n, (float *)w, (const float *)g, (float *)buf, (float)lr,
                                                          (float)mu);
    else
        sgd<double><<<grid_for(ctx, n), kBlock, 0, st>>>(n, (double *)w, (const double *)g, (double *)buf, lr, mu);
    return dc_cuda_check(ctx, cudaGetLastError(), "sgd");
}

dc_status dc_cuda_grad_reduce(dc_ctx *ctx, int n, dc_tensor *const *params, dc_grad_reduction kind, double scale,
                              double *total)
{
    DC_CUDA_ENTER(ctx);
    const bool take_max = kind == DC_GRAD_MAX_ABS;
    /* Tensor i's blocks write their partial results into row i of a table
     * of kParts columns (the kernel strides over its grid, so kParts blocks
     * cover any size); rows a tensor leaves short stay zero. One block then
     * combines the table and the host copies back that one value. */
    constexpr unsigned kParts = 1024;
    const size_t cells = (size_t)n * kParts;
    double *table = (double *)dc_cuda_alloc(ctx, (cells + 1) * sizeof(double));
    if (!table)
        return DC_ERR_MEMORY;
    double *result = table + cells;
    cudaStream_t st = ctx->cuda->stream;
    dc_status s = dc_cuda_check(ctx, cudaMemsetAsync(table, 0, cells * sizeof(double), st), "gradient norm");
    for (int i = 0; s == DC_OK && i < n; ++i) {
        const dc_tensor *g = dc_tensor_grad(params[i]);
        if (!g)
            continue;
        const unsigned grid = grid_for(ctx, g->numel), blocks = grid < kParts ? grid : kParts;
        double *row = table + (size_t)i * kParts;
        if (g->dtype == DC_F32)
            grad_reduce<float><<<blocks, kBlock, 0, st>>>((const float *)g->data, g->numel, scale, take_max, row);
        else
            grad_reduce<double><<<blocks, kBlock, 0, st>>>((const double *)g->data, g->numel, scale, take_max, row);
        s = dc_cuda_check(ctx, cudaGetLastError(), "gradient norm");
    }
    if (s == DC_OK) {
        combine_of<<<1, kBlock, 0, st>>>(table, (int64_t)cells, take_max, result);
        s = dc_cuda_check(ctx, cudaGetLastError(), "gradient norm");
    }
    if (s == DC_OK)
        s = dc_cuda_to_host(ctx, total, result, sizeof *total);
    dc_cuda_free(ctx, table);
    return s;
}

dc_status dc_cuda_scale(dc_ctx *ctx, dc_dtype dtype, void *x, int64_t n, double s)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        scale_by<float><<<grid_for(ctx, n), kBlock, 0, st>>>((float *)x, n, s);
    else
        scale_by<double><<<grid_for(ctx, n), kBlock, 0, st>>>((double *)x, n, s);
    return dc_cuda_check(ctx, cudaGetLastError(), "scale");
}

} /* extern "C" */
