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
enum { kScanThreads = 128 };

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

static int launch_reduce_adjoint(const dc_assoc_reduce_adjoint_launch *L)
{
    const int64_t pieces = L->phase == DC_ASSOC_RED_PIECES ? (L->len + L->chunk - 1) / L->chunk : 1;
    const int64_t items = L->outer * pieces * L->inner;
    if (items == 0)
        return 0;
    reduce_adjoint_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(
        *L, items);
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
    const int64_t pieces = L->phase == DC_ASSOC_ADJ_MAPS || L->phase == DC_ASSOC_ADJ_PIECES
                               ? (L->len + L->chunk - 1) / L->chunk
                               : 1;
    const int64_t items = L->outer * pieces * L->inner;
    if (items == 0)
        return 0;
    scan_adjoint_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(*L,
                                                                                                           items);
    return (int)cudaGetLastError();
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#undef DC_BFN_DUAL
#undef DC_ASSOC_PRIMAL_BODY
} // namespace <sfx>_dual
} // namespace DC_ASSOC_CUDA_NS
