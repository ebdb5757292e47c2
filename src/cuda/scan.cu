/* Device kernels of the prefix scans (dc_op_scan) and their adjoints, the
 * formulas of src/ops/scan_formulas.h. A contiguous [outer, len, inner]
 * block is scanned along len (scan_cuda.h says how it is split):
 * - rows (inner 1, len > DC_CUDA_SCAN_ROW_MIN): a block per row and chunk of
 *   DC_CUDA_SCAN_ROW_CHUNK elements, each thread walking 16 neighbouring
 *   elements, the threads' results chained by a block scan;
 * - columns and short rows: a thread per line and chunk, neighbouring
 *   threads on neighbouring columns (coalesced).
 * A line of several chunks takes three launches: each chunk summarized
 * alone (its total, or its adjoint's affine map), the summaries of each
 * line chained by a block per line, each chunk scanned again from its
 * carry. Every combination runs in an order fixed by the shape (no atomics),
 * and nothing waits for the host. */
#include <stdint.h>
#include <string.h>

#include "block_reduce.cuh"
#include "scan_cuda.h"
#include "vec16.cuh"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define DC_S float
#define DC_SFX f32
#include "../ops/scan_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "../ops/scan_formulas.h"
#undef DC_S
#undef DC_SFX

using dc_cuda::grid_for;
using dc_cuda::kBlock;
using dc_cuda::vec16;

namespace
{

constexpr int kItems = DC_CUDA_SCAN_ROW_CHUNK / kBlock;
static_assert(kItems * kBlock == DC_CUDA_SCAN_ROW_CHUNK, "a row chunk is kItems per thread of a block");

/* ONE_PASS: lines of one chunk; SUMMARIZE: each chunk's summary into parts;
 * APPLY: each chunk from the carry in parts. */
enum { ONE_PASS, SUMMARIZE, APPLY };

/* The scan's combination for op OP, as the block scans below take it,
 * chosen when compiled. */
template <int OP> struct forward_op {
    typedef double value;
    __device__ value identity() const { return dc_scan_neutral(OP); }
    __device__ value operator()(value earlier, value later) const { return dc_scan_combine(OP, earlier, later); }
};

/* The adjoint's: affine maps, in the adjoint's order (right to left). */
struct adjoint_op {
    typedef dc_scan_affine value;
    __device__ value identity() const { return dc_scan_affine_identity(); }
    __device__ value operator()(value earlier, value later) const { return dc_scan_affine_then(earlier, later); }
};

/* the terms of the adjoint's recurrence, by overloading */
__device__ __forceinline__ dc_scan_terms terms_of(int op, bool exclusive, const float *x, const float *y,
                                                  const float *g, int64_t i, int64_t len, int64_t stride)
{
    return dc_scan_terms_f32(op, exclusive, x, y, g, i, len, stride);
}
__device__ __forceinline__ dc_scan_terms terms_of(int op, bool exclusive, const double *x, const double *y,
                                                  const double *g, int64_t i, int64_t len, int64_t stride)
{
    return dc_scan_terms_f64(op, exclusive, x, y, g, i, len, stride);
}

__device__ __forceinline__ int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

/* A thread's n (at most kItems) neighbouring elements from p into
 * registers, 16 bytes at a time where they are whole and aligned: every
 * load is issued before the first value is used. */
template <typename T> __device__ __forceinline__ void load_items(const T *p, int64_t n, T *v)
{
    typedef typename vec16<T>::type VT;
    if (n == kItems && (uintptr_t)p % 16 == 0) {
#pragma unroll
        for (int k = 0; k < kItems; k += vec16<T>::n) {
            const VT w = *(const VT *)(p + k);
            memcpy(v + k, &w, sizeof w);
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k)
        v[k] = k < n ? p[k] : (T)0;
}

/* The first n of v to p, as load_items reads them. */
template <typename T> __device__ __forceinline__ void store_items(T *p, int64_t n, const T *v)
{
    typedef typename vec16<T>::type VT;
    if (n == kItems && (uintptr_t)p % 16 == 0) {
#pragma unroll
        for (int k = 0; k < kItems; k += vec16<T>::n) {
            VT w;
            memcpy(&w, v + k, sizeof w);
            *(VT *)(p + k) = w;
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k)
        if (k < n)
            p[k] = v[k];
}

/* Stores v, an element of the input's adjoint: assigned, or added in T (the
 * bits of a temporary added afterwards). */
template <typename T> __device__ __forceinline__ void store_adjoint(T *dst, double v, bool add)
{
    *dst = add ? (T)(*dst + (T)v) : (T)v;
}

/* The exclusive scan of one value per thread, the threads taken in the
 * order of `rank` (a permutation of the block's threads), combined in a
 * fixed order (Hillis and Steele); *total gets the whole block's. */
template <class Op>
__device__ typename Op::value block_exclusive_scan(Op f, typename Op::value v, int rank, typename Op::value *scratch,
                                                   typename Op::value *total)
{
    typedef typename Op::value value;
    scratch[rank] = v;
    __syncthreads();
    for (int w = 1; w < (int)blockDim.x; w *= 2) {
        const value before = rank >= w ? scratch[rank - w] : f.identity();
        __syncthreads();
        if (rank >= w)
            scratch[rank] = f(before, scratch[rank]);
        __syncthreads();
    }
    *total = scratch[blockDim.x - 1];
    const value ex = rank > 0 ? scratch[rank - 1] : f.identity();
    __syncthreads();
    return ex;
}

/* Rows of len elements, a block per row and chunk (pieces shared out over
 * the blocks); each thread holds its elements in registers between its
 * two walks. */
template <typename T, int OP>
__global__ void scan_rows(bool exclusive, const T *x, T *y, int64_t rows, int64_t len, int64_t chunks, double *parts,
                          int mode)
{
    __shared__ double scratch[kBlock];
    const forward_op<OP> f;
    for (int64_t p = blockIdx.x; p < rows * chunks; p += gridDim.x) { /* uniform over the block */
        const int64_t r = p / chunks, b = (p % chunks) * DC_CUDA_SCAN_ROW_CHUNK;
        const int64_t e = smaller(b + DC_CUDA_SCAN_ROW_CHUNK, len);
        const int64_t i0 = smaller(b + (int64_t)threadIdx.x * kItems, e), n = smaller(i0 + kItems, e) - i0;
        T v[kItems];
        load_items(x + r * len + i0, n, v);
        double acc = f.identity();
#pragma unroll
        for (int k = 0; k < kItems; ++k)
            if (k < n)
                acc = f(acc, (double)v[k]);
        double total;
        const double before = block_exclusive_scan(f, acc, (int)threadIdx.x, scratch, &total);
        if (mode == SUMMARIZE) {
            if (threadIdx.x == 0)
                parts[p] = total;
            continue;
        }
        double run = f(mode == APPLY ? parts[p] : f.identity(), before);
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
            const double next = f(run, (double)v[k]);
            v[k] = (T)(exclusive ? run : next);
            run = next;
        }
        store_items(y + r * len + i0, n, v);
    }
}

/* The adjoint of scan_rows: the threads chained from the right, each
 * holding its elements of g (and of x and y where the op reads them) in
 * registers, with the neighbours that its positions' windows reach. */
template <typename T, int OP>
__global__ void adjoint_rows(bool exclusive, const T *x, const T *y, const T *g, T *gx, int64_t rows, int64_t len,
                             int64_t chunks, dc_scan_affine *parts, int mode, bool add)
{
    constexpr bool reads_xy = OP != DC_REDUCE_SUM;
    __shared__ dc_scan_affine scratch[kBlock];
    const adjoint_op f;
    const int rank = (int)(blockDim.x - 1 - threadIdx.x);
    for (int64_t p = blockIdx.x; p < rows * chunks; p += gridDim.x) { /* uniform over the block */
        const int64_t r = p / chunks, b = (p % chunks) * DC_CUDA_SCAN_ROW_CHUNK;
        const int64_t e = smaller(b + DC_CUDA_SCAN_ROW_CHUNK, len);
        const int64_t i0 = smaller(b + (int64_t)threadIdx.x * kItems, e), n = smaller(i0 + kItems, e) - i0;
        const T *gr = g + r * len, *xr = x + r * len, *yr = y + r * len;
        T gv[kItems], xv[kItems], yv[kItems];
        load_items(gr + i0, n, gv);
        if (reads_xy) {
            load_items(xr + i0, n, xv);
            load_items(yr + i0, n, yv);
        }
        /* the neighbours beyond the thread's elements, within the row */
        const bool more = i0 + n < len;
        const double g_after = exclusive && more ? (double)gr[i0 + n] : 0.0;
        const double x_after = reads_xy && more ? (double)xr[i0 + n] : 0.0;
        const double y_after = reads_xy && more ? (double)yr[i0 + n] : 0.0;
        const double y_before = reads_xy && i0 > 0 ? (double)yr[i0 - 1] : 0.0;
        /* the terms of the thread's element j */
        auto terms = [&](int j) {
            const bool inside = j + 1 < n;
            const int next = j + 1 < kItems ? j + 1 : j, prev = j > 0 ? j - 1 : 0;
            dc_scan_window w;
            w.g = (double)gv[j];
            w.g_next = inside ? (double)gv[next] : g_after;
            w.x = reads_xy ? (double)xv[j] : 0.0;
            w.x_next = !reads_xy ? 0.0 : inside ? (double)xv[next] : x_after;
            w.y_prev = !reads_xy ? 0.0 : j > 0 ? (double)yv[prev] : y_before;
            w.y = reads_xy ? (double)yv[j] : 0.0;
            w.y_next = !reads_xy ? 0.0 : inside ? (double)yv[next] : y_after;
            return dc_scan_terms_of(OP, exclusive, i0 + j == 0, i0 + j + 1 == len, w);
        };
        dc_scan_affine acc = f.identity();
#pragma unroll
        for (int j = kItems - 1; j >= 0; --j)
            if (j < n) {
                const dc_scan_terms t = terms(j);
                const dc_scan_affine here = {t.c, t.k};
                acc = f(acc, here);
            }
        dc_scan_affine total;
        const dc_scan_affine after = block_exclusive_scan(f, acc, rank, scratch, &total);
        if (mode == SUMMARIZE) {
            if (threadIdx.x == 0)
                parts[p] = total;
            continue;
        }
        T *gxr = gx + r * len + i0;
        T out[kItems];
        if (add)
            load_items(gxr, n, out);
        double lambda = after.c + dc_scan_mul(after.m, mode == APPLY ? parts[p].c : 0.0);
#pragma unroll
        for (int j = kItems - 1; j >= 0; --j)
            if (j < n) {
                const dc_scan_terms t = terms(j);
                lambda = t.c + dc_scan_mul(t.k, lambda);
                const T v = (T)dc_scan_mul(t.s, lambda);
                out[j] = add ? (T)(out[j] + v) : v;
            }
        store_items(gxr, n, out);
    }
}

/* Lines of len elements at stride inner, a thread per line and chunk of
 * `chunk` elements; neighbouring threads take neighbouring columns. */
template <typename T, int OP>
__global__ void scan_lines(bool exclusive, const T *x, T *y, int64_t outer, int64_t len, int64_t inner, int64_t chunks,
                           double *parts, int mode)
{
    const int64_t chunk = chunks > 1 ? DC_CUDA_SCAN_LINE_CHUNK : len;
    const forward_op<OP> f;
    const int64_t items = outer * chunks * inner;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
         it += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = it % inner, c = it / inner % chunks, o = it / inner / chunks;
        const int64_t part = (o * inner + j) * chunks + c;
        const int64_t b = c * chunk, e = smaller(b + chunk, len);
        const T *xl = x + o * len * inner + j;
        T *yl = y + o * len * inner + j;
        double acc = mode == APPLY ? parts[part] : f.identity();
        for (int64_t i = b; i < e; ++i) {
            const double next = f(acc, (double)xl[i * inner]);
            if (mode != SUMMARIZE)
                yl[i * inner] = (T)(exclusive ? acc : next);
            acc = next;
        }
        if (mode == SUMMARIZE)
            parts[part] = acc;
    }
}

/* The adjoint of scan_lines. */
template <typename T>
__global__ void adjoint_lines(int op, bool exclusive, const T *x, const T *y, const T *g, T *gx, int64_t outer,
                              int64_t len, int64_t inner, int64_t chunks, dc_scan_affine *parts, int mode, bool add)
{
    const int64_t chunk = chunks > 1 ? DC_CUDA_SCAN_LINE_CHUNK : len;
    const adjoint_op f;
    const int64_t items = outer * chunks * inner;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
         it += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = it % inner, c = it / inner % chunks, o = it / inner / chunks;
        const int64_t part = (o * inner + j) * chunks + c;
        const int64_t b = c * chunk, e = smaller(b + chunk, len), at = o * len * inner + j;
        dc_scan_affine acc = f.identity();
        double lambda = mode == APPLY ? parts[part].c : 0.0;
        for (int64_t i = e; i-- > b;) {
            const dc_scan_terms t = terms_of(op, exclusive, x + at, y + at, g + at, i, len, inner);
            if (mode == SUMMARIZE) {
                const dc_scan_affine here = {t.c, t.k};
                acc = f(acc, here);
            } else {
                lambda = t.c + dc_scan_mul(t.k, lambda);
                store_adjoint(gx + at + i * inner, dc_scan_mul(t.s, lambda), add);
            }
        }
        if (mode == SUMMARIZE)
            parts[part] = acc;
    }
}

/* Each line's chunk summaries (parts[line * chunks + c]) replaced by the
 * combination of the chunks before it in the scan's order (reverse: of
 * those after it), a block per line, kBlock summaries at a time. */
template <class Op>
__global__ void chain_parts(Op f, typename Op::value *parts, int64_t lines, int64_t chunks, bool reverse)
{
    typedef typename Op::value value;
    __shared__ value scratch[kBlock];
    for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) { /* uniform over the block */
        value *pl = parts + line * chunks;
        value carry = f.identity();
        for (int64_t t0 = 0; t0 < chunks; t0 += blockDim.x) {
            const int64_t k = t0 + threadIdx.x, c = reverse ? chunks - 1 - k : k;
            const value own = k < chunks ? pl[c] : f.identity();
            value total;
            const value before = block_exclusive_scan(f, own, (int)threadIdx.x, scratch, &total);
            if (k < chunks)
                pl[c] = f(carry, before);
            carry = f(carry, total);
        }
    }
}

/* Blocks for n pieces of a block each, capped for the pieces' loop. */
unsigned blocks_for(const dc_ctx *ctx, int64_t n)
{
    const int64_t cap = ctx->cuda->max_blocks;
    return (unsigned)(n < 1 ? 1 : n < cap ? n : cap);
}

bool by_rows(int64_t len, int64_t inner) { return inner == 1 && len > DC_CUDA_SCAN_ROW_MIN; }

template <typename T, int OP>
void forward_pass(const dc_ctx *ctx, int mode, bool exclusive, const T *x, T *y, int64_t outer, int64_t len,
                  int64_t inner, int64_t chunks, double *parts)
{
    cudaStream_t st = ctx->cuda->stream;
    if (by_rows(len, inner)) {
        const unsigned grid = blocks_for(ctx, outer * chunks);
        scan_rows<T, OP><<<grid, kBlock, 0, st>>>(exclusive, x, y, outer, len, chunks, parts, mode);
    } else {
        const unsigned grid = grid_for(ctx, outer * chunks * inner);
        scan_lines<T, OP><<<grid, kBlock, 0, st>>>(exclusive, x, y, outer, len, inner, chunks, parts, mode);
    }
}

template <typename T, int OP>
void adjoint_pass(const dc_ctx *ctx, int mode, bool exclusive, const T *x, const T *y, const T *g, T *gx,
                  int64_t outer, int64_t len, int64_t inner, int64_t chunks, dc_scan_affine *parts, bool add)
{
    cudaStream_t st = ctx->cuda->stream;
    if (by_rows(len, inner)) {
        const unsigned grid = blocks_for(ctx, outer * chunks);
        adjoint_rows<T, OP><<<grid, kBlock, 0, st>>>(exclusive, x, y, g, gx, outer, len, chunks, parts, mode, add);
    } else {
        const unsigned grid = grid_for(ctx, outer * chunks * inner);
        /* the CPU emulation's rewrite (mirror.cmake) wants the kernel and its launch on one line */
        // clang-format off
        adjoint_lines<T><<<grid, kBlock, 0, st>>>(OP, exclusive, x, y, g, gx, outer, len, inner, chunks, parts, mode,
                                                   add);
        // clang-format on
    }
}

template <typename T, int OP>
int scan_typed(const dc_ctx *ctx, bool exclusive, const T *x, T *y, int64_t outer, int64_t len, int64_t inner,
               double *parts)
{
    const int64_t chunks = dc_cuda_scan_chunks(outer, len, inner);
    if (chunks == 1) {
        forward_pass<T, OP>(ctx, ONE_PASS, exclusive, x, y, outer, len, inner, 1, NULL);
        return 1;
    }
    typedef forward_op<OP> fold;
    const fold f;
    const unsigned lines = blocks_for(ctx, outer * inner);
    forward_pass<T, OP>(ctx, SUMMARIZE, exclusive, x, y, outer, len, inner, chunks, parts);
    chain_parts<fold><<<lines, kBlock, 0, ctx->cuda->stream>>>(f, parts, outer * inner, chunks, false);
    forward_pass<T, OP>(ctx, APPLY, exclusive, x, y, outer, len, inner, chunks, parts);
    return 3;
}

/* scan_typed for the op, each op's kernels compiled for it. */
template <typename T>
int scan_by_op(const dc_ctx *ctx, int op, bool exclusive, const T *x, T *y, int64_t outer, int64_t len, int64_t inner,
               double *parts)
{
    switch (op) {
    case DC_REDUCE_SUM:
        return scan_typed<T, DC_REDUCE_SUM>(ctx, exclusive, x, y, outer, len, inner, parts);
    case DC_REDUCE_PROD:
        return scan_typed<T, DC_REDUCE_PROD>(ctx, exclusive, x, y, outer, len, inner, parts);
    case DC_REDUCE_MAX:
        return scan_typed<T, DC_REDUCE_MAX>(ctx, exclusive, x, y, outer, len, inner, parts);
    default:
        return scan_typed<T, DC_REDUCE_MIN>(ctx, exclusive, x, y, outer, len, inner, parts);
    }
}

template <typename T, int OP>
int adjoint_typed(const dc_ctx *ctx, bool exclusive, const T *x, const T *y, const T *g, T *gx, int64_t outer,
                  int64_t len, int64_t inner, dc_scan_affine *parts, bool add)
{
    const int64_t chunks = dc_cuda_scan_chunks(outer, len, inner);
    if (chunks == 1) {
        adjoint_pass<T, OP>(ctx, ONE_PASS, exclusive, x, y, g, gx, outer, len, inner, 1, NULL, add);
        return 1;
    }
    const adjoint_op f;
    const unsigned lines = blocks_for(ctx, outer * inner);
    adjoint_pass<T, OP>(ctx, SUMMARIZE, exclusive, x, y, g, gx, outer, len, inner, chunks, parts, add);
    chain_parts<adjoint_op><<<lines, kBlock, 0, ctx->cuda->stream>>>(f, parts, outer * inner, chunks, true);
    adjoint_pass<T, OP>(ctx, APPLY, exclusive, x, y, g, gx, outer, len, inner, chunks, parts, add);
    return 3;
}

/* adjoint_typed for the op, as scan_by_op. */
template <typename T>
int adjoint_by_op(const dc_ctx *ctx, int op, bool exclusive, const T *x, const T *y, const T *g, T *gx, int64_t outer,
                  int64_t len, int64_t inner, dc_scan_affine *parts, bool add)
{
    switch (op) {
    case DC_REDUCE_SUM:
        return adjoint_typed<T, DC_REDUCE_SUM>(ctx, exclusive, x, y, g, gx, outer, len, inner, parts, add);
    case DC_REDUCE_PROD:
        return adjoint_typed<T, DC_REDUCE_PROD>(ctx, exclusive, x, y, g, gx, outer, len, inner, parts, add);
    case DC_REDUCE_MAX:
        return adjoint_typed<T, DC_REDUCE_MAX>(ctx, exclusive, x, y, g, gx, outer, len, inner, parts, add);
    default:
        return adjoint_typed<T, DC_REDUCE_MIN>(ctx, exclusive, x, y, g, gx, outer, len, inner, parts, add);
    }
}

/* The products' adjoint reads the scan's output through
 * dc_scan_zero_safe_output, which needs each line's first zero element:
 * first[(o * cuts + c) * inner + j] gets the first zero of line (o, j) in
 * cut c of DC_CUDA_SCAN_LINE_CHUNK positions (len where none), a thread per
 * line and cut, neighbouring threads on neighbouring columns. */
template <typename T>
__global__ void first_zeros(const T *x, int64_t outer, int64_t len, int64_t inner, int64_t cuts, int64_t *first)
{
    const int64_t items = outer * cuts * inner;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
         it += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = it % inner, c = it / inner % cuts, o = it / inner / cuts;
        const int64_t b = c * DC_CUDA_SCAN_LINE_CHUNK, e = smaller(b + DC_CUDA_SCAN_LINE_CHUNK, len);
        int64_t zero = len;
        for (int64_t i = b; i < e && zero == len; ++i)
            if (x[(o * len + i) * inner + j] == (T)0)
                zero = i;
        first[it] = zero;
    }
}

/* Each cut's first zero made the line's first up to the cut's end: the
 * earliest of the cuts so far, a thread per line. */
__global__ void earliest_zeros(int64_t outer, int64_t inner, int64_t cuts, int64_t *first)
{
    for (int64_t line = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; line < outer * inner;
         line += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = line / inner, j = line % inner;
        int64_t *f = first + o * cuts * inner + j;
        for (int64_t c = 1; c < cuts; ++c)
            if (f[(c - 1) * inner] < f[c * inner])
                f[c * inner] = f[(c - 1) * inner];
    }
}

/* ys: y as the products' adjoint takes it (dc_scan_zero_safe_output). */
template <typename T>
__global__ void zero_safe_outputs(bool exclusive, const T *y, const int64_t *first, int64_t outer, int64_t len,
                                  int64_t inner, int64_t cuts, T *ys)
{
    const int64_t n = outer * len * inner;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = e % inner, i = e / inner % len, o = e / inner / len;
        const int64_t zero = first[(o * cuts + i / DC_CUDA_SCAN_LINE_CHUNK) * inner + j];
        ys[e] = (T)dc_scan_zero_safe_output(exclusive, zero, i, (double)y[e]);
    }
}

template <typename T>
void zero_safe_typed(const dc_ctx *ctx, bool exclusive, const T *x, const T *y, int64_t outer, int64_t len,
                     int64_t inner, int64_t *first, T *ys)
{
    const int64_t cuts = (len + DC_CUDA_SCAN_LINE_CHUNK - 1) / DC_CUDA_SCAN_LINE_CHUNK;
    cudaStream_t stream = ctx->cuda->stream;
    const unsigned per_cut = grid_for(ctx, outer * cuts * inner), per_line = grid_for(ctx, outer * inner);
    const unsigned per_element = grid_for(ctx, outer * len * inner);
    first_zeros<T><<<per_cut, kBlock, 0, stream>>>(x, outer, len, inner, cuts, first);
    earliest_zeros<<<per_line, kBlock, 0, stream>>>(outer, inner, cuts, first);
    zero_safe_outputs<T><<<per_element, kBlock, 0, stream>>>(exclusive, y, first, outer, len, inner, cuts, ys);
}

} // namespace

extern "C" {

dc_status dc_cuda_scan_zero_safe_outputs(dc_ctx *ctx, dc_dtype dtype, bool exclusive, const void *x, const void *y,
                                         int64_t outer, int64_t len, int64_t inner, void *scratch, void *ys)
{
    DC_CUDA_ENTER(ctx);
    if (outer == 0 || len == 0 || inner == 0)
        return DC_OK;
    if (dtype == DC_F32)
        zero_safe_typed<float>(ctx, exclusive, (const float *)x, (const float *)y, outer, len, inner,
                               (int64_t *)scratch, (float *)ys);
    else
        zero_safe_typed<double>(ctx, exclusive, (const double *)x, (const double *)y, outer, len, inner,
                                (int64_t *)scratch, (double *)ys);
    return dc_cuda_launched(ctx, 3, "scan's zero-safe products");
}

dc_status dc_cuda_scan(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, void *y, int64_t outer,
                       int64_t len, int64_t inner, void *parts)
{
    DC_CUDA_ENTER(ctx);
    if (outer == 0 || len == 0 || inner == 0)
        return DC_OK;
    const int launched = dtype == DC_F32 ? scan_by_op<float>(ctx, op, exclusive, (const float *)x, (float *)y, outer,
                                                             len, inner, (double *)parts)
                                         : scan_by_op<double>(ctx, op, exclusive, (const double *)x, (double *)y, outer,
                                                              len, inner, (double *)parts);
    return dc_cuda_launched(ctx, launched, "scan");
}

dc_status dc_cuda_scan_adjoint(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, const void *y,
                               const void *gy, void *gx, int64_t outer, int64_t len, int64_t inner, void *parts,
                               bool add)
{
    DC_CUDA_ENTER(ctx);
    if (outer == 0 || len == 0 || inner == 0)
        return DC_OK;
    const int launched =
        dtype == DC_F32
            ? adjoint_by_op<float>(ctx, op, exclusive, (const float *)x, (const float *)y, (const float *)gy,
                                   (float *)gx, outer, len, inner, (dc_scan_affine *)parts, add)
            : adjoint_by_op<double>(ctx, op, exclusive, (const double *)x, (const double *)y, (const double *)gy,
                                    (double *)gx, outer, len, inner, (dc_scan_affine *)parts, add);
    return dc_cuda_launched(ctx, launched, "scan adjoint");
}

} /* extern "C" */
