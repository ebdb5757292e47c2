/* Device kernels of the model ops and optimizers: index reading and
 * grouping on the device, embedding (gather, and a scatter-add adjoint with
 * a thread per table row and column, each sum in position order), cross
 * entropy (a block per row, blocks taking several rows beyond the grid cap),
 * Adam and SGD updates, and gradient clipping (fixed-order trees, every
 * decision taken on the device). None of them makes the host wait. */
#include <string.h>

#include "block_reduce.cuh"
#include "sorted_search.cuh"
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

/* item (row v, column j) owns one element of the table's gradient, to which
 * it adds the rows of gy at id v's positions, in position order; rows no id
 * picked are left as they are. Neighbouring threads take neighbouring
 * columns. */
template <typename T>
__global__ void scatter_groups(T *grad, int64_t rs, int64_t cs, const int64_t *start, const int64_t *positions,
                               int64_t rows, int64_t width, const T *gy)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t v = i / width, j = i % width;
        if (start[v] == start[v + 1])
            continue;
        T *g = grad + v * rs + j * cs;
        T sum = *g;
        for (int64_t k = start[v]; k < start[v + 1]; ++k)
            sum += gy[positions[k] * width + j];
        *g = sum;
    }
}

/* Index values stored as T into int64 (out), and per block the first
 * position (in the block's share) of a value that is not an integer in
 * 0..limit-1, as a negated double (so that the block's maximum is the
 * smallest position), or -INFINITY when none; such a value becomes 0. */
template <typename T>
__global__ void read_indices(const T *values, int64_t n, int64_t limit, int64_t *out, double *part_out)
{
    __shared__ double part[kBlock];
    double worst = -INFINITY;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double v = (double)values[i];
        const bool ok = v >= 0 && v < (double)limit && v == floor(v);
        out[i] = ok ? (int64_t)v : 0;
        if (!ok)
            worst = fmax(worst, -(double)i);
    }
    worst = block_reduce(worst, part, true);
    if (threadIdx.x == 0)
        part_out[blockIdx.x] = worst;
}

/* One block: the first bad position over the blocks' parts; if there is one
 * and the context's record is free, the record takes it (so the first call
 * in stream order that met a bad index is the one reported). */
template <typename T>
__global__ void claim_index_error(const double *parts, int n_parts, const T *values, int64_t limit, int site,
                                  dc_cuda_index_error *record)
{
    __shared__ double part[kBlock];
    double worst = -INFINITY;
    for (int i = threadIdx.x; i < n_parts; i += blockDim.x)
        worst = fmax(worst, parts[i]);
    worst = block_reduce(worst, part, true);
    if (threadIdx.x == 0 && worst > -INFINITY && !record->claimed) {
        const int64_t pos = (int64_t)-worst;
        record->claimed = 1;
        record->site = site;
        record->position = pos;
        record->value = (double)values[pos];
        record->limit = limit;
    }
}

/* ---- ids grouped by value: a stable radix sort of their positions ----
 *
 * Each pass orders the (id, position) pairs stably by one digit of the id
 * (kDigitBits wide, the lowest first), so that after the last the pairs are
 * in ascending id and, within an id, ascending position. The ids are cut
 * into tiles of DC_CUDA_GROUP_TILE consecutive ones: a pass counts the
 * digits of each tile (tile_digit_counts, in any order), scans the counts
 * of each digit over the tiles (scan_digit_rows), and places each pair at
 * its digit's start, plus the counts of that digit in the tiles before, in
 * the threads before and in its thread's ids before it (scatter_by_digit,
 * a thread of the tile's block taking kGroupItems consecutive ids; the
 * tile's order is staged in shared memory, so that consecutive threads
 * write consecutive places of a digit, gathering the pairs from the tile).
 * Then each id's start is a binary search in the sorted ids
 * (group_starts). Tiles do not depend on the grid and nothing is atomic:
 * the same ids give the same groups.
 *
 * Each thread counts its own ids in its own 4-byte counters (no two threads
 * write a word between barriers), one per digit: 64 digits of 128 threads
 * fill 33 KB of shared memory, which bounds the digit's width; with the
 * tile's digits, then its order, staged (4 bytes an id, 8 KB) 42 KB of the
 * 48 a block may declare, which bounds the tile. The counts read ids from
 * global memory with consecutive threads (a warp's reads one run of 256
 * bytes). */

constexpr int kGroupThreads = 128;
constexpr int kGroupItems = DC_CUDA_GROUP_TILE / kGroupThreads;
constexpr int kDigitBits = 6;
constexpr int kDigits = 1 << kDigitBits;
static_assert(kDigits == DC_CUDA_GROUP_DIGITS, "the scratch's size (nn_cuda.h) counts these digits");
static_assert(kGroupThreads * kGroupItems == DC_CUDA_GROUP_TILE, "a tile is the threads' items");
/* counts[d * kCountStride + t]: digit d among thread t's ids; the row is one
 * longer than the threads so that the threads summing rows take different
 * banks */
constexpr int kCountStride = kGroupThreads + 1;
/* the (digit, thread) counts are scanned a thread's share each, a piece
 * lying in one digit's row */
constexpr int kScanPiece = kDigits * kGroupThreads / kGroupThreads;
static_assert(kGroupThreads % kScanPiece == 0, "a piece lies in one row");

/* Exclusive prefix sum of v over the block's threads in thread order; *total
 * gets the block's sum. scratch: blockDim.x shared entries, free again on
 * return. */
template <typename T>
__device__ T block_exclusive_scan(T v, T *scratch, T *total)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int w = 1; w < (int)blockDim.x; w *= 2) {
        const T add = (int)threadIdx.x >= w ? scratch[threadIdx.x - w] : (T)0;
        __syncthreads();
        scratch[threadIdx.x] += add;
        __syncthreads();
    }
    const T inclusive = scratch[threadIdx.x];
    *total = scratch[blockDim.x - 1];
    __syncthreads();
    return inclusive - v;
}

/* Where id m of a tile stages its digit: one word skipped every 32, so that
 * the threads reading their consecutive ids take different banks. */
__device__ __forceinline__ int staged_digit_at(int m) { return m + m / 32; }
constexpr int kStagedDigits = DC_CUDA_GROUP_TILE + DC_CUDA_GROUP_TILE / 32;

/* The digit (at `shift`) of each of this thread's ids of the tile beginning
 * at id `first`, -1 past the end, and their counts in the thread's column
 * of `counts`. The tile's digits are staged in `stage` (kStagedDigits
 * shared words) from ids read by consecutive threads; the caller
 * synchronizes before `stage` is written again. */
__device__ void count_digits(const int64_t *keys, int64_t first, int64_t n, int shift, int *counts, int *digit,
                             int *stage)
{
#pragma unroll
    for (int k = 0; k < kGroupItems; ++k) {
        const int m = k * kGroupThreads + (int)threadIdx.x;
        stage[staged_digit_at(m)] = first + m < n ? (int)((keys[first + m] >> shift) & (kDigits - 1)) : -1;
    }
    for (int d = 0; d < kDigits; ++d)
        counts[d * kCountStride + threadIdx.x] = 0;
    __syncthreads();
    for (int k = 0; k < kGroupItems; ++k) {
        digit[k] = stage[staged_digit_at((int)threadIdx.x * kGroupItems + k)];
        if (digit[k] >= 0)
            ++counts[digit[k] * kCountStride + threadIdx.x];
    }
}

/* hist[d * n_tiles + tile]: how many ids of the tile have digit d. A count
 * needs no order: thread t counts ids t, t + kGroupThreads, ... of the
 * tile, so that a warp reads consecutive ids. */
__global__ void tile_digit_counts(const int64_t *keys, int64_t n, int shift, int64_t n_tiles, int64_t *hist)
{
    __shared__ int counts[kDigits * kCountStride];
    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        for (int d = 0; d < kDigits; ++d)
            counts[d * kCountStride + threadIdx.x] = 0;
        const int64_t first = tile * DC_CUDA_GROUP_TILE;
#pragma unroll
        for (int k = 0; k < kGroupItems; ++k) {
            const int64_t i = first + (int64_t)k * kGroupThreads + threadIdx.x;
            if (i < n)
                ++counts[(int)((keys[i] >> shift) & (kDigits - 1)) * kCountStride + threadIdx.x];
        }
        __syncthreads();
        if ((int)threadIdx.x < kDigits) {
            int sum = 0;
            for (int t = 0; t < kGroupThreads; ++t)
                sum += counts[threadIdx.x * kCountStride + t];
            hist[(int64_t)threadIdx.x * n_tiles + tile] = sum;
        }
        __syncthreads();
    }
}

/* A block per digit: its row of hist becomes the exclusive prefix sums
 * over the tiles, and totals[digit] the row's sum. */
__global__ void scan_digit_rows(int64_t *hist, int64_t n_tiles, int64_t *totals)
{
    __shared__ int64_t part[kBlock];
    int64_t *row = hist + (int64_t)blockIdx.x * n_tiles;
    const int64_t per = (n_tiles + blockDim.x - 1) / blockDim.x;
    const int64_t lo = (int64_t)threadIdx.x * per < n_tiles ? (int64_t)threadIdx.x * per : n_tiles;
    const int64_t hi = lo + per < n_tiles ? lo + per : n_tiles;
    int64_t sum = 0;
    for (int64_t i = lo; i < hi; ++i)
        sum += row[i];
    int64_t total;
    int64_t running = block_exclusive_scan(sum, part, &total);
    for (int64_t i = lo; i < hi; ++i) {
        const int64_t c = row[i];
        row[i] = running;
        running += c;
    }
    if (threadIdx.x == 0)
        totals[blockIdx.x] = total;
}

/* Each (id, position) pair to its place in the order by the digit at
 * `shift`: base (the scanned hist) and totals from scan_digit_rows; pos
 * NULL: the positions are the ids' own (the first pass). */
__global__ void scatter_by_digit(const int64_t *keys, const int64_t *pos, int64_t n, int shift, int64_t n_tiles,
                                 const int64_t *base, const int64_t *totals, int64_t *keys_out, int64_t *pos_out)
{
    __shared__ int counts[kDigits * kCountStride];
    __shared__ int piece_sum[kGroupThreads];
    __shared__ int64_t digit_start[kDigits];
    __shared__ int64_t adjust[kDigits];
    __shared__ int source[kStagedDigits]; /* the tile's digits, then its order */
    int digit[kGroupItems];
    if (threadIdx.x == 0) {
        int64_t s = 0;
        for (int d = 0; d < kDigits; ++d) {
            digit_start[d] = s;
            s += totals[d];
        }
    }
    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const int64_t first = tile * DC_CUDA_GROUP_TILE;
        count_digits(keys, first, n, shift, counts, digit, source);
        __syncthreads();
        /* the counts in (digit, thread) order turned into exclusive prefix
         * sums: where each thread's ids of each digit begin in the tile */
        int *piece = counts + (threadIdx.x * kScanPiece / kGroupThreads) * kCountStride +
                     threadIdx.x * kScanPiece % kGroupThreads;
        int sum = 0;
        for (int j = 0; j < kScanPiece; ++j)
            sum += piece[j];
        int tile_total;
        int running = block_exclusive_scan(sum, piece_sum, &tile_total);
        for (int j = 0; j < kScanPiece; ++j) {
            const int c = piece[j];
            piece[j] = running;
            running += c;
        }
        __syncthreads();
        /* from a place in the tile to a place in the output */
        if ((int)threadIdx.x < kDigits)
            adjust[threadIdx.x] = digit_start[threadIdx.x] + base[(int64_t)threadIdx.x * n_tiles + tile] -
                                  counts[threadIdx.x * kCountStride];
        __syncthreads();
        /* each id's place in the tile's order by digit, recorded as the
         * place's source (an id of the tile) */
        const int mine = (int)threadIdx.x * kGroupItems;
        for (int k = 0; k < kGroupItems; ++k) {
            if (digit[k] < 0)
                continue;
            int *at = &counts[digit[k] * kCountStride + threadIdx.x];
            source[*at] = mine + k;
            ++*at;
        }
        __syncthreads();
        /* the tile's ids written out in that order, consecutive threads to
         * consecutive places of a digit */
        for (int j = (int)threadIdx.x; j < tile_total; j += kGroupThreads) {
            const int64_t i = first + source[j];
            const int64_t key = keys[i];
            const int64_t dest = adjust[(key >> shift) & (kDigits - 1)] + j;
            keys_out[dest] = key;
            pos_out[dest] = pos ? pos[i] : i;
        }
        __syncthreads();
    }
}

/* start[v] for v in 0..limit: how many of the sorted ids are below v. */
__global__ void group_starts(const int64_t *sorted, int64_t n, int64_t limit, int64_t *start)
{
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v <= limit; v += (int64_t)gridDim.x * blockDim.x) {
        start[v] = dc_cuda::lower_bound(sorted, 0, n, v);
    }
}

/* the formulas by overloading, for the templates below */
__device__ __forceinline__ float softmax_term(float l, float m) { return dc_mf_softmax_term_f32(l, m); }
__device__ __forceinline__ double softmax_term(double l, double m) { return dc_mf_softmax_term_f64(l, m); }
__device__ __forceinline__ float ce_grad_of(float l, const double *lse, bool t, float scale)
{
    return dc_mf_cross_entropy_grad_f32(l, lse[0], lse[1], t, scale);
}
__device__ __forceinline__ double ce_grad_of(double l, const double *lse, bool t, double scale)
{
    return dc_mf_cross_entropy_grad_f64(l, lse[0], lse[1], t, scale);
}
__device__ __forceinline__ double ce_loss_of(float lt, double m, double ls)
{
    return dc_mf_cross_entropy_loss_f32(lt, m, ls);
}
__device__ __forceinline__ double ce_loss_of(double lt, double m, double ls)
{
    return dc_mf_cross_entropy_loss_f64(lt, m, ls);
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

/* row r (rows shared out over the blocks): lse[2 r] = max, lse[2 r + 1] =
 * log(sum exp(l - max)); loss[r] = (max - l[target]) + lse[2 r + 1] */
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
            lse[2 * r] = m;
            lse[2 * r + 1] = log(s);
            loss[r] = ce_loss_of(l[target[r]], m, lse[2 * r + 1]);
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

template <typename T>
__global__ void ce_grad(T *g, int64_t rs, int64_t cs, const T *logits, int64_t n, int64_t c, const int64_t *target,
                        const double *lse, const T *gy, int add)
{
    const T scale = (T)(n ? (double)*gy / (double)n : 0.0);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * c; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / c, k = i % c;
        const T v = ce_grad_of(logits[i], &lse[2 * r], k == target[r], scale);
        T *gi = g + r * rs + k * cs;
        *gi = add ? *gi + v : v;
    }
}

/* The parameters of one launch of a batched optimizer step: their updates
 * laid end to end, parameter k's elements from start[k] to start[k + 1]. */
struct update_table {
    int count;
    int64_t start[DC_CUDA_UPDATES_PER_LAUNCH + 1];
    dc_cuda_update u[DC_CUDA_UPDATES_PER_LAUNCH];
};

/* Each parameter's step count and Adam coefficients (dc_opt_slots), one
 * thread per parameter, from the learning rate in lr: the bias correction
 * folded into the step size and epsilon, as dc_optimizer_step computes it
 * on the CPU. */
__global__ void adam_count(update_table t, const double *lr, double b1, double b2, double eps, double weight_decay)
{
    const int k = threadIdx.x;
    if (k >= t.count)
        return;
    double *slots = t.u[k].slots;
    const double steps = slots[DC_OPT_STEPS] += 1;
    const double c1 = 1.0 - pow(b1, steps), c2 = 1.0 - pow(b2, steps);
    slots[DC_OPT_LR_T] = *lr * sqrt(c2) / c1;
    slots[DC_OPT_EPS_T] = eps * sqrt(c2);
    slots[DC_OPT_DECAY] = *lr * weight_decay;
}

/* A grid-stride walk over every element of the table's parameters: calls
 * f(parameter, element) for each, finding the parameter by moving forward
 * from the last one (a thread's elements only grow). */
template <class F> __device__ __forceinline__ void for_each_update(const update_table &t, F f)
{
    const int64_t total = t.start[t.count], step = (int64_t)gridDim.x * blockDim.x;
    int k = 0;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        while (e >= t.start[k + 1])
            ++k;
        f(t.u[k], e - t.start[k]);
    }
}

template <typename T> __global__ void adam(update_table t, T b1, T b2)
{
    for_each_update(t, [&](const dc_cuda_update &u, int64_t e) {
        const double *slots = u.slots;
        T *w = (T *)u.w, *m = (T *)u.m, *v = (T *)u.v;
        w[e] = adam_of(w[e], ((const T *)u.g)[e], &m[e], &v[e], (T)slots[DC_OPT_LR_T], b1, b2,
                       (T)slots[DC_OPT_EPS_T], (T)slots[DC_OPT_DECAY]);
    });
}

template <typename T> __global__ void sgd(update_table t, const double *lr, T mu)
{
    const T rate = (T)*lr;
    for_each_update(t, [&](const dc_cuda_update &u, int64_t e) {
        T *w = (T *)u.w, *buf = (T *)u.m;
        w[e] = sgd_of(w[e], ((const T *)u.g)[e], &buf[e], rate, mu);
    });
}

template <typename T> __global__ void fill_value(T *x, int64_t n, T value)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        x[e] = value;
}

/* The clip's state on the device (dc_cuda_clip), in the last slots of its
 * table: every decision the host made from the norm, made here instead. */
enum { CLIP_TOTAL, CLIP_LARGEST, CLIP_SCALE, CLIP_SHIFT, CLIP_NORM, CLIP_DONE, CLIP_SLOTS };

/* Gradients of one launch of the clip's passes: up to
 * DC_CUDA_UPDATES_PER_LAUNCH of them, each with its dtype, its row of the
 * table of block results, and the blocks its reduction takes (a fixed count
 * per size: the same sums in the same order from step to step). */
struct clip_batch {
    int count;
    const void *x[DC_CUDA_UPDATES_PER_LAUNCH];
    int64_t n[DC_CUDA_UPDATES_PER_LAUNCH];
    int64_t start[DC_CUDA_UPDATES_PER_LAUNCH + 1]; /* the scale pass: elements laid end to end */
    unsigned blocks[DC_CUDA_UPDATES_PER_LAUNCH];
    int row[DC_CUDA_UPDATES_PER_LAUNCH];
    bool f64[DC_CUDA_UPDATES_PER_LAUNCH];
};

/* Element e of gradient k of a batch, in double. */
__device__ __forceinline__ double clip_element(const clip_batch &b, int k, int64_t e)
{
    return b.f64[k] ? ((const double *)b.x[k])[e] : (double)((const float *)b.x[k])[e];
}

/* A sum of squares (times the clip's scale when `scaled`) or the largest
 * magnitude of each gradient of the batch: gradient blockIdx.y, its block
 * blockIdx.x of b.blocks[k], into its row of the table; nothing once the
 * norm is known (the rescaled passes are launched whether they are needed or
 * not, so that the host need not look). */
__global__ void clip_reduce(clip_batch b, const double *state, bool take_max, bool scaled, double *table,
                            unsigned row_length)
{
    __shared__ double part[kBlock];
    const int k = blockIdx.y;
    if (state[CLIP_DONE] != 0 || blockIdx.x >= b.blocks[k])
        return; /* uniform over the block */
    const double scale = scaled ? state[CLIP_SCALE] : 1.0;
    const int64_t n = b.n[k], stride = (int64_t)b.blocks[k] * blockDim.x;
    double s = 0;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const double v = clip_element(b, k, e);
        s = take_max ? fmax(s, fabs(v)) : s + (v * scale) * (v * scale);
    }
    s = block_reduce(s, part, take_max);
    if (threadIdx.x == 0)
        table[(size_t)b.row[k] * row_length + blockIdx.x] = s;
}

/* one block: combines the table into state[slot], unless the norm is known */
__global__ void clip_combine(const double *v, int64_t n, bool take_max, double *state, int slot)
{
    __shared__ double part[kBlock];
    if (state[CLIP_DONE] != 0)
        return;
    const double s = block_combine(v, n, take_max, part);
    if (threadIdx.x == 0)
        state[slot] = s;
}

/* After a pass, as dc_clip_grad_norm's CPU path decides between passes:
 * stage 0: the plain sum of squares is finite and normal (or NaN): the norm
 * is its root; stage 1: the largest magnitude is 0 or infinite: it is the
 * norm; else the power of two that brings it into [0.5, 1) (at most 2^1022)
 * scales the next sum; stage 2: the norm from the rescaled sum. */
__global__ void clip_decide(double *state, int stage)
{
    if (state[CLIP_DONE] != 0)
        return;
    if (stage == 0) {
        const double total = state[CLIP_TOTAL];
        if (!(isinf(total) || total < 2.2250738585072014e-308)) {
            state[CLIP_NORM] = sqrt(total);
            state[CLIP_DONE] = 1;
        }
    } else if (stage == 1) {
        const double largest = state[CLIP_LARGEST];
        if (largest == 0 || isinf(largest)) {
            state[CLIP_NORM] = largest;
            state[CLIP_DONE] = 1;
            return;
        }
        int e;
        frexp(largest, &e);
        const int shift = -e > 1022 ? 1022 : -e;
        state[CLIP_SHIFT] = shift;
        state[CLIP_SCALE] = ldexp(1.0, shift);
    } else {
        state[CLIP_NORM] = ldexp(sqrt(state[CLIP_TOTAL]), -(int)state[CLIP_SHIFT]);
        state[CLIP_DONE] = 1;
    }
}

/* Every gradient of the batch times max_norm / norm where the norm exceeds
 * max_norm and is finite (in double, as on the CPU). */
__global__ void clip_scale(clip_batch b, const double *state, double max_norm)
{
    const double norm = state[CLIP_NORM];
    if (!(norm > max_norm) || isinf(norm))
        return;
    const double s = max_norm / norm;
    const int64_t total = b.start[b.count], step = (int64_t)gridDim.x * blockDim.x;
    int k = 0;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        while (e >= b.start[k + 1])
            ++k;
        const int64_t i = e - b.start[k];
        if (b.f64[k])
            ((double *)b.x[k])[i] *= s;
        else
            ((float *)b.x[k])[i] = (float)((double)((float *)b.x[k])[i] * s);
    }
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
    return dc_cuda_launched(ctx, 1, "embedding gather");
}

dc_status dc_cuda_scatter_rows(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs, const int64_t *start,
                               const int64_t *positions, int64_t rows, int64_t width, const void *gy)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    const int64_t items = rows * width;
    if (items == 0)
        return DC_OK;
    if (dtype == DC_F32)
        scatter_groups<float><<<grid_for(ctx, items), kBlock, 0, st>>>((float *)grad, rs, cs, start, positions, rows,
                                                                         width, (const float *)gy);
    else
        scatter_groups<double><<<grid_for(ctx, items), kBlock, 0, st>>>((double *)grad, rs, cs, start, positions,
                                                                          rows, width, (const double *)gy);
    return dc_cuda_launched(ctx, 1, "embedding scatter");
}

dc_status dc_cuda_read_indices(dc_ctx *ctx, dc_dtype dtype, const void *values, int64_t n, int64_t limit, int site,
                               int64_t *out, double *parts)
{
    DC_CUDA_ENTER(ctx);
    if (n == 0)
        return DC_OK;
    cudaStream_t st = ctx->cuda->stream;
    const unsigned grid = grid_for(ctx, n);
    const unsigned blocks = grid < DC_CUDA_INDEX_PARTS ? grid : DC_CUDA_INDEX_PARTS;
    dc_cuda_index_error *record = ctx->cuda->index_error_dev;
    if (dtype == DC_F32) {
        read_indices<float><<<blocks, kBlock, 0, st>>>((const float *)values, n, limit, out, parts);
        claim_index_error<float><<<1, kBlock, 0, st>>>(parts, (int)blocks, (const float *)values, limit, site, record);
    } else {
        read_indices<double><<<blocks, kBlock, 0, st>>>((const double *)values, n, limit, out, parts);
        claim_index_error<double><<<1, kBlock, 0, st>>>(parts, (int)blocks, (const double *)values, limit, site,
                                                        record);
    }
    return dc_cuda_launched(ctx, 2, "reading indices");
}

dc_status dc_cuda_group_indices(dc_ctx *ctx, const int64_t *ids, int64_t n, int64_t limit, int64_t *start,
                                int64_t *positions, int64_t *scratch)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    int launches = 0;
    const int64_t *sorted = ids;
    if (n > 0) {
        /* passes enough for the digits of limit - 1 (one at least, which
         * writes the positions) */
        int bits = 0;
        while (bits < 63 && ((limit - 1) >> bits) > 0)
            ++bits;
        const int passes = bits > 0 ? (bits + kDigitBits - 1) / kDigitBits : 1;
        const int64_t n_tiles = (n + DC_CUDA_GROUP_TILE - 1) / DC_CUDA_GROUP_TILE;
        int64_t *keys[2] = {scratch, scratch + n};
        int64_t *pos_spare = scratch + 2 * n, *hist = scratch + 3 * n, *totals = hist + kDigits * n_tiles;
        const unsigned grid = (unsigned)(n_tiles < ctx->cuda->max_blocks ? n_tiles : ctx->cuda->max_blocks);
        const int64_t *pos_in = NULL;
        for (int p = 0; p < passes; ++p) {
            /* the positions alternate so that the last pass writes them out */
            int64_t *pos_out = (passes - 1 - p) % 2 == 0 ? positions : pos_spare;
            const int shift = p * kDigitBits;
            tile_digit_counts<<<grid, kGroupThreads, 0, st>>>(sorted, n, shift, n_tiles, hist);
            scan_digit_rows<<<kDigits, kBlock, 0, st>>>(hist, n_tiles, totals);
            scatter_by_digit<<<grid, kGroupThreads, 0, st>>>(sorted, pos_in, n, shift, n_tiles, hist, totals,
                                                             keys[p % 2], pos_out);
            sorted = keys[p % 2];
            pos_in = pos_out;
            launches += 3;
        }
    }
    group_starts<<<grid_for(ctx, limit + 1), kBlock, 0, st>>>(sorted, n, limit, start);
    return dc_cuda_launched(ctx, launches + 1, "grouping indices");
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
    return dc_cuda_launched(ctx, n > 0 ? 2 : 1, "cross entropy");
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
    return dc_cuda_launched(ctx, 1, "cross entropy gradient");
}

/* The next table of at most DC_CUDA_UPDATES_PER_LAUNCH of u[*from..n). */
static update_table next_table(int n, const dc_cuda_update *u, int *from)
{
    update_table t;
    memset(&t, 0, sizeof t);
    while (*from < n && t.count < DC_CUDA_UPDATES_PER_LAUNCH) {
        t.u[t.count] = u[*from];
        t.start[t.count + 1] = t.start[t.count] + u[*from].n;
        ++t.count;
        ++*from;
    }
    return t;
}

dc_status dc_cuda_adam(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double b1,
                       double b2, double eps, double weight_decay)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    dc_status status = DC_OK;
    for (int from = 0; from < n && status == DC_OK;) {
        const update_table t = next_table(n, u, &from);
        adam_count<<<1, DC_CUDA_UPDATES_PER_LAUNCH, 0, st>>>(t, lr, b1, b2, eps, weight_decay);
        const unsigned grid = grid_for(ctx, t.start[t.count]);
        if (dtype == DC_F32)
            adam<float><<<grid, kBlock, 0, st>>>(t, (float)b1, (float)b2);
        else
            adam<double><<<grid, kBlock, 0, st>>>(t, b1, b2);
        status = dc_cuda_launched(ctx, 2, "adam");
    }
    return status;
}

dc_status dc_cuda_sgd(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double mu)
{
    DC_CUDA_ENTER(ctx);
    cudaStream_t st = ctx->cuda->stream;
    dc_status status = DC_OK;
    for (int from = 0; from < n && status == DC_OK;) {
        const update_table t = next_table(n, u, &from);
        const unsigned grid = grid_for(ctx, t.start[t.count]);
        if (dtype == DC_F32)
            sgd<float><<<grid, kBlock, 0, st>>>(t, lr, (float)mu);
        else
            sgd<double><<<grid, kBlock, 0, st>>>(t, lr, mu);
        status = dc_cuda_launched(ctx, 1, "sgd");
    }
    return status;
}

dc_status dc_cuda_fill(dc_ctx *ctx, dc_dtype dtype, void *x, int64_t n, double value)
{
    DC_CUDA_ENTER(ctx);
    if (n == 0)
        return DC_OK;
    cudaStream_t st = ctx->cuda->stream;
    if (dtype == DC_F32)
        fill_value<float><<<grid_for(ctx, n), kBlock, 0, st>>>((float *)x, n, (float)value);
    else
        fill_value<double><<<grid_for(ctx, n), kBlock, 0, st>>>((double *)x, n, value);
    return dc_cuda_launched(ctx, 1, "fill");
}

/* The next batch of gradients of params[*from..n) (parameters without one
 * left out), for dc_cuda_clip; none left: a batch of count 0. */
static clip_batch next_clip_batch(const dc_ctx *ctx, int n, dc_tensor *const *params, int *from, unsigned parts)
{
    clip_batch b;
    memset(&b, 0, sizeof b);
    for (; *from < n && b.count < DC_CUDA_UPDATES_PER_LAUNCH; ++*from) {
        const dc_tensor *g = dc_tensor_grad(params[*from]);
        if (!g)
            continue;
        const unsigned grid = grid_for(ctx, g->numel);
        b.x[b.count] = g->data;
        b.n[b.count] = g->numel;
        b.start[b.count + 1] = b.start[b.count] + g->numel;
        b.blocks[b.count] = grid < parts ? grid : parts;
        b.row[b.count] = *from;
        b.f64[b.count] = g->dtype == DC_F64;
        b.count++;
    }
    return b;
}

dc_status dc_cuda_clip(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, const double **norm)
{
    DC_CUDA_ENTER(ctx);
    dc_cuda_state *cs = ctx->cuda;
    /* a row of kParts block results per tensor (the kernels stride over
     * their grid, so kParts blocks cover any size), in a table kept by the
     * context (the same addresses from step to step, as a captured graph
     * needs), then the state */
    constexpr unsigned kParts = 1024;
    const size_t cells = (size_t)n * kParts, need = (cells + CLIP_SLOTS) * sizeof(double);
    if (cs->clip_cap < need) {
        dc_cuda_free(ctx, cs->clip_table);
        cs->clip_table = (double *)dc_cuda_alloc(ctx, need);
        cs->clip_cap = cs->clip_table ? need : 0;
        if (!cs->clip_table)
            return DC_ERR_MEMORY;
    }
    double *table = cs->clip_table, *state = table + cells;
    cudaStream_t st = cs->stream;
    dc_status s = dc_cuda_check(ctx, cudaMemsetAsync(table, 0, need, st), "gradient norm");
    int launched = 0;
    /* pass 0: the sum of squares; 1: the largest magnitude; 2: the sum of
     * squares rescaled (passes 1 and 2 return at once where not needed);
     * each a launch per batch of gradients */
    for (int pass = 0; s == DC_OK && pass < 3; ++pass) {
        const bool take_max = pass == 1;
        for (int from = 0;;) {
            const clip_batch b = next_clip_batch(ctx, n, params, &from, kParts);
            if (b.count == 0)
                break;
            unsigned most = 1;
            for (int j = 0; j < b.count; ++j)
                most = b.blocks[j] > most ? b.blocks[j] : most;
            clip_reduce<<<dim3(most, (unsigned)b.count), kBlock, 0, st>>>(b, state, take_max, pass == 2, table, kParts);
            ++launched;
        }
        clip_combine<<<1, kBlock, 0, st>>>(table, (int64_t)cells, take_max, state, take_max ? CLIP_LARGEST : CLIP_TOTAL);
        clip_decide<<<1, 1, 0, st>>>(state, pass);
        launched += 2;
    }
    for (int from = 0; s == DC_OK;) {
        const clip_batch b = next_clip_batch(ctx, n, params, &from, kParts);
        if (b.count == 0)
            break;
        if (b.start[b.count] == 0)
            continue;
        clip_scale<<<grid_for(ctx, b.start[b.count]), kBlock, 0, st>>>(b, state, max_norm);
        ++launched;
    }
    if (s == DC_OK)
        s = dc_cuda_launched(ctx, launched, "gradient clipping");
    if (norm)
        *norm = state + CLIP_NORM;
    return s;
}

} /* extern "C" */
