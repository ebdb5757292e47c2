/* Device kernels of the reductions (reduce_cuda.h): over the len axis of
 * an [outer, len, inner] block, a block of threads per row where inner is
 * 1 and rows are longer than kShortRow (each thread steps through a
 * strided share of the row, then a tree of fixed shape combines the
 * threads' states: deterministic, the maximum's winner chosen by
 * position), a thread per output walking len in order otherwise; segment reductions a thread per segment and column, walking
 * the segment's rows in ascending order; gradients a thread per element.
 * The element math is src/ops/reduce_formulas.h, shared with the CPU. */
#include "block_reduce.cuh"
#include "reduce_cuda.h"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define DC_S float
#define DC_SFX f32
#include "../ops/reduce_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "../ops/reduce_formulas.h"
#undef DC_S
#undef DC_SFX

using dc_cuda::grid_for;
using dc_cuda::kBlock;

/* Rows up to this long are walked by one thread each: a block of threads
 * per row would leave most of them idle. */
constexpr int64_t kShortRow = 32;

namespace {

/* The formulas by scalar type, for the templates below. */
template <typename T> struct rf;
#define DC_RF_TRAITS(T, SFX)                                                                                           \
    template <> struct rf<T> {                                                                                         \
        typedef dc_rf_state_##SFX state;                                                                               \
        typedef dc_rf_wide_##SFX wide; /* what a state accumulates in */                                              \
        static __device__ __forceinline__ state init(int k) { return dc_rf_init_##SFX(k); }                            \
        static __device__ __forceinline__ void step(int k, state *s, T v, int64_t p) { dc_rf_step_##SFX(k, s, v, p); } \
        static __device__ __forceinline__ state combine(int k, state a, state b)                                       \
        {                                                                                                              \
            return dc_rf_combine_##SFX(k, a, b);                                                                       \
        }                                                                                                              \
        static __device__ __forceinline__ bool lse_sums(T m) { return dc_rf_lse_sums_##SFX(m); }                       \
        static __device__ __forceinline__ T lse_term(T v, T m) { return dc_rf_lse_term_##SFX(v, m); }                  \
        static __device__ __forceinline__ T lse_finish(T m, T s) { return dc_rf_lse_finish_##SFX(m, s); }              \
        static __device__ __forceinline__ T grad(int k, T v, int64_t p, T y, T nz, int64_t aux, T gy)                  \
        {                                                                                                              \
            return dc_rf_grad_##SFX(k, v, p, y, nz, aux, gy);                                                          \
        }                                                                                                              \
    };
DC_RF_TRAITS(float, f32)
DC_RF_TRAITS(double, f64)
#undef DC_RF_TRAITS

/* The states of a block's threads combined by a tree of fixed shape (the
 * lower half takes the upper), returned to every thread. The scratch
 * arrays hold kBlock entries. */
template <typename T>
__device__ typename rf<T>::state block_combine(int kind, typename rf<T>::state st, typename rf<T>::wide *acc,
                                               typename rf<T>::wide *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    const int t = threadIdx.x;
    acc[t] = st.acc;
    nz[t] = st.nz;
    aux[t] = st.aux;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (t < w) {
            const state a = {acc[t], nz[t], aux[t]}, b = {acc[t + w], nz[t + w], aux[t + w]};
            const state c = rf<T>::combine(kind, a, b);
            acc[t] = c.acc;
            nz[t] = c.nz;
            aux[t] = c.aux;
        }
        __syncthreads();
    }
    const state r = {acc[0], nz[0], aux[0]};
    __syncthreads();
    return r;
}

/* A block per row of the [rows, len] block x (blocks take several rows
 * beyond the grid cap). */
template <typename T>
__global__ void reduce_rows(int kind, const T *x, int64_t rows, int64_t len, T *y, T *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    __shared__ typename rf<T>::wide s_acc[kBlock]; /* the states' accumulation type (reduce_formulas.h) */
    __shared__ typename rf<T>::wide s_nz[kBlock];
    __shared__ int64_t s_aux[kBlock];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) { /* uniform over the block */
        const T *row = x + r * len;
        state st = rf<T>::init(kind);
        for (int64_t l = threadIdx.x; l < len; l += blockDim.x)
            rf<T>::step(kind, &st, row[l], l);
        st = block_combine<T>(kind, st, s_acc, s_nz, s_aux);
        if (kind == DC_RK_LSE) {
            const T m = st.acc;
            state sum = rf<T>::init(DC_RK_SUM);
            for (int64_t l = threadIdx.x; rf<T>::lse_sums(m) && l < len; l += blockDim.x)
                sum.acc += rf<T>::lse_term(row[l], m);
            sum = block_combine<T>(DC_RK_SUM, sum, s_acc, s_nz, s_aux);
            st.acc = rf<T>::lse_finish(m, sum.acc);
        }
        if (threadIdx.x == 0) {
            y[r] = st.acc;
            nz[r] = st.nz;
            aux[r] = st.aux;
        }
    }
}

/* A thread per output (o, c) of the [outer, len, inner] block x, walking
 * len in order; neighbouring threads read neighbouring columns (or short
 * rows). */
template <typename T>
__global__ void reduce_columns(int kind, const T *x, int64_t outer, int64_t len, int64_t inner, T *y, T *nz,
                               int64_t *aux)
{
    typedef typename rf<T>::state state;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < outer * inner;
         i += (int64_t)gridDim.x * blockDim.x) {
        const T *col = x + i / inner * len * inner + i % inner;
        state st = rf<T>::init(kind);
        for (int64_t l = 0; l < len; ++l)
            rf<T>::step(kind, &st, col[l * inner], l);
        if (kind == DC_RK_LSE) {
            const T m = st.acc;
            T sum = 0;
            for (int64_t l = 0; rf<T>::lse_sums(m) && l < len; ++l)
                sum += rf<T>::lse_term(col[l * inner], m);
            st.acc = rf<T>::lse_finish(m, sum);
        }
        y[i] = st.acc;
        nz[i] = st.nz;
        aux[i] = st.aux;
    }
}

template <typename T>
__global__ void reduce_grad(int kind, const T *x, int64_t total, int64_t len, int64_t inner, const T *y, const T *nz,
                            const int64_t *aux, const T *gy, T *g)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t out = e / (len * inner) * inner + e % inner;
        g[e] = rf<T>::grad(kind, x[e], e / inner % len, y[out], nz[out], aux[out], gy[out]);
    }
}

/* A thread per (segment, column), the segment's rows in ascending order,
 * in pieces of piece_rows rows: each piece's state from the neutral one,
 * the pieces' states combined in order (the CPU's order; a piece without
 * rows, which the CPU combines too, leaves a state as it is). */
template <typename T>
__global__ void segment_reduce(int kind, const T *v, int64_t width, const int64_t *start, const int64_t *positions,
                               int64_t n_segments, int64_t piece_rows, T *y, T *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_segments * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = i / width, c = i % width;
        state st = rf<T>::init(kind), piece = st;
        int64_t piece_of = -1;
        for (int64_t k = start[s]; k < start[s + 1]; ++k) {
            const int64_t row = positions[k];
            if (row / piece_rows != piece_of) {
                st = rf<T>::combine(kind, st, piece);
                piece = rf<T>::init(kind);
                piece_of = row / piece_rows;
            }
            rf<T>::step(kind, &piece, v[row * width + c], row);
        }
        st = rf<T>::combine(kind, st, piece);
        y[i] = st.acc;
        nz[i] = st.nz;
        aux[i] = st.aux;
    }
}

template <typename T>
__global__ void segment_grad(int kind, const T *v, int64_t total, int64_t width, const int64_t *index, const T *y,
                             const T *nz, const int64_t *aux, const T *gy, T *g)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / width, out = index[row] * width + e % width;
        g[e] = rf<T>::grad(kind, v[e], row, y[out], nz[out], aux[out], gy[out]);
    }
}

template <typename T>
void launch_block(dc_ctx *ctx, int kind, const void *x, int64_t outer, int64_t len, int64_t inner, void *y, void *nz,
                  int64_t *aux)
{
    cudaStream_t st = ctx->cuda->stream;
    if (inner == 1 && len > kShortRow) {
        const unsigned grid = (unsigned)(outer < ctx->cuda->max_blocks ? outer : ctx->cuda->max_blocks);
        reduce_rows<T><<<grid, kBlock, 0, st>>>(kind, (const T *)x, outer, len, (T *)y, (T *)nz, aux);
    } else {
        reduce_columns<T><<<grid_for(ctx, outer * inner), kBlock, 0, st>>>(kind, (const T *)x, outer, len, inner,
                                                                           (T *)y, (T *)nz, aux);
    }
}

} // namespace

extern "C" {

dc_status dc_cuda_reduce_block(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, void *y, void *nz, int64_t *aux)
{
    DC_CUDA_ENTER(ctx);
    if (outer * inner == 0)
        return DC_OK;
    if (dtype == DC_F32)
        launch_block<float>(ctx, kind, x, outer, len, inner, y, nz, aux);
    else
        launch_block<double>(ctx, kind, x, outer, len, inner, y, nz, aux);
    return dc_cuda_launched(ctx, 1, "reduction");
}

dc_status dc_cuda_reduce_block_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                                    int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy,
                                    void *g)
{
    DC_CUDA_ENTER(ctx);
    const int64_t total = outer * len * inner;
    if (total == 0)
        return DC_OK;
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        reduce_grad<float><<<grid_for(ctx, total), kBlock, 0, st>>>(kind, (const float *)x, total, len, inner,
                                                                    (const float *)y, (const float *)nz, aux,
                                                                    (const float *)gy, (float *)g);
    else
        reduce_grad<double><<<grid_for(ctx, total), kBlock, 0, st>>>(kind, (const double *)x, total, len, inner,
                                                                     (const double *)y, (const double *)nz, aux,
                                                                     (const double *)gy, (double *)g);
    return dc_cuda_launched(ctx, 1, "reduction gradient");
}

dc_status dc_cuda_segment_reduce(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t width,
                                 const int64_t *start, const int64_t *positions, int64_t n_segments,
                                 int64_t piece_rows, void *y, void *nz, int64_t *aux)
{
    DC_CUDA_ENTER(ctx);
    const int64_t items = n_segments * width;
    if (items == 0)
        return DC_OK;
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        segment_reduce<float><<<grid_for(ctx, items), kBlock, 0, st>>>(
            kind, (const float *)values, width, start, positions, n_segments, piece_rows, (float *)y, (float *)nz,
            aux);
    else
        segment_reduce<double><<<grid_for(ctx, items), kBlock, 0, st>>>(
            kind, (const double *)values, width, start, positions, n_segments, piece_rows, (double *)y, (double *)nz,
            aux);
    return dc_cuda_launched(ctx, 1, "segment reduction");
}

dc_status dc_cuda_segment_reduce_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const int64_t *index, const void *y, const void *nz,
                                      const int64_t *aux, const void *gy, void *g)
{
    DC_CUDA_ENTER(ctx);
    const int64_t total = n * width;
    if (total == 0)
        return DC_OK;
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        segment_grad<float><<<grid_for(ctx, total), kBlock, 0, st>>>(kind, (const float *)values, total, width, index,
                                                                     (const float *)y, (const float *)nz, aux,
                                                                     (const float *)gy, (float *)g);
    else
        segment_grad<double><<<grid_for(ctx, total), kBlock, 0, st>>>(kind, (const double *)values, total, width, index,
                                                                      (const double *)y, (const double *)nz, aux,
                                                                      (const double *)gy, (double *)g);
    return dc_cuda_launched(ctx, 1, "segment reduction gradient");
}

} /* extern "C" */
