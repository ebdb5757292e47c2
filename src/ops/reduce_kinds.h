/* What a reduction kernel computes (src/ops/reduce_formulas.h). */
#ifndef DC_OPS_REDUCE_KINDS_H
#define DC_OPS_REDUCE_KINDS_H

#include <stdint.h>

/* The first four are dc_reduction's values, in its order. */
enum { DC_RK_SUM, DC_RK_PROD, DC_RK_MAX, DC_RK_MIN, DC_RK_LSE };

/* Columns (an [outer, len, inner] block with inner > 1) few and long are
 * walked in cuts: fewer than DC_RK_FEW_COLUMNS of them (outer * inner)
 * and longer than DC_RK_COLUMN_CUT positions, in cuts of that many
 * positions, each cut's state from the neutral one, the cuts' states then
 * combined in ascending order. The CPU's reductions and CUDA's (where a sum
 * and a mean go through the loop engine instead: their bits are not the
 * CPU's), so that a few long columns (a tall matrix of a few columns reduced
 * over its rows) spread over threads, and the order of the operations
 * follows from the shape alone.
 * Many columns are not cut: they give the threads enough work as they are
 * (and cut, they were slower for the products and maxima when their steps
 * still branched; bench/RESULTS.md). */
enum { DC_RK_COLUMN_CUT = 2048, DC_RK_FEW_COLUMNS = 256 };

/* The cuts of each column of such a block: 1 where its columns are not cut. */
static inline int64_t dc_rk_column_cuts(int64_t outer, int64_t len, int64_t inner)
{
    return inner > 1 && outer * inner < DC_RK_FEW_COLUMNS && len > DC_RK_COLUMN_CUT
               ? (len + DC_RK_COLUMN_CUT - 1) / DC_RK_COLUMN_CUT
               : 1;
}

#endif /* DC_OPS_REDUCE_KINDS_H */
