/* The passes of one scalar type for assoc_cuda_instance.cuh: the primal
 * pass (the scan kernel) in namespace <sfx>_primal, the dual pass (the
 * vector-Jacobian and scan-adjoint kernels) in <sfx>_dual.
 * Included with DC_S and DC_SFX defined; no include guard. */

namespace DC_ASSOC_CUDA_NS
{
namespace DC_PP_CAT(DC_SFX, _primal)
{
#define DC_BFN_PASS _primal
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

__global__ void scan_kernel(dc_assoc_scan_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step)
        dc_assoc_scan_piece_primal(&L, t / L.inner, t % L.inner, t % L.inner + 1);
}

/* One piece per block (grid-stride over the pieces), for rows of one lane:
 * each of kScanThreads threads combines a run of consecutive elements, the
 * block scans the runs' totals in shared memory (Hillis-Steele, log2 of the
 * threads rounds, each a fixed combination), then each thread walks its run
 * again from the total of the runs before it. The association is fixed by
 * the piece's length alone: deterministic, though not the CPU's order. */
enum { kScanThreads = DC_ASSOC_CUDA_BLOCK_THREADS };

/* a then b in the direction of the walk: a is the earlier part */
#define DC_ASSOC_WALK(a, b, out)                                                                   \
    {                                                                                              \
        if (reverse)                                                                               \
            dc_assoc_body_primal(b, a, out);                                                       \
        else                                                                                       \
            dc_assoc_body_primal(a, b, out);                                                       \
    }

__global__ void scan_block_kernel(dc_assoc_scan_launch L, int64_t pieces)
{
    enum { K = dc_assoc_k_primal };
    __shared__ dc_real totals[2][K][kScanThreads];
    const int reverse = (L.flags & DC_ASSOC_REVERSE) != 0;
    const int exclusive = (L.flags & DC_ASSOC_EXCLUSIVE) != 0;
    const int write = L.y[0] != 0;
    const int tid = (int)threadIdx.x;
    const int64_t n_chunks = L.len > 0 ? (L.len + L.chunk - 1) / L.chunk : 1;
    for (int64_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
        const int64_t o = piece / n_chunks, c = piece % n_chunks;
        const int64_t first = o * L.len + c * L.chunk;
        const int64_t count = L.len - c * L.chunk < L.chunk ? L.len - c * L.chunk : L.chunk;
        const int64_t per = (count + kScanThreads - 1) / kScanThreads;
        const int64_t s0 = tid * per < count ? tid * per : count, s1 = s0 + per < count ? s0 + per : count;
        /* this thread's run, in the walk's order */
        dc_real run[K];
        for (int f = 0; f < K; ++f)
            run[f] = dc_assoc_neutral_primal(f);
        for (int64_t s = s0; s < s1; ++s) {
            const int64_t at = first + (reverse ? count - 1 - s : s);
            dc_real a[K], out[K];
            for (int f = 0; f < K; ++f)
                a[f] = ((const dc_real *)L.x[f])[at];
            DC_ASSOC_WALK(run, a, out)
            for (int f = 0; f < K; ++f)
                run[f] = out[f];
        }
        for (int f = 0; f < K; ++f)
            totals[0][f][tid] = run[f];
        __syncthreads();
        int b = 0;
        for (int off = 1; off < kScanThreads; off <<= 1) {
            dc_real mine[K], out[K];
            for (int f = 0; f < K; ++f)
                mine[f] = totals[b][f][tid];
            if (tid >= off) {
                dc_real before[K];
                for (int f = 0; f < K; ++f)
                    before[f] = totals[b][f][tid - off];
                DC_ASSOC_WALK(before, mine, out)
            } else {
                for (int f = 0; f < K; ++f)
                    out[f] = mine[f];
            }
            for (int f = 0; f < K; ++f)
                totals[1 - b][f][tid] = out[f];
            __syncthreads();
            b = 1 - b;
        }
        /* the state before this thread's run: the piece's start, then the
         * runs before it */
        dc_real state[K];
        for (int f = 0; f < K; ++f)
            state[f] = L.flags & DC_ASSOC_FROM_NEUTRAL ? dc_assoc_neutral_primal(f)
                                                       : ((const dc_real *)L.carry[f])[piece];
        if (tid > 0) {
            dc_real before[K], out[K];
            for (int f = 0; f < K; ++f)
                before[f] = totals[b][f][tid - 1];
            DC_ASSOC_WALK(state, before, out)
            for (int f = 0; f < K; ++f)
                state[f] = out[f];
        }
        __syncthreads(); /* every read of the totals done before the piece's carry changes */
        if (tid == 0) {
            /* the piece's total: its start, then every run */
            dc_real all[K], out[K];
            for (int f = 0; f < K; ++f)
                all[f] = totals[b][f][kScanThreads - 1];
            DC_ASSOC_WALK(state, all, out)
            for (int f = 0; f < K; ++f)
                ((dc_real *)L.carry[f])[piece] = out[f];
        }
        for (int64_t s = s0; write && s < s1; ++s) {
            const int64_t at = first + (reverse ? count - 1 - s : s);
            dc_real a[K], out[K];
            for (int f = 0; f < K; ++f)
                a[f] = ((const dc_real *)L.x[f])[at];
            DC_ASSOC_WALK(state, a, out)
            for (int f = 0; f < K; ++f) {
                ((dc_real *)L.y[f])[at] = exclusive ? state[f] : out[f];
                state[f] = out[f];
            }
        }
        __syncthreads(); /* the totals are rewritten by the next piece */
    }
}

#undef DC_ASSOC_WALK

static int launch_scan(const dc_assoc_scan_launch *L)
{
    const int64_t n_chunks = L->len > 0 ? (L->len + L->chunk - 1) / L->chunk : 1;
    const int64_t pieces = L->seg_start ? L->outer : L->outer * n_chunks;
    const int64_t items = pieces * L->inner;
    if (items == 0)
        return 0;
    const cudaStream_t stream = (cudaStream_t)L->stream;
    if (!L->seg_start && L->inner == 1 && L->len >= 2 * kScanThreads)
        scan_block_kernel<<<grid_for(pieces, 1, L->max_blocks), kScanThreads, 0, stream>>>(*L, pieces);
    else
        scan_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, stream>>>(*L, items);
    return (int)cudaGetLastError();
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
} // namespace <sfx>_primal

namespace DC_PP_CAT(DC_SFX, _dual)
{
#define DC_BFN_DUAL DC_PP_CAT(dc_assoc_dual_, DC_SFX)
#define DC_DUAL_T DC_BFN_DUAL
#define DC_DUAL_N (2 * DC_PP_CAT(DC_SFX, _primal)::dc_assoc_k_primal)
#include "../dual/dual_impl.h"

#define DC_BFN_PASS _dual
#define DC_ASSOC_PRIMAL_BODY DC_PP_CAT(DC_SFX, _primal)::dc_assoc_body_primal
#include "bfn_dsl_dual.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

__global__ void vjp_kernel(dc_assoc_vjp_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < items; e += step)
        dc_assoc_vjp_element_dual(&L, e);
}

__global__ void scan_adjoint_kernel(dc_assoc_scan_adjoint_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step)
        dc_assoc_scan_adjoint_item_dual(&L, t);
}

/* One thread per row and lane (carries) or per piece and lane, its buffer
 * of min(chunk, len) * k numbers in the launch's scratch. */
__global__ void reduce_adjoint_kernel(dc_assoc_reduce_adjoint_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step)
        if (L.phase == DC_ASSOC_RED_CARRIES)
            dc_assoc_reduce_carries_dual(&L, t);
        else
            dc_assoc_reduce_piece_dual(&L, t, (dc_real *)L.scratch + t * (L.len < L.chunk ? L.len : L.chunk) *
                                                                          dc_assoc_k_dual);
}

/* ---- the adjoints of rows of one lane: a piece per block ----
 *
 * As the primal's scan_block_kernel, and where it is chosen (rows of one
 * lane, at least two steps a thread): each of kBlockThreads threads takes a
 * run of consecutive steps, the block scans what the runs carry in shared
 * memory (block_scan: Hillis-Steele, a fixed association for a given
 * number of threads), then each thread walks its run from what enters it.
 * The association depends on the piece's length alone. */
enum { kBlockThreads = DC_PP_CAT(DC_SFX, _primal)::kScanThreads };
enum { kFields = dc_assoc_k_dual, kMap = kFields * kFields + kFields };
/* the scans' double buffers of maps within a block's static shared memory */
static_assert(2 * kMap * kBlockThreads * sizeof(dc_real) <= 48 * 1024,
              "an operator this wide needs fewer threads per block in the adjoint's scans");

/* A thread's run [r0, r1) of a piece of `count` steps. */
__device__ static inline void run_of(int64_t count, int tid, int64_t *r0, int64_t *r1)
{
    const int64_t per = (count + kBlockThreads - 1) / kBlockThreads;
    *r0 = tid * per < count ? tid * per : count;
    *r1 = *r0 + per < count ? *r0 + per : count;
}

/* The inclusive scan of the N numbers each thread holds at its slot (a
 * permutation of 0 .. kBlockThreads - 1), through sh ([2][N][threads] in
 * shared memory): on return sh[b][.][w] (b returned) holds slot 0, ...,
 * slot w combined by then(earlier, later, out). The caller synchronizes
 * before sh is written again. */
template <int N, typename Then>
__device__ static int block_scan(dc_real (*sh)[N][kBlockThreads], int slot, const dc_real *mine, Then then)
{
    for (int f = 0; f < N; ++f)
        sh[0][f][slot] = mine[f];
    __syncthreads();
    int b = 0;
    for (int off = 1; off < kBlockThreads; off <<= 1) {
        dc_real cur[N], out[N];
        for (int f = 0; f < N; ++f)
            cur[f] = sh[b][f][slot];
        if (slot >= off) {
            dc_real before[N];
            for (int f = 0; f < N; ++f)
                before[f] = sh[b][f][slot - off];
            then(before, cur, out);
        } else {
            for (int f = 0; f < N; ++f)
                out[f] = cur[f];
        }
        for (int f = 0; f < N; ++f)
            sh[1 - b][f][slot] = out[f];
        __syncthreads();
        b = 1 - b;
    }
    return b;
}

/* States in the order of the row (a before b) and against it (b, the later
 * part of the row, is combined on the left). */
struct row_then {
    __device__ void operator()(const dc_real *a, const dc_real *b, dc_real *out) const
    {
        DC_ASSOC_PRIMAL_BODY(a, b, out);
    }
};
struct back_then {
    __device__ void operator()(const dc_real *a, const dc_real *b, dc_real *out) const
    {
        DC_ASSOC_PRIMAL_BODY(b, a, out);
    }
};

/* The scan adjoint's carry passes through a run of steps as an affine map
 * c -> M c + v (M by columns, entry (f, q) at q * kFields + f, then v, as in the
 * launch's maps). map_then: a, then b. The carries and a's columns are
 * adjoints: times b's entries through dc_assoc_adj_mul, as the CPU's
 * dc_assoc_map_carry, so that a zero adjoint meeting an infinite or NaN
 * entry gives 0. */
__device__ static inline void map_apply(const dc_real *m, const dc_real *c, dc_real *out)
{
    for (int f = 0; f < kFields; ++f) {
        dc_real t = m[kFields * kFields + f];
        for (int q = 0; q < kFields; ++q)
            t += DC_BFN_ID(dc_assoc_adj_mul)(c[q], m[q * kFields + f]);
        out[f] = t;
    }
}
struct map_then {
    __device__ void operator()(const dc_real *a, const dc_real *b, dc_real *out) const
    {
        for (int q = 0; q < kFields; ++q)
            for (int f = 0; f < kFields; ++f) {
                dc_real t = DC_BFN_ID(dc_assoc_adj_mul)(a[q * kFields], b[f]);
                for (int p = 1; p < kFields; ++p)
                    t += DC_BFN_ID(dc_assoc_adj_mul)(a[q * kFields + p], b[p * kFields + f]);
                out[q * kFields + f] = t;
            }
        map_apply(b, a + kFields * kFields, out + kFields * kFields);
    }
};

__device__ static inline void map_identity(dc_real *m)
{
    for (int q = 0; q < kFields; ++q)
        for (int f = 0; f < kFields; ++f)
            m[q * kFields + f] = q == f ? (dc_real)1 : (dc_real)0;
    for (int f = 0; f < kFields; ++f)
        m[kFields * kFields + f] = (dc_real)0;
}

/* Phases DC_ASSOC_ADJ_WHOLE (a row a piece), DC_ASSOC_ADJ_MAPS and
 * DC_ASSOC_ADJ_PIECES. Each thread takes its run's map (one dual pass a
 * step, dc_assoc_adjoint_steps); the block scans the maps from the piece's
 * end; then the piece's map is written (MAPS), or each thread walks its
 * run again from the carry entering it, writing gx (one more dual pass a
 * step). */
__global__ void scan_adjoint_block_kernel(dc_assoc_scan_adjoint_launch L, int64_t pieces)
{
    __shared__ dc_real maps[2][kMap][kBlockThreads];
    const int tid = (int)threadIdx.x, slot = kBlockThreads - 1 - tid;
    const int64_t chunk = L.phase == DC_ASSOC_ADJ_WHOLE ? L.len : L.chunk;
    const int64_t n_chunks = (L.len + chunk - 1) / chunk;
    for (int64_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
        const int64_t o = piece / n_chunks, s0 = piece % n_chunks * chunk;
        const int64_t count = L.len - s0 < chunk ? L.len - s0 : chunk;
        int64_t r0, r1;
        run_of(count, tid, &r0, &r1);
        dc_real m[kMap];
        map_identity(m);
        dc_assoc_adjoint_steps_dual(&L, o * L.len, s0 + r0, s0 + r1, 0, m);
        const int b = block_scan<kMap>(maps, slot, m, map_then());
        if (L.phase == DC_ASSOC_ADJ_MAPS) {
            if (tid == 0) /* slot kBlockThreads - 1: the whole piece */
                for (int e = 0; e < kMap; ++e)
                    ((dc_real *)L.maps)[piece * kMap + e] = maps[b][e][slot];
        } else {
            dc_real enter[kFields], carry[kFields];
            for (int f = 0; f < kFields; ++f) /* from the piece's carry, or 0 at a row's end */
                enter[f] = L.phase == DC_ASSOC_ADJ_PIECES ? ((const dc_real *)L.carry)[piece * kFields + f]
                                                          : (dc_real)0;
            if (slot > 0) {
                dc_real before[kMap];
                for (int e = 0; e < kMap; ++e)
                    before[e] = maps[b][e][slot - 1];
                map_apply(before, enter, carry);
            } else {
                for (int f = 0; f < kFields; ++f)
                    carry[f] = enter[f];
            }
            dc_assoc_adjoint_steps_dual(&L, o * L.len, s0 + r0, s0 + r1, carry, 0);
        }
        __syncthreads(); /* the maps are rewritten by the next piece */
    }
}

/* Phase DC_ASSOC_ADJ_CARRIES, a row per block: each thread composes the
 * maps of a run of pieces, the block scans them from the row's end, then
 * each thread walks its pieces from the carry entering them (the scanned
 * map applied to 0: its v). */
__global__ void scan_adjoint_carries_block_kernel(dc_assoc_scan_adjoint_launch L, int64_t rows)
{
    __shared__ dc_real scanned[2][kMap][kBlockThreads];
    const int tid = (int)threadIdx.x, slot = kBlockThreads - 1 - tid;
    const int64_t n_chunks = (L.len + L.chunk - 1) / L.chunk;
    int64_t c0, c1;
    run_of(n_chunks, tid, &c0, &c1);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const dc_real *piece_maps = (const dc_real *)L.maps + row * n_chunks * kMap;
        dc_real run[kMap], out[kMap];
        map_identity(run);
        for (int64_t c = c1 - 1; c >= c0; --c) {
            map_then()(run, piece_maps + c * kMap, out);
            for (int e = 0; e < kMap; ++e)
                run[e] = out[e];
        }
        const int b = block_scan<kMap>(scanned, slot, run, map_then());
        dc_real carry[kFields];
        for (int f = 0; f < kFields; ++f)
            carry[f] = slot > 0 ? scanned[b][kFields * kFields + f][slot - 1] : (dc_real)0;
        __syncthreads(); /* the maps are rewritten by the next row */
        dc_real *enter = (dc_real *)L.carry + row * n_chunks * kFields;
        for (int64_t c = c1 - 1; c >= c0; --c) {
            dc_real next[kFields];
            for (int f = 0; f < kFields; ++f)
                enter[c * kFields + f] = carry[f];
            map_apply(piece_maps + c * kMap, carry, next);
            for (int f = 0; f < kFields; ++f)
                carry[f] = next[f];
        }
    }
}

/* Phase DC_ASSOC_RED_PIECES: the totals of the runs, scanned from the left
 * and from the right, give the states before and after each run (from
 * those before and after the piece); each thread then walks its run
 * (dc_assoc_reduce_run) with its r_j in a buffer of its own.
 *
 * The block stages the piece's elements in shared memory first, read from
 * the launch's arrays by consecutive threads at consecutive steps, and
 * writes the gradients back the same way: a thread walks consecutive
 * steps, so that its own reads from global memory would leave a warp's
 * accesses a run's length apart. Step s of thread t's run sits at
 * s * kStageStride + t, so that the walks, consecutive threads at one step
 * of their runs, read consecutive words (the stride one more than the
 * threads: the staging's float32 writes, a warp's 32 steps of four runs,
 * meet at most four to a bank, where a stride of 128 would put eight on
 * one).
 * A gradient overwrites its element in the staging (a step's elements are
 * read before its gradients are written), and is added to the launch's
 * array on the way out where it accumulates. */
enum { kRunMax = (DC_ASSOC_MAX_CHUNK + kBlockThreads - 1) / kBlockThreads, kStageStride = kBlockThreads + 1 };
static_assert((kFields * kRunMax * kStageStride + 2 * kFields * kBlockThreads) * sizeof(dc_real) <= 48 * 1024,
              "the reduction adjoint's staging and scans fit a block's static shared memory");

/* Where step p of a piece whose runs are `per` steps long is staged. */
__device__ static inline int staged_at(int64_t p, int64_t per) { return (int)(p % per * kStageStride + p / per); }

__global__ void reduce_adjoint_block_kernel(dc_assoc_reduce_adjoint_launch L, int64_t pieces)
{
    __shared__ dc_real states[2][kFields][kBlockThreads];
    __shared__ dc_real staged[kFields][kRunMax * kStageStride];
    const int tid = (int)threadIdx.x;
    const int64_t n_chunks = (L.len + L.chunk - 1) / L.chunk;
    /* the runs' walks read and write the staging: step s of thread t at
     * t + s * kStageStride; the gradients wanted are written in place */
    dc_assoc_reduce_adjoint_launch S = L;
    S.inner = kStageStride;
    S.accumulate = 0;
    for (int f = 0; f < kFields; ++f) {
        S.x[f] = staged[f];
        S.gx[f] = L.gx[f] ? staged[f] : nullptr;
    }
    for (int64_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
        const int64_t o = piece / n_chunks, s0 = piece % n_chunks * L.chunk;
        const int64_t count = L.len - s0 < L.chunk ? L.len - s0 : L.chunk;
        const int64_t base = o * L.len + s0;
        const int64_t per = (count + kBlockThreads - 1) / kBlockThreads;
#pragma unroll
        for (int j = 0; j < kRunMax; ++j) { /* unrolled: every load issued before the first store waits */
            const int64_t p = tid + (int64_t)j * kBlockThreads;
            if (p < count)
                for (int f = 0; f < kFields; ++f)
                    staged[f][staged_at(p, per)] = ((const dc_real *)L.x[f])[base + p];
        }
        __syncthreads();
        int64_t r0, r1;
        run_of(count, tid, &r0, &r1);
        dc_real total[kFields], a[kFields], out[kFields];
        for (int f = 0; f < kFields; ++f)
            total[f] = dc_assoc_neutral_dual(f);
        for (int64_t s = 0; s < r1 - r0; ++s) {
            for (int f = 0; f < kFields; ++f)
                a[f] = staged[f][s * kStageStride + tid];
            DC_ASSOC_PRIMAL_BODY(total, a, out);
            for (int f = 0; f < kFields; ++f)
                total[f] = out[f];
        }
        dc_real l[kFields], r[kFields], ybar[kFields], t[kFields];
        for (int f = 0; f < kFields; ++f) {
            l[f] = L.left[0] ? ((const dc_real *)L.left[f])[piece] : dc_assoc_neutral_dual(f);
            r[f] = L.right[0] ? ((const dc_real *)L.right[f])[piece] : dc_assoc_neutral_dual(f);
            ybar[f] = L.g[f] ? ((const dc_real *)L.g[f])[o] : (dc_real)0;
        }
        int b = block_scan<kFields>(states, tid, total, row_then());
        if (tid > 0) {
            for (int f = 0; f < kFields; ++f)
                t[f] = states[b][f][tid - 1];
            DC_ASSOC_PRIMAL_BODY(l, t, out);
            for (int f = 0; f < kFields; ++f)
                l[f] = out[f];
        }
        __syncthreads(); /* read before the scan from the right rewrites it */
        const int slot = kBlockThreads - 1 - tid;
        b = block_scan<kFields>(states, slot, total, back_then());
        if (slot > 0) {
            for (int f = 0; f < kFields; ++f)
                t[f] = states[b][f][slot - 1];
            DC_ASSOC_PRIMAL_BODY(t, r, out);
            for (int f = 0; f < kFields; ++f)
                r[f] = out[f];
        }
        dc_real buf[kRunMax * kFields];
        dc_assoc_reduce_run_dual(&S, tid, r1 - r0, l, r, ybar, buf);
        __syncthreads(); /* the gradients staged; the scans' states read before the next piece rewrites them */
        for (int f = 0; f < kFields; ++f) {
            dc_real *gx = (dc_real *)L.gx[f];
            if (!gx)
                continue;
            const bool add = (L.accumulate >> f) & 1u;
#pragma unroll
            for (int j = 0; j < kRunMax; ++j) {
                const int64_t p = tid + (int64_t)j * kBlockThreads;
                if (p < count) {
                    const dc_real v = staged[f][staged_at(p, per)];
                    gx[base + p] = add ? gx[base + p] + v : v;
                }
            }
        }
        __syncthreads(); /* the staging read out before the next piece's is written */
    }
}

/* Whether a launch's rows (of `len` steps) go a piece per block: mirrors
 * the primal's choice (launch_scan). */
static inline bool by_block(int64_t inner, int64_t len) { return inner == 1 && len >= 2 * kBlockThreads; }

static int launch_reduce_adjoint(const dc_assoc_reduce_adjoint_launch *L)
{
    const int64_t pieces = L->phase == DC_ASSOC_RED_PIECES ? (L->len + L->chunk - 1) / L->chunk : 1;
    const int64_t items = L->outer * pieces * L->inner;
    if (items == 0)
        return 0;
    const cudaStream_t stream = (cudaStream_t)L->stream;
    if (L->phase == DC_ASSOC_RED_PIECES && dc_assoc_cuda_reduce_by_block(L->inner, L->len, L->chunk))
        reduce_adjoint_block_kernel<<<grid_for(items, 1, L->max_blocks), kBlockThreads, 0, stream>>>(*L, items);
    else
        reduce_adjoint_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, stream>>>(*L, items);
    return (int)cudaGetLastError();
}

static int launch_vjp(const dc_assoc_vjp_launch *L)
{
    const int64_t items = L->shape[0] * L->shape[1] * L->shape[2];
    if (items == 0)
        return 0;
    vjp_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(*L, items);
    return (int)cudaGetLastError();
}

static int launch_scan_adjoint(const dc_assoc_scan_adjoint_launch *L)
{
    const int64_t n_chunks = L->phase == DC_ASSOC_ADJ_WHOLE ? 1 : (L->len + L->chunk - 1) / L->chunk;
    const int64_t pieces = L->phase == DC_ASSOC_ADJ_CARRIES ? 1 : n_chunks;
    const int64_t items = L->outer * pieces * L->inner;
    if (items == 0)
        return 0;
    const cudaStream_t stream = (cudaStream_t)L->stream;
    /* the carries between the pieces: as the primal's scan of the pieces' totals */
    const int64_t steps = L->phase == DC_ASSOC_ADJ_CARRIES ? n_chunks : L->len;
    if (by_block(L->inner, steps) && L->phase == DC_ASSOC_ADJ_CARRIES)
        scan_adjoint_carries_block_kernel<<<grid_for(items, 1, L->max_blocks), kBlockThreads, 0, stream>>>(*L, items);
    else if (by_block(L->inner, steps))
        scan_adjoint_block_kernel<<<grid_for(items, 1, L->max_blocks), kBlockThreads, 0, stream>>>(*L, items);
    else
        scan_adjoint_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, stream>>>(*L, items);
    return (int)cudaGetLastError();
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#undef DC_BFN_DUAL
#undef DC_ASSOC_PRIMAL_BODY
} // namespace <sfx>_dual
} // namespace DC_ASSOC_CUDA_NS
