#include "assoc_run.h"

#include <string.h>

#include "../cuda/cuda_backend.h"

/* Elements of a vector-Jacobian launch per CPU work piece, and the work
 * below which a launch runs on one thread. Neither changes a result: every
 * work item writes its own elements. */
enum { VJP_PIECE = 4096, SPLIT_WORK = 32768 };

/* Pieces of a scan per CPU work item: the kernel walks runs of whole
 * one-lane pieces together (broadcast/assoc_kernels.h, DC_ASSOC_GROUP).
 * The result is the same whatever the grouping. */
enum { SCAN_GROUP = 8 };

/* Items of a scan-adjoint or reduce-adjoint launch per CPU work item: the
 * kernels walk up to eight whole one-lane pieces together
 * (DC_ASSOC_RED_GROUP, 8 or 4, divides it); the same bits whatever the
 * grouping. */
enum { ADJOINT_GROUP = 8 };

static int type_index(dc_dtype dtype) { return dtype == DC_F64 ? DC_ASSOC_F64 : DC_ASSOC_F32; }

dc_status dc_assoc_run_scan(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, dc_assoc_scan_launch *launch)
{
    dc_ctx *ctx = tape->ctx;
    if (ctx->cuda)
        return dc_cuda_run_assoc_scan(ctx, &op->cuda[type_index(dtype)], launch);
    const int64_t n_chunks = launch->len > 0 ? (launch->len + launch->chunk - 1) / launch->chunk : 1;
    const int64_t pieces = launch->seg_start ? launch->outer : launch->outer * n_chunks;
    const int64_t work = launch->seg_start ? launch->seg_start[launch->outer] * launch->inner
                                           : launch->outer * launch->len * launch->inner;
    const dc_assoc_cpu_scan kernel = op->cpu[type_index(dtype)].scan;
    const int team = dc_pool_team(&ctx->cpu, pieces > 1 && work >= SPLIT_WORK);
    const int64_t groups = (pieces + SCAN_GROUP - 1) / SCAN_GROUP;
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
    for (int64_t g = 0; g < groups; ++g)
        kernel(launch, g * SCAN_GROUP, (g + 1) * SCAN_GROUP < pieces ? (g + 1) * SCAN_GROUP : pieces);
    return DC_OK;
}

dc_status dc_assoc_run_vjp(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, dc_assoc_vjp_launch *launch)
{
    dc_ctx *ctx = tape->ctx;
    if (ctx->cuda)
        return dc_cuda_run_assoc_vjp(ctx, &op->cuda[type_index(dtype)], launch);
    const int64_t n = launch->shape[0] * launch->shape[1] * launch->shape[2];
    const int64_t pieces = (n + VJP_PIECE - 1) / VJP_PIECE;
    const dc_assoc_cpu_vjp kernel = op->cpu[type_index(dtype)].vjp;
    const int team = dc_pool_team(&ctx->cpu, n >= SPLIT_WORK / 4);
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t p = 0; p < pieces; ++p)
        kernel(launch, p * VJP_PIECE, (p + 1) * VJP_PIECE < n ? (p + 1) * VJP_PIECE : n);
    return DC_OK;
}

dc_status dc_assoc_run_scan_adjoint(dc_tape *tape, const dc_assoc *op, dc_dtype dtype,
                                    dc_assoc_scan_adjoint_launch *launch)
{
    dc_ctx *ctx = tape->ctx;
    if (ctx->cuda)
        return dc_cuda_run_assoc_scan_adjoint(ctx, &op->cuda[type_index(dtype)], launch);
    const bool by_piece = launch->phase == DC_ASSOC_ADJ_MAPS || launch->phase == DC_ASSOC_ADJ_PIECES;
    const int64_t items =
        launch->outer * launch->inner * (by_piece ? (launch->len + launch->chunk - 1) / launch->chunk : 1);
    const dc_assoc_cpu_scan_adjoint kernel = op->cpu[type_index(dtype)].scan_adjoint;
    const int team = dc_pool_team(&ctx->cpu, items > 1 && items * launch->len >= SPLIT_WORK / 4);
    const int64_t groups = (items + ADJOINT_GROUP - 1) / ADJOINT_GROUP;
#pragma omp parallel for num_threads(team) schedule(dynamic, 2)
    for (int64_t g = 0; g < groups; ++g)
        kernel(launch, g * ADJOINT_GROUP, (g + 1) * ADJOINT_GROUP < items ? (g + 1) * ADJOINT_GROUP : items);
    return DC_OK;
}

dc_status dc_assoc_run_reduce_adjoint(dc_tape *tape, const dc_assoc *op, dc_dtype dtype,
                                      dc_assoc_reduce_adjoint_launch *launch)
{
    dc_ctx *ctx = tape->ctx;
    if (ctx->cuda)
        return dc_cuda_run_assoc_reduce_adjoint(ctx, &op->cuda[type_index(dtype)], launch);
    const int64_t rows = launch->outer * launch->inner;
    const int64_t items =
        launch->phase == DC_ASSOC_RED_PIECES ? rows * ((launch->len + launch->chunk - 1) / launch->chunk) : rows;
    const dc_assoc_cpu_reduce_adjoint kernel = op->cpu[type_index(dtype)].reduce_adjoint;
    const int64_t work = launch->phase == DC_ASSOC_RED_PIECES ? rows * launch->len : items;
    const int team = dc_pool_team(&ctx->cpu, items > 1 && work >= SPLIT_WORK / 4);
    const int64_t groups = (items + ADJOINT_GROUP - 1) / ADJOINT_GROUP;
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
    for (int64_t g = 0; g < groups; ++g)
        kernel(launch, g * ADJOINT_GROUP, (g + 1) * ADJOINT_GROUP < items ? (g + 1) * ADJOINT_GROUP : items);
    return DC_OK;
}

bool dc_assoc_alloc_fields(dc_tape *tape, int k, int64_t n, dc_dtype dtype, void **arrays)
{
    for (int f = 0; f < k; ++f)
        if (!(arrays[f] = dc_tape_alloc_data(tape, (size_t)(n > 0 ? n : 1) * dc_dtype_size(dtype))))
            return false;
    return true;
}

dc_status dc_assoc_scan_blocks(dc_tape *tape, const dc_assoc *op, dc_dtype dtype, int64_t outer, int64_t len,
                               int64_t inner, const void *const *x, void *const *y, void *const *total, int flags,
                               const void **piece_totals)
{
    const int k = op->n_state;
    if (outer * inner == 0)
        return DC_OK;
    const int64_t n_chunks = len > DC_ASSOC_CHUNK ? (len + DC_ASSOC_CHUNK - 1) / DC_ASSOC_CHUNK : 1;
    void *temp[DC_ASSOC_MAX_STATE];
    if (!total && !dc_assoc_alloc_fields(tape, k, outer * inner, dtype, temp))
        return DC_ERR_MEMORY;
    dc_assoc_scan_launch L;
    memset(&L, 0, sizeof L);
    L.outer = outer;
    L.len = len;
    L.inner = inner;
    L.chunk = DC_ASSOC_CHUNK;
    for (int f = 0; f < k; ++f)
        L.x[f] = x[f];
    if (n_chunks == 1) { /* one piece a row: straight from the neutral element */
        for (int f = 0; f < k; ++f) {
            L.y[f] = y ? y[f] : NULL;
            L.carry[f] = total ? total[f] : temp[f];
        }
        L.flags = flags | DC_ASSOC_FROM_NEUTRAL;
        return dc_assoc_run_scan(tape, op, dtype, &L);
    }
    /* the pieces' totals ... */
    void *pieces[DC_ASSOC_MAX_STATE];
    if (!dc_assoc_alloc_fields(tape, k, outer * n_chunks * inner, dtype, pieces))
        return DC_ERR_MEMORY;
    for (int f = 0; f < k; ++f) {
        L.carry[f] = pieces[f];
        if (piece_totals)
            piece_totals[f] = pieces[f];
    }
    L.flags = (flags & DC_ASSOC_REVERSE) | DC_ASSOC_FROM_NEUTRAL;
    dc_status st = dc_assoc_run_scan(tape, op, dtype, &L);
    if (st != DC_OK)
        return st;
    /* ... combined in order: in place into each piece's carry (a scan), or
     * into the row's total (a reduction) ... */
    dc_assoc_scan_launch P;
    memset(&P, 0, sizeof P);
    P.outer = outer;
    P.len = n_chunks;
    P.inner = inner;
    P.chunk = n_chunks;
    for (int f = 0; f < k; ++f) {
        P.x[f] = pieces[f];
        P.y[f] = y ? pieces[f] : NULL;
        P.carry[f] = total ? total[f] : temp[f];
    }
    P.flags = (flags & DC_ASSOC_REVERSE) | DC_ASSOC_FROM_NEUTRAL | (y ? DC_ASSOC_EXCLUSIVE : 0);
    st = dc_assoc_run_scan(tape, op, dtype, &P);
    if (st != DC_OK || !y)
        return st;
    /* ... and each piece scanned from its carry */
    for (int f = 0; f < k; ++f)
        L.y[f] = y[f];
    L.flags = flags;
    return dc_assoc_run_scan(tape, op, dtype, &L);
}
