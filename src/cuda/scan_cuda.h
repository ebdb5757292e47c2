/* Device entry points of the prefix scans (src/cuda/scan.cu), and how they
 * split a scan: the input is a contiguous [outer, len, inner] block scanned
 * along len; each of its outer * inner lines is cut into chunks of a fixed
 * size where it is long and lines are few (src/ops/scan_formulas.h says
 * what is computed). All pointers are device memory. */
#ifndef DC_CUDA_SCAN_H
#define DC_CUDA_SCAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../internal.h"

/* Rows (inner 1) longer than this are scanned by a block per row and
 * chunk; shorter lines, and columns, by a thread per line and chunk. */
#define DC_CUDA_SCAN_ROW_MIN 64
/* A block's chunk of a row: 256 threads of 16 elements. */
#define DC_CUDA_SCAN_ROW_CHUNK 4096
/* A thread's chunk of a column, where lines are fewer than
 * DC_CUDA_SCAN_FEW_LINES (more lines keep the device busy unchunked). */
#define DC_CUDA_SCAN_LINE_CHUNK 1024
#define DC_CUDA_SCAN_FEW_LINES 4096

/* The chunks per line of a scan of that block on CUDA. */
static inline int64_t dc_cuda_scan_chunks(int64_t outer, int64_t len, int64_t inner)
{
    if (len == 0)
        return 0;
    if (inner == 1 && len > DC_CUDA_SCAN_ROW_MIN)
        return (len + DC_CUDA_SCAN_ROW_CHUNK - 1) / DC_CUDA_SCAN_ROW_CHUNK;
    if (outer * inner < DC_CUDA_SCAN_FEW_LINES && len > DC_CUDA_SCAN_LINE_CHUNK)
        return (len + DC_CUDA_SCAN_LINE_CHUNK - 1) / DC_CUDA_SCAN_LINE_CHUNK;
    return 1;
}

/* Bytes of device scratch (`parts`) a scan (adjoint false) or its adjoint
 * needs: a summary per line and chunk where lines have several chunks. */
static inline size_t dc_cuda_scan_parts_bytes(int64_t outer, int64_t len, int64_t inner, bool adjoint)
{
    const int64_t chunks = dc_cuda_scan_chunks(outer, len, inner);
    return chunks > 1 ? (size_t)(outer * inner * chunks) * (adjoint ? 2 : 1) * sizeof(double) : 0;
}

/* y = the scan of x (op a dc_reduction), both [outer, len, inner]. */
dc_status dc_cuda_scan(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, void *y, int64_t outer,
                       int64_t len, int64_t inner, void *parts);

/* gx = the adjoint of that scan given y and its adjoint gy (all four
 * [outer, len, inner]; gx overwritten, or added to where add is true). */
dc_status dc_cuda_scan_adjoint(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, const void *y,
                               const void *gy, void *gx, int64_t outer, int64_t len, int64_t inner, void *parts,
                               bool add);

/* Bytes of device scratch dc_cuda_scan_zero_safe_outputs needs: a line's
 * first zero per cut of DC_CUDA_SCAN_LINE_CHUNK positions. */
static inline size_t dc_cuda_scan_zero_scratch_bytes(int64_t outer, int64_t len, int64_t inner)
{
    return (size_t)(outer * ((len + DC_CUDA_SCAN_LINE_CHUNK - 1) / DC_CUDA_SCAN_LINE_CHUNK) * inner) *
           sizeof(int64_t);
}

/* ys = the scan's output y as a product's adjoint takes it: 0 where the
 * product before a position runs over a zero element, else y
 * (scan_formulas.h, dc_scan_zero_safe_output); x, y, ys [outer, len,
 * inner], scratch dc_cuda_scan_zero_scratch_bytes. */
dc_status dc_cuda_scan_zero_safe_outputs(dc_ctx *ctx, dc_dtype dtype, bool exclusive, const void *x, const void *y,
                                         int64_t outer, int64_t len, int64_t inner, void *scratch, void *ys);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_SCAN_H */
