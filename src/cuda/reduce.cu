/* Device kernels of the reductions (reduce_cuda.h): over the len axis of
 * an [outer, len, inner] block, where inner is 1 and rows are longer than
 * kShortRow, a block of threads per row or, past kPiece elements, per
 * piece of kPiece elements of a row (each thread steps through a strided
 * share, then a tree of fixed shape combines the threads' states:
 * deterministic, the maximum's winner chosen by position), the pieces'
 * states then combined by a block per row the same way; few long columns
 * (dc_rk_column_cuts, reduce_kinds.h) a thread per cut of a column, the
 * cuts' states then combined in order by a thread per column; a thread per
 * output walking len in order otherwise. Segment reductions: a thread per
 * segment, piece of rows and column, walking the segment's rows of the
 * piece in ascending order, then a thread per segment and column combining
 * the pieces' states in order. Gradients: a thread per element. The
 * element math is src/ops/reduce_formulas.h, shared with the CPU. */
#include "block_reduce.cuh"
#include "sorted_search.cuh"
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

/* Rows longer than this are reduced in pieces of this many elements, a
 * block each, so that a few long rows (a whole tensor: one row) spread over
 * the device; a constant, so that the order of the operations (the bits of
 * a product or log-sum-exp) follows from the shape alone. */
constexpr int64_t kPiece = 16384;

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
        static __device__ __forceinline__ T lse_error(T m, T s, T y) { return dc_rf_lse_error_##SFX(m, s, y); }        \
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

/* Calls f(v, l) for the elements v = row[l] of [l0, l1) that are this
 * thread's strided share, in ascending l; four loads are issued before
 * their steps, so that a thread waits on memory once per four elements
 * (the order of the steps is unchanged). */
template <typename T, typename F> __device__ __forceinline__ void walk_share(const T *row, int64_t l0, int64_t l1, F f)
{
    const int64_t stride = blockDim.x;
    int64_t l = l0 + threadIdx.x;
    for (; l + 3 * stride < l1; l += 4 * stride) {
        const T a = row[l], b = row[l + stride], c = row[l + 2 * stride], d = row[l + 3 * stride];
        f(a, l);
        f(b, l + stride);
        f(c, l + 2 * stride);
        f(d, l + 3 * stride);
    }
    for (; l < l1; l += stride)
        f(row[l], l);
}

/* The state of the elements [l0, l1) of a row (their positions l), by the
 * block's threads and its tree; returned to every thread. */
template <typename T>
__device__ typename rf<T>::state row_state(int kind, const T *row, int64_t l0, int64_t l1, typename rf<T>::wide *acc,
                                           typename rf<T>::wide *nz, int64_t *aux)
{
    typename rf<T>::state st = rf<T>::init(kind);
    walk_share(row, l0, l1, [&](T v, int64_t l) { rf<T>::step(kind, &st, v, l); });
    return block_combine<T>(kind, st, acc, nz, aux);
}

/* log-sum-exp's second walk over the elements [l0, l1) of a row: the sum
 * of their terms for the row's maximum m (0 where m needs none), as
 * row_state. */
template <typename T>
__device__ typename rf<T>::wide row_lse_sum(const T *row, int64_t l0, int64_t l1, T m, typename rf<T>::wide *acc,
                                            typename rf<T>::wide *nz, int64_t *aux)
{
    typename rf<T>::state sum = rf<T>::init(DC_RK_SUM);
    if (rf<T>::lse_sums(m)) /* uniform over the block */
        walk_share(row, l0, l1, [&](T v, int64_t) { sum.acc += rf<T>::lse_term(v, m); });
    return block_combine<T>(DC_RK_SUM, sum, acc, nz, aux).acc;
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
        state st = row_state<T>(kind, row, 0, len, s_acc, s_nz, s_aux);
        if (kind == DC_RK_LSE) {
            const T m = st.acc, sum = row_lse_sum<T>(row, 0, len, m, s_acc, s_nz, s_aux);
            st.acc = rf<T>::lse_finish(m, sum);
            st.nz = rf<T>::lse_error(m, sum, (T)st.acc);
        }
        if (threadIdx.x == 0) {
            y[r] = st.acc;
            nz[r] = st.nz;
            aux[r] = st.aux;
        }
    }
}

/* A block per piece p of kPiece elements of the [rows, len] block x (row p
 * / splits, from element p % splits * kPiece), its state into part[p]: on
 * pass 0 the kind's, on pass 1 log-sum-exp's sum of terms for its row's
 * maximum (y, written by pass 0). */
template <typename T>
__global__ void reduce_pieces(int kind, int pass, const T *x, int64_t rows, int64_t len, int64_t splits, const T *y,
                              typename rf<T>::state *part)
{
    typedef typename rf<T>::state state;
    __shared__ typename rf<T>::wide s_acc[kBlock];
    __shared__ typename rf<T>::wide s_nz[kBlock];
    __shared__ int64_t s_aux[kBlock];
    for (int64_t p = blockIdx.x; p < rows * splits; p += gridDim.x) { /* uniform over the block */
        const int64_t r = p / splits, l0 = p % splits * kPiece, l1 = l0 + kPiece < len ? l0 + kPiece : len;
        const T *row = x + r * len;
        state st;
        if (pass == 0) {
            st = row_state<T>(kind, row, l0, l1, s_acc, s_nz, s_aux);
        } else {
            st = rf<T>::init(DC_RK_SUM);
            st.acc = row_lse_sum<T>(row, l0, l1, y[r], s_acc, s_nz, s_aux);
        }
        if (threadIdx.x == 0)
            part[p] = st;
    }
}

/* A block per row: the states of its splits pieces (part) combined, each
 * thread its strided share in order, then the tree (the winner of a
 * maximum chosen by position across pieces as within one); pass 0 the
 * row's result, pass 1 log-sum-exp finished from the row's maximum (y). */
template <typename T>
__global__ void combine_pieces(int kind, int pass, int64_t rows, int64_t splits, const typename rf<T>::state *part,
                               T *y, T *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    __shared__ typename rf<T>::wide s_acc[kBlock];
    __shared__ typename rf<T>::wide s_nz[kBlock];
    __shared__ int64_t s_aux[kBlock];
    const int k = pass == 0 ? kind : DC_RK_SUM;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) { /* uniform over the block */
        state st = rf<T>::init(k);
        for (int64_t q = threadIdx.x; q < splits; q += blockDim.x)
            st = rf<T>::combine(k, st, part[r * splits + q]);
        st = block_combine<T>(k, st, s_acc, s_nz, s_aux);
        if (threadIdx.x == 0) {
            if (pass == 0) {
                y[r] = st.acc;
                nz[r] = st.nz;
                aux[r] = st.aux;
            } else {
                const T m = y[r];
                y[r] = rf<T>::lse_finish(m, st.acc);
                nz[r] = rf<T>::lse_error(m, st.acc, y[r]);
            }
        }
    }
}

/* f(col[l * inner], l) for l = l0 .. l1 - 1 in order, the elements loaded
 * kColumnBatch at a time ahead of their steps: a thread walking a column
 * alone then waits on memory once a batch, not once a step (the same
 * steps in the same order: the same bits). */
constexpr int kColumnBatch = 8;
template <typename T, typename F>
__device__ __forceinline__ void walk_column(const T *col, int64_t inner, int64_t l0, int64_t l1, F f)
{
    int64_t l = l0;
    for (; l + kColumnBatch <= l1; l += kColumnBatch) {
        T v[kColumnBatch];
#pragma unroll
        for (int j = 0; j < kColumnBatch; ++j)
            v[j] = col[(l + j) * inner];
#pragma unroll
        for (int j = 0; j < kColumnBatch; ++j)
            f(v[j], l + j);
    }
    for (; l < l1; ++l)
        f(col[l * inner], l);
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
        walk_column(col, inner, 0, len, [&](T v, int64_t l) { rf<T>::step(kind, &st, v, l); });
        if (kind == DC_RK_LSE) {
            const T m = st.acc;
            T sum = 0;
            if (rf<T>::lse_sums(m))
                walk_column(col, inner, 0, len, [&](T v, int64_t) { sum += rf<T>::lse_term(v, m); });
            st.acc = rf<T>::lse_finish(m, sum);
            st.nz = rf<T>::lse_error(m, sum, (T)st.acc);
        }
        y[i] = st.acc;
        nz[i] = st.nz;
        aux[i] = st.aux;
    }
}

/* A thread per (cut, output) of an [outer, len, inner] block whose columns
 * are cut (dc_rk_column_cuts, reduce_kinds.h; neighbouring threads read
 * neighbouring columns): the cut's state from the neutral one into
 * part[cut * outputs + output], on pass 0 the kind's, on pass 1
 * log-sum-exp's sum of terms for the output's maximum (y, from pass 0), as
 * the CPU's cut_piece walks it. */
template <typename T>
__global__ void reduce_column_cuts(int kind, int pass, const T *x, int64_t outer, int64_t len, int64_t inner,
                                   int64_t cuts, const T *y, typename rf<T>::state *part)
{
    typedef typename rf<T>::state state;
    const int64_t outputs = outer * inner;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < cuts * outputs;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t cut = t / outputs, i = t - cut * outputs;
        const int64_t l0 = cut * DC_RK_COLUMN_CUT, l1 = l0 + DC_RK_COLUMN_CUT < len ? l0 + DC_RK_COLUMN_CUT : len;
        const T *col = x + i / inner * len * inner + i % inner;
        state st = rf<T>::init(pass ? DC_RK_SUM : kind);
        if (pass == 0) {
            walk_column(col, inner, l0, l1, [&](T v, int64_t l) { rf<T>::step(kind, &st, v, l); });
        } else {
            const T m = y[i];
            walk_column(col, inner, l0, l1, [&](T v, int64_t) {
                st.acc += rf<T>::lse_sums(m) ? (typename rf<T>::wide)rf<T>::lse_term(v, m) : 0.0;
            });
        }
        part[t] = st;
    }
}

/* A thread per output of a block whose columns are cut: its cuts' states
 * combined in order; pass 0 its result, pass 1 log-sum-exp finished from
 * its maximum (y). */
template <typename T>
__global__ void combine_column_cuts(int kind, int pass, int64_t outputs, int64_t cuts,
                                    const typename rf<T>::state *part, T *y, T *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < outputs;
         i += (int64_t)gridDim.x * blockDim.x) {
        state st = part[i];
        for (int64_t k = 1; k < cuts; ++k)
            st = rf<T>::combine(pass ? DC_RK_SUM : kind, st, part[k * outputs + i]);
        if (pass == 0) {
            y[i] = st.acc;
            nz[i] = st.nz;
            aux[i] = st.aux;
        } else {
            const T m = y[i];
            y[i] = rf<T>::lse_finish(m, (T)st.acc);
            nz[i] = rf<T>::lse_error(m, (T)st.acc, y[i]);
        }
    }
}

/* A thread per element: its output and position along len by one
 * division where inner is 1 (rows), two otherwise. */
template <typename T>
__global__ void reduce_grad(int kind, const T *x, int64_t total, int64_t len, int64_t inner, const T *y, const T *nz,
                            const int64_t *aux, const T *gy, T *g)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t out, pos;
        if (inner == 1) {
            out = e / len;
            pos = e - out * len;
        } else {
            const int64_t o = e / (len * inner), r = e - o * len * inner;
            pos = r / inner;
            out = o * inner + (r - pos * inner);
        }
        g[e] = rf<T>::grad(kind, x[e], pos, y[out], nz[out], aux[out], gy[out]);
    }
}

/* A thread per (piece, segment, column): the segment's rows in piece p
 * (rows p * piece_rows onwards, found by a binary search in its ascending
 * positions) stepped in ascending order from the neutral state, into
 * part[p * outputs + s * width + c]. With one piece (part NULL) the
 * outputs instead, the state combined into the neutral one as
 * segment_fold does. */
template <typename T>
__global__ void segment_pieces(int kind, const T *v, int64_t width, const int64_t *start, const int64_t *positions,
                               int64_t n_segments, int64_t pieces, int64_t piece_rows, typename rf<T>::state *part,
                               T *y, T *nz, int64_t *aux)
{
    typedef typename rf<T>::state state;
    const int64_t outputs = n_segments * width;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < pieces * outputs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = i / outputs, k = i - p * outputs, s = k / width, c = k - s * width;
        const int64_t row0 = p * piece_rows, row1 = row0 + piece_rows, end = start[s + 1];
        state st = rf<T>::init(kind);
        for (int64_t q = dc_cuda::lower_bound(positions, start[s], end, row0); q < end && positions[q] < row1; ++q) {
            const int64_t row = positions[q];
            rf<T>::step(kind, &st, v[row * width + c], row);
        }
        if (part) {
            part[i] = st;
        } else {
            st = rf<T>::combine(kind, rf<T>::init(kind), st);
            y[k] = st.acc;
            nz[k] = st.nz;
            aux[k] = st.aux;
        }
    }
}

/* A thread per output (segment, column): its pieces' states combined in
 * order into the neutral state, as the CPU combines its pieces' (a piece
 * without rows of the segment holds the neutral state, which leaves the
 * result as it is: the bits of one walk over the segment's rows). */
template <typename T>
__global__ void segment_fold(int kind, int64_t outputs, int64_t pieces, const typename rf<T>::state *part, T *y, T *nz,
                             int64_t *aux)
{
    typedef typename rf<T>::state state;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < outputs;
         k += (int64_t)gridDim.x * blockDim.x) {
        state st = rf<T>::init(kind);
        for (int64_t p = 0; p < pieces; ++p)
            st = rf<T>::combine(kind, st, part[p * outputs + k]);
        y[k] = st.acc;
        nz[k] = st.nz;
        aux[k] = st.aux;
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

/* Blocks for a loop of a block per item, capped for grid-stride loops. */
unsigned blocks_for(const dc_ctx *ctx, int64_t items)
{
    return (unsigned)(items < ctx->cuda->max_blocks ? items : ctx->cuda->max_blocks);
}

/* The pieces of kPiece elements of each row of an [outer, len, inner]
 * block; 1 where rows are reduced whole (inner > 1, or short rows). */
int64_t splits_of(int64_t len, int64_t inner) { return inner == 1 && len > kPiece ? (len + kPiece - 1) / kPiece : 1; }

/* The pieces of piece_rows rows of n rows. */
int64_t row_pieces(int64_t n, int64_t piece_rows) { return n > piece_rows ? (n + piece_rows - 1) / piece_rows : 1; }

/* The block's kernels queued on the context's stream; returns how many
 * (dc_cuda_launched counts them). */
template <typename T>
int launch_block(dc_ctx *ctx, int kind, const void *x, int64_t outer, int64_t len, int64_t inner, void *y, void *nz,
                 int64_t *aux, void *scratch)
{
    cudaStream_t st = ctx->cuda->stream;
    const int64_t splits = splits_of(len, inner);
    if (splits > 1) {
        typename rf<T>::state *part = (typename rf<T>::state *)scratch;
        const int passes = kind == DC_RK_LSE ? 2 : 1; /* log-sum-exp: the maximum, then the sum of the terms */
        const unsigned piece_grid = blocks_for(ctx, outer * splits), row_grid = blocks_for(ctx, outer);
        const T *maxima = (const T *)y; /* log-sum-exp's second pass: the rows' maxima from the first */
        for (int pass = 0; pass < passes; ++pass) {
            reduce_pieces<T><<<piece_grid, kBlock, 0, st>>>(kind, pass, (const T *)x, outer, len, splits, maxima, part);
            combine_pieces<T><<<row_grid, kBlock, 0, st>>>(kind, pass, outer, splits, part, (T *)y, (T *)nz, aux);
        }
        return 2 * passes;
    }
    const int64_t cuts = dc_rk_column_cuts(outer, len, inner);
    if (cuts > 1) {
        typename rf<T>::state *part = (typename rf<T>::state *)scratch;
        const int passes = kind == DC_RK_LSE ? 2 : 1; /* log-sum-exp: the maximum, then the sum of the terms */
        for (int pass = 0; pass < passes; ++pass) {
            reduce_column_cuts<T><<<grid_for(ctx, cuts * outer * inner), kBlock, 0, st>>>(
                kind, pass, (const T *)x, outer, len, inner, cuts, (const T *)y, part);
            combine_column_cuts<T><<<grid_for(ctx, outer * inner), kBlock, 0, st>>>(kind, pass, outer * inner, cuts,
                                                                                    part, (T *)y, (T *)nz, aux);
        }
        return 2 * passes;
    }
    if (inner == 1 && len > kShortRow)
        reduce_rows<T><<<blocks_for(ctx, outer), kBlock, 0, st>>>(kind, (const T *)x, outer, len, (T *)y, (T *)nz, aux);
    else
        reduce_columns<T><<<grid_for(ctx, outer * inner), kBlock, 0, st>>>(kind, (const T *)x, outer, len, inner,
                                                                           (T *)y, (T *)nz, aux);
    return 1;
}

/* The segment reduction's kernels queued on the context's stream; returns
 * how many. */
template <typename T>
int launch_segments(dc_ctx *ctx, int kind, const void *values, int64_t n, int64_t width, const int64_t *start,
                    const int64_t *positions, int64_t n_segments, int64_t piece_rows, void *y, void *nz, int64_t *aux,
                    void *scratch)
{
    cudaStream_t st = ctx->cuda->stream;
    const int64_t outputs = n_segments * width, pieces = row_pieces(n, piece_rows);
    typename rf<T>::state *part = pieces > 1 ? (typename rf<T>::state *)scratch : nullptr;
    segment_pieces<T><<<grid_for(ctx, pieces * outputs), kBlock, 0, st>>>(
        kind, (const T *)values, width, start, positions, n_segments, pieces, piece_rows, part, (T *)y, (T *)nz, aux);
    if (pieces == 1)
        return 1;
    segment_fold<T><<<grid_for(ctx, outputs), kBlock, 0, st>>>(kind, outputs, pieces, part, (T *)y, (T *)nz, aux);
    return 2;
}

/* Every state is a wide accumulator, a wide product and a count: the
 * scratch's size holds for both element types. */
static_assert(sizeof(rf<float>::state) == sizeof(rf<double>::state), "the states of both types have one size");

} // namespace

extern "C" {

size_t dc_cuda_reduce_scratch(int64_t outer, int64_t len, int64_t inner)
{
    const int64_t splits = splits_of(len, inner), cuts = dc_rk_column_cuts(outer, len, inner);
    const int64_t states = splits > 1 ? outer * splits : cuts > 1 ? outer * inner * cuts : 0;
    return (size_t)states * sizeof(rf<double>::state);
}

dc_status dc_cuda_reduce_block(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, void *y, void *nz, int64_t *aux, void *scratch)
{
    DC_CUDA_ENTER(ctx);
    if (outer * inner == 0)
        return DC_OK;
    const int launches = dtype == DC_F32 ? launch_block<float>(ctx, kind, x, outer, len, inner, y, nz, aux, scratch)
                                         : launch_block<double>(ctx, kind, x, outer, len, inner, y, nz, aux, scratch);
    return dc_cuda_launched(ctx, launches, "reduction");
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

size_t dc_cuda_segment_scratch(int64_t n, int64_t n_segments, int64_t width, int64_t piece_rows)
{
    const int64_t pieces = row_pieces(n, piece_rows);
    return pieces > 1 ? (size_t)(pieces * n_segments * width) * sizeof(rf<double>::state) : 0;
}

dc_status dc_cuda_segment_reduce(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                                 const int64_t *start, const int64_t *positions, int64_t n_segments, int64_t piece_rows,
                                 void *y, void *nz, int64_t *aux, void *scratch)
{
    DC_CUDA_ENTER(ctx);
    if (n_segments * width == 0)
        return DC_OK;
    const int launches = dtype == DC_F32 ? launch_segments<float>(ctx, kind, values, n, width, start, positions,
                                                                  n_segments, piece_rows, y, nz, aux, scratch)
                                         : launch_segments<double>(ctx, kind, values, n, width, start, positions,
                                                                   n_segments, piece_rows, y, nz, aux, scratch);
    return dc_cuda_launched(ctx, launches, "segment reduction");
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
