/* The reductions' CPU kernels (reduce_cpu.h). Work is split in pieces: an
 * output row and up to kColumns of its columns for the block reductions
 * (fewer where a thread would have no piece; of few long columns,
 * reduce_kinds.h, a cut of them), kShortRows short rows, pieces of
 * kSegmentRows rows with their own bins for segment reductions of few
 * outputs (else up to kSegmentColumns columns of every segment), whole rows
 * (inner 1) one or kSplit elements at a time. Columns, short rows and
 * segments walk each output in ascending element order, rows in
 * interleaved lanes (reduce_cpu_kernels.h). Rows
 * longer than kSplit (a whole tensor reduced, a long row) and cut columns
 * are reduced in pieces whose states are then combined in order. Either
 * way the bits never depend on the thread count. The element loops are
 * compiled once per kind (BY_KIND). */
#include "reduce_cpu.h"
#include "reduce_kinds.h"

#include <math.h>

#include "../engine/stream_store.h"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

/* Columns of one piece, at most: the states of a piece stay in L1, and a
 * piece reads 2 KiB of float32 at each position of its columns. Pieces of
 * 64 columns read 256 bytes a row, too little for the prefetchers: a sum
 * over axis 0 of [10000, 1000] float32 took 2.2 ms in them, 1.2 in pieces of
 * 512, on two threads. Columns are cut down to kMinColumns a piece while
 * that leaves a thread without one; each column is walked whole either way,
 * so the bits do not depend on it. */
enum { kColumns = 512, kMinColumns = 64 };

/* Rows of a piece of short rows; columns of a piece of segments. */
enum { kShortRows = 64, kSegmentColumns = 64 };

/* Segment reductions of at most kSegmentBins outputs over more than
 * kSegmentRows rows are reduced in pieces of kSegmentRows rows, each with
 * its own bins (dc_segment_piece_rows). */
enum { kSegmentRows = 32768, kSegmentBins = 4096 };

/* Rows (inner 1) longer than this are reduced in pieces of this length. */
enum { kSplit = 16384 };

/* Lanes of a row's walk (reduce_cpu_kernels.h); rows shorter than kShortRow
 * are walked in order, as CUDA walks them (a thread per row). */
enum { kLanes = 16, kShortRow = 33 };

/* Columns at most kNarrow wide have their gradient computed kSpread elements
 * at a time (narrow_grad). */
enum { kNarrow = 32, kSpread = 512 };

#define DC_S float
#define DC_SFX f32
#include "reduce_formulas.h"
#include "reduce_cpu_kernels.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "reduce_formulas.h"
#include "reduce_cpu_kernels.h"
#undef DC_S
#undef DC_SFX

/* Runs the statement with K the constant kind equal to kind, so that the
 * always-inline functions it calls are compiled once per kind. */
#define BY_KIND(kind, ...)                                                                                             \
    do {                                                                                                               \
        switch (kind) {                                                                                                \
        case DC_RK_SUM: {                                                                                              \
            const int K = DC_RK_SUM;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } break;                                                                                                       \
        case DC_RK_PROD: {                                                                                             \
            const int K = DC_RK_PROD;                                                                                  \
            __VA_ARGS__;                                                                                               \
        } break;                                                                                                       \
        case DC_RK_MAX: {                                                                                              \
            const int K = DC_RK_MAX;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } break;                                                                                                       \
        case DC_RK_MIN: {                                                                                              \
            const int K = DC_RK_MIN;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } break;                                                                                                       \
        default: {                                                                                                     \
            const int K = DC_RK_LSE;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } break;                                                                                                       \
        }                                                                                                              \
    } while (0)

/* BY_KIND for dtype's instance of fn (fn_f32 or fn_f64), called with the
 * constant kind K first, then the arguments. */
#define BY_DTYPE_KIND(dtype, kind, fn, ...)                                                                            \
    do {                                                                                                               \
        if ((dtype) == DC_F32)                                                                                         \
            BY_KIND(kind, fn##_f32(K, __VA_ARGS__));                                                                   \
        else                                                                                                           \
            BY_KIND(kind, fn##_f64(K, __VA_ARGS__));                                                                   \
    } while (0)

/* Elements below which one thread does the whole op. */
static const int64_t kSerial = 32768;

static int threads_for(const dc_ctx *ctx, int64_t work, int64_t pieces)
{
    return work > kSerial && pieces > 1 ? ctx->cpu.num_threads : 1;
}

#define DEFINE_REDUCE_CPU(T, SFX)                                                                                      \
    /* Output i's result and what its adjoint reads (nz, aux: NULL where                                               \
     * nothing reads them, as for a sum) */                                                                            \
    DC_INLINE void store_##SFX(T *y, T *nz, int64_t *aux, int64_t i, dc_rf_state_##SFX st)                             \
    {                                                                                                                  \
        y[i] = st.acc;                                                                                                 \
        if (nz)                                                                                                        \
            nz[i] = st.nz;                                                                                             \
        if (aux)                                                                                                       \
            aux[i] = st.aux;                                                                                           \
    }                                                                                                                  \
    /* output i's log-sum-exp from its maximum (in y) and sum of terms, and                                            \
     * its rounding into nz (dc_rf_lse_error) */                                                                       \
    DC_INLINE void finish_lse_##SFX(T *y, T *nz, int64_t i, T sum)                                                     \
    {                                                                                                                  \
        const T m = y[i];                                                                                              \
        y[i] = dc_rf_lse_finish_##SFX(m, sum);                                                                         \
        if (nz)                                                                                                        \
            nz[i] = dc_rf_lse_error_##SFX(m, sum, y[i]);                                                               \
    }                                                                                                                  \
    /* The states of w lanes over positions [l0, l1) into st, lane c's                                                 \
     * element at position l at x[c * ls + l * es] (columns: ls 1, es the                                              \
     * block's inner; short rows: ls the row length, es 1), each from the                                              \
     * neutral state: on pass 0 the kind's, on pass 1 log-sum-exp's sum of                                             \
     * terms for the lanes' maxima m. The lanes' states are kept by field                                              \
     * and stepped without a branch (reduce_cpu_kernels.h's lanes: a zero                                              \
     * counted by adding 1 or 0, a new winner taken by a select), so that the                                          \
     * loop over the lanes vectorizes; the same bits as reduce_formulas.h's                                            \
     * steps in order */                                                                                               \
    DC_INLINE void lanes_walk_##SFX(int kind, int pass, const T *x, int64_t w, int64_t ls, int64_t es, int64_t l0,     \
                                    int64_t l1, const T *m, dc_rf_state_##SFX *st)                                     \
    {                                                                                                                  \
        for (int64_t c = 0; c < w; ++c)                                                                                \
            st[c] = dc_rf_init_##SFX(pass ? DC_RK_SUM : kind);                                                         \
        if (l1 <= l0)                                                                                                  \
            return;                                                                                                    \
        dc_rf_wide_##SFX acc[kColumns], nz[kColumns], zeros[kColumns];                                                 \
        int64_t at[kColumns];                                                                                          \
        if (pass) {                                                                                                    \
            for (int64_t c = 0; c < w; ++c)                                                                            \
                acc[c] = st[c].acc;                                                                                    \
            for (int64_t l = l0; l < l1; ++l)                                                                          \
                for (int64_t c = 0; c < w; ++c) {                                                                      \
                    /* terms of maxima that need none add +0.0 to a sum                                                \
                     * that starts at +0.0 and never goes below it */                                                  \
                    const T v = x[c * ls + l * es];                                                                    \
                    acc[c] += dc_rf_lse_sums_##SFX(m[c]) ? (dc_rf_wide_##SFX)dc_rf_lse_term_##SFX(v, m[c]) : 0.0;      \
                }                                                                                                      \
            for (int64_t c = 0; c < w; ++c)                                                                            \
                st[c].acc = acc[c];                                                                                    \
        } else if (kind == DC_RK_SUM || kind == DC_RK_PROD) {                                                          \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                acc[c] = st[c].acc;                                                                                    \
                nz[c] = st[c].nz;                                                                                      \
                zeros[c] = 0;                                                                                          \
            }                                                                                                          \
            for (int64_t l = l0; l < l1; ++l)                                                                          \
                _Pragma("omp simd") for (int64_t c = 0; c < w; ++c)                                                    \
                {                                                                                                      \
                    const dc_rf_wide_##SFX v = x[c * ls + l * es];                                                     \
                    if (kind == DC_RK_SUM) {                                                                           \
                        acc[c] += v;                                                                                   \
                    } else {                                                                                           \
                        const dc_rf_wide_##SFX z = (dc_rf_wide_##SFX)(v == 0);                                         \
                        acc[c] *= v;                                                                                   \
                        nz[c] *= v + z;                                                                                \
                        zeros[c] += z;                                                                                 \
                    }                                                                                                  \
                }                                                                                                      \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                st[c].acc = acc[c];                                                                                    \
                st[c].nz = nz[c];                                                                                      \
                st[c].aux = (int64_t)zeros[c];                                                                         \
            }                                                                                                          \
        } else {                                                                                                       \
            /* each lane's winner, from its first element on */                                                       \
            T best[kColumns];                                                                                          \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                best[c] = x[c * ls + l0 * es];                                                                         \
                at[c] = l0;                                                                                            \
            }                                                                                                          \
            for (int64_t l = l0 + 1; l < l1; ++l)                                                                      \
                _Pragma("omp simd") for (int64_t c = 0; c < w; ++c)                                                    \
                {                                                                                                      \
                    const T v = x[c * ls + l * es];                                                                    \
                    const bool take = dc_rk_takes_##SFX(kind, v, best[c]);                                             \
                    best[c] = take ? v : best[c];                                                                      \
                    at[c] = take ? l : at[c];                                                                          \
                }                                                                                                      \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                st[c].acc = best[c];                                                                                   \
                st[c].aux = at[c];                                                                                     \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* output row o, columns c0..c1 of the block, walked whole */                                                      \
    DC_INLINE void block_piece_##SFX(int kind, const T *x, int64_t o, int64_t len, int64_t inner, int64_t c0,          \
                                     int64_t c1, T *y, T *nz, int64_t *aux)                                            \
    {                                                                                                                  \
        dc_rf_state_##SFX st[kColumns];                                                                                \
        const int64_t w = c1 - c0;                                                                                     \
        lanes_walk_##SFX(kind, 0, x + o * len * inner + c0, c1 - c0, 1, inner, 0, len, NULL, st);                      \
        const T *row = x + o * len * inner + c0;                                                                       \
        if (kind == DC_RK_LSE) {                                                                                       \
            /* each column's sum of terms in T, in order, as CUDA's thread                                             \
             * per column adds them; the columns side by side. A maximum                                               \
             * that needs no terms adds +0 to a sum that stays +0 */                                                   \
            T m[kColumns], sum[kColumns];                                                                              \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                m[c] = (T)st[c].acc;                                                                                   \
                sum[c] = 0;                                                                                            \
            }                                                                                                          \
            for (int64_t l = 0; l < len; ++l)                                                                          \
                for (int64_t c = 0; c < w; ++c)                                                                        \
                    sum[c] += dc_rf_lse_sums_##SFX(m[c]) ? dc_rf_lse_term_##SFX(row[l * inner + c], m[c]) : (T)0;      \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                st[c].acc = dc_rf_lse_finish_##SFX(m[c], sum[c]);                                                      \
                st[c].nz = dc_rf_lse_error_##SFX(m[c], sum[c], (T)st[c].acc);                                          \
            }                                                                                                          \
        }                                                                                                              \
        for (int64_t c = 0; c < w; ++c)                                                                                \
            store_##SFX(y, nz, aux, o * inner + c0 + c, st[c]);                                                        \
    }                                                                                                                  \
    /* piece p of a block whose columns are cut (dc_rk_column_cuts), pieces                                            \
     * numbered by output row, then chunk of kColumns columns, then cut: its                                           \
     * columns' states over the cut into part[cut * outputs + output] (pass                                            \
     * 1: log-sum-exp's sums of terms, the outputs' maxima in y) */                                                    \
    DC_INLINE void cut_piece_##SFX(int kind, int pass, const T *x, int64_t len, int64_t inner, int64_t cuts,           \
                                   int64_t outputs, int64_t p, const T *y, dc_rf_state_##SFX *part)                    \
    {                                                                                                                  \
        const int64_t chunks = (inner + kColumns - 1) / kColumns, cut = p % cuts, q = p / cuts;                        \
        const int64_t o = q / chunks, c0 = q % chunks * kColumns, c1 = c0 + kColumns < inner ? c0 + kColumns : inner;  \
        const int64_t l0 = cut * DC_RK_COLUMN_CUT, l1 = l0 + DC_RK_COLUMN_CUT < len ? l0 + DC_RK_COLUMN_CUT : len;     \
        lanes_walk_##SFX(kind, pass, x + o * len * inner + c0, c1 - c0, 1, inner, l0, l1, y + o * inner + c0,          \
                         part + cut * outputs + o * inner + c0);                                                       \
    }                                                                                                                  \
    /* output i of a block whose columns are cut: its cuts' states combined                                            \
     * in order; pass 0 its result, pass 1 log-sum-exp finished from its                                               \
     * maximum (y) */                                                                                                  \
    static void cut_combine_##SFX(int kind, int pass, int64_t i, int64_t cuts, int64_t outputs,                        \
                                  const dc_rf_state_##SFX *part, T *y, T *nz, int64_t *aux)                            \
    {                                                                                                                  \
        dc_rf_state_##SFX st = part[i];                                                                                \
        for (int64_t k = 1; k < cuts; ++k)                                                                             \
            st = dc_rf_combine_##SFX(pass ? DC_RK_SUM : kind, st, part[k * outputs + i]);                              \
        if (pass == 0)                                                                                                 \
            store_##SFX(y, nz, aux, i, st);                                                                            \
        else                                                                                                           \
            finish_lse_##SFX(y, nz, i, (T)st.acc);                                                                     \
    }                                                                                                                  \
    /* rows r0..r1 (at most kShortRows) of a [rows, len] block of short rows,                                          \
     * each walked in order: the rows the lanes */                                                                     \
    DC_INLINE void short_rows_##SFX(int kind, const T *x, int64_t r0, int64_t r1, int64_t len, T *y, T *nz,            \
                                    int64_t *aux)                                                                      \
    {                                                                                                                  \
        dc_rf_state_##SFX st[kShortRows];                                                                              \
        const int64_t w = r1 - r0;                                                                                     \
        const T *rows = x + r0 * len;                                                                                  \
        lanes_walk_##SFX(kind, 0, rows, w, len, 1, 0, len, NULL, st);                                                  \
        if (kind == DC_RK_LSE) {                                                                                       \
            /* each row's sum of terms in T, in order, as CUDA's thread per                                            \
             * row adds them; the rows side by side, so that the terms'                                                \
             * exponentials vectorize. A maximum that needs no terms adds +0                                           \
             * to a sum that stays +0 */                                                                               \
            T m[kShortRows], sum[kShortRows];                                                                          \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                m[c] = (T)st[c].acc;                                                                                   \
                sum[c] = 0;                                                                                            \
            }                                                                                                          \
            for (int64_t l = 0; l < len; ++l)                                                                          \
                _Pragma("omp simd") for (int64_t c = 0; c < w; ++c)                                                    \
                {                                                                                                      \
                    const T v = rows[c * len + l];                                                                     \
                    sum[c] += dc_rf_lse_sums_##SFX(m[c]) ? dc_rf_lse_term_##SFX(v, m[c]) : (T)0;                       \
                }                                                                                                      \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                st[c].acc = dc_rf_lse_finish_##SFX(m[c], sum[c]);                                                      \
                st[c].nz = dc_rf_lse_error_##SFX(m[c], sum[c], (T)st[c].acc);                                          \
            }                                                                                                          \
        }                                                                                                              \
        for (int64_t r = r0; r < r1; ++r)                                                                              \
            store_##SFX(y, nz, aux, r, st[r - r0]);                                                                    \
    }                                                                                                                  \
    /* row r of a [rows, len] block (len at most kSplit) */                                                            \
    DC_INLINE void row_piece_##SFX(int kind, const T *x, int64_t r, int64_t len, T *y, T *nz, int64_t *aux)            \
    {                                                                                                                  \
        const T *row = x + r * len;                                                                                    \
        dc_rf_state_##SFX st = dc_rk_row_##SFX(kind, row, 0, len);                                                     \
        if (kind == DC_RK_LSE) {                                                                                       \
            const T m = (T)st.acc, sum = dc_rf_lse_sums_##SFX(m) ? dc_rk_lse_sum_##SFX(row, 0, len, m) : (T)0;         \
            st.acc = dc_rf_lse_finish_##SFX(m, sum);                                                                   \
            st.nz = dc_rf_lse_error_##SFX(m, sum, (T)st.acc);                                                          \
        }                                                                                                              \
        store_##SFX(y, nz, aux, r, st);                                                                                \
    }                                                                                                                  \
    /* elements e0..e1 of the gradient of a block of narrow columns (inner at                                          \
     * most kNarrow): whole runs of kSpread / inner positions of an output row                                         \
     * in one loop over their elements, which vectorizes, each element's                                               \
     * output found in the row's outputs spread out once over a run (its                                               \
     * column's y, nz, aux, gy, and its position's offset in the run); the                                             \
     * rest a position at a time */                                                                                    \
    DC_INLINE void narrow_grad_##SFX(int kind, const T *x, int64_t len, int64_t inner, const T *y, const T *nz,        \
                                     const int64_t *aux, const T *gy, T *g, int64_t e0, int64_t e1)                    \
    {                                                                                                                  \
        const int64_t per = kSpread / inner, span = per * inner;                                                       \
        T sy[kSpread], snz[kSpread], sgy[kSpread];                                                                     \
        int64_t saux[kSpread], soff[kSpread];                                                                          \
        const int64_t r0 = e0 % (len * inner);                                                                         \
        int64_t e = e0, o = e0 / (len * inner), l = r0 / inner, c = r0 % inner, spread = -1;                           \
        while (e < e1) {                                                                                               \
            const int64_t at = (o * len + l) * inner;                                                                  \
            if (c == 0 && e1 - e >= span && len - l >= per) {                                                          \
                if (spread != o) {                                                                                     \
                    for (int64_t k = 0; k < span; ++k) {                                                               \
                        const int64_t i = o * inner + k % inner;                                                       \
                        sy[k] = y[i];                                                                                  \
                        snz[k] = nz[i];                                                                                \
                        saux[k] = aux[i];                                                                              \
                        sgy[k] = gy[i];                                                                                \
                        soff[k] = k / inner;                                                                           \
                    }                                                                                                  \
                    spread = o;                                                                                        \
                }                                                                                                      \
                _Pragma("omp simd") for (int64_t k = 0; k < span; ++k) g[at + k] =                                     \
                    dc_rf_grad_##SFX(kind, x[at + k], l + soff[k], sy[k], snz[k], saux[k], sgy[k]);                    \
                e += span;                                                                                             \
                l += per;                                                                                              \
            } else {                                                                                                   \
                const int64_t c1 = inner - c < e1 - e ? inner : c + (e1 - e);                                          \
                dc_rk_grad_columns_##SFX(kind, x + at, l, c, c1, y + o * inner, nz + o * inner, aux + o * inner,       \
                                         gy + o * inner, g + at);                                                      \
                e += c1 - c;                                                                                           \
                c = 0;                                                                                                 \
                ++l;                                                                                                   \
            }                                                                                                          \
            if (l == len) {                                                                                            \
                l = 0;                                                                                                 \
                ++o;                                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* elements e0..e1 of the block's gradient */                                                                      \
    DC_INLINE void block_grad_##SFX(int kind, const T *x, int64_t len, int64_t inner, const T *y, const T *nz,         \
                                    const int64_t *aux, const T *gy, T *g, int64_t e0, int64_t e1)                     \
    {                                                                                                                  \
        if (inner == 1) {                                                                                              \
            for (int64_t e = e0, o = e0 / len, l = e0 % len; e < e1; ++o, l = 0) {                                     \
                const int64_t l1 = len - l < e1 - e ? len : l + (e1 - e);                                              \
                dc_rk_grad_row_##SFX(kind, x + o * len, l, l1, y[o], nz[o], aux[o], gy[o], g + o * len);               \
                e += l1 - l;                                                                                           \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        if (inner <= kNarrow) {                                                                                        \
            narrow_grad_##SFX(kind, x, len, inner, y, nz, aux, gy, g, e0, e1);                                         \
            return;                                                                                                    \
        }                                                                                                              \
        const int64_t o0 = e0 / (len * inner), r0 = e0 % (len * inner);                                                \
        for (int64_t e = e0, o = o0, l = r0 / inner, c = r0 % inner; e < e1; c = 0) {                                  \
            const int64_t c1 = inner - c < e1 - e ? inner : c + (e1 - e), at = (o * len + l) * inner;                  \
            dc_rk_grad_columns_##SFX(kind, x + at, l, c, c1, y + o * inner, nz + o * inner, aux + o * inner,           \
                                     gy + o * inner, g + at);                                                          \
            e += c1 - c;                                                                                               \
            if (++l == len) {                                                                                          \
                l = 0;                                                                                                 \
                ++o;                                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_REDUCE_CPU(float, f32)
DEFINE_REDUCE_CPU(double, f64)

/* Long rows: piece p (row p / splits, its elements from p % splits * kSplit)
 * into part[p]; pass 0 the state, pass 1 log-sum-exp's sum of terms (the
 * row's maximum in y by then). The rows' results from their parts, in
 * order: pass 0 into y, nz, aux; pass 1 log-sum-exp finished. */
#define DEFINE_SPLIT_CPU(T, SFX)                                                                                       \
    DC_INLINE void split_piece_##SFX(int kind, int pass, const T *x, int64_t len, int64_t splits, int64_t p,           \
                                     const T *y, dc_rf_state_##SFX *part)                                              \
    {                                                                                                                  \
        const int64_t r = p / splits, l0 = p % splits * kSplit, l1 = l0 + kSplit < len ? l0 + kSplit : len;            \
        const T *row = x + r * len;                                                                                    \
        if (pass == 0) {                                                                                               \
            part[p] = dc_rk_row_##SFX(kind, row, l0, l1);                                                              \
        } else {                                                                                                       \
            part[p] = dc_rf_init_##SFX(DC_RK_SUM);                                                                     \
            if (dc_rf_lse_sums_##SFX(y[r]))                                                                            \
                part[p].acc = dc_rk_lse_sum_##SFX(row, l0, l1, y[r]);                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    static void split_combine_##SFX(int kind, int pass, int64_t r, int64_t splits, const dc_rf_state_##SFX *part,      \
                                    T *y, T *nz, int64_t *aux)                                                         \
    {                                                                                                                  \
        dc_rf_state_##SFX st = part[r * splits];                                                                       \
        for (int64_t k = 1; k < splits; ++k)                                                                           \
            st = dc_rf_combine_##SFX(pass ? DC_RK_SUM : kind, st, part[r * splits + k]);                               \
        if (pass == 0)                                                                                                 \
            store_##SFX(y, nz, aux, r, st);                                                                            \
        else                                                                                                           \
            finish_lse_##SFX(y, nz, r, (T)st.acc);                                                                     \
    }
DEFINE_SPLIT_CPU(float, f32)
DEFINE_SPLIT_CPU(double, f64)

static int64_t splits_of(int64_t len, int64_t inner)
{
    return inner == 1 && len > kSplit ? (len + kSplit - 1) / kSplit : 1;
}

size_t dc_cpu_reduce_scratch(int64_t outer, int64_t len, int64_t inner)
{
    const int64_t splits = splits_of(len, inner), cuts = dc_rk_column_cuts(outer, len, inner);
    const int64_t states = splits > 1 ? outer * splits : cuts > 1 ? outer * inner * cuts : 0;
    return (size_t)states * sizeof(dc_rf_state_f64);
}

static void reduce_split(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t rows, int64_t len,
                         int64_t splits, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t pieces = rows * splits;
    const int n_threads = threads_for(ctx, rows * len, pieces), row_threads = threads_for(ctx, rows * len, rows);
    for (int pass = 0; pass < (kind == DC_RK_LSE ? 2 : 1); ++pass) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {
            BY_DTYPE_KIND(dtype, kind, split_piece, pass, x, len, splits, p, y, scratch);
        }
#pragma omp parallel for num_threads(row_threads) schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            if (dtype == DC_F32)
                split_combine_f32(kind, pass, r, splits, scratch, y, nz, aux);
            else
                split_combine_f64(kind, pass, r, splits, scratch, y, nz, aux);
        }
    }
}

/* Columns cut (dc_rk_column_cuts): every cut of every chunk of kColumns
 * columns a piece, then every output's cuts combined in order. */
static void reduce_cut_columns(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, int64_t cuts, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t outputs = outer * inner, pieces = outer * ((inner + kColumns - 1) / kColumns) * cuts;
    const int n_threads = threads_for(ctx, outputs * len, pieces);
    const int out_threads = threads_for(ctx, outputs * cuts, outputs);
    for (int pass = 0; pass < (kind == DC_RK_LSE ? 2 : 1); ++pass) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {
            BY_DTYPE_KIND(dtype, kind, cut_piece, pass, x, len, inner, cuts, outputs, p, y, scratch);
        }
#pragma omp parallel for num_threads(out_threads) schedule(static)
        for (int64_t i = 0; i < outputs; ++i) {
            if (dtype == DC_F32)
                cut_combine_f32(kind, pass, i, cuts, outputs, scratch, y, nz, aux);
            else
                cut_combine_f64(kind, pass, i, cuts, outputs, scratch, y, nz, aux);
        }
    }
}

void dc_cpu_reduce_block(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                         int64_t inner, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t splits = splits_of(len, inner), cuts = dc_rk_column_cuts(outer, len, inner);
    if (splits > 1) {
        reduce_split(ctx, kind, dtype, x, outer, len, splits, y, nz, aux, scratch);
        return;
    }
    if (cuts > 1) {
        reduce_cut_columns(ctx, kind, dtype, x, outer, len, inner, cuts, y, nz, aux, scratch);
        return;
    }
    if (inner == 1 && len >= kShortRow) {
        const int n_threads = threads_for(ctx, outer * len, outer);
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t r = 0; r < outer; ++r) {
            BY_DTYPE_KIND(dtype, kind, row_piece, x, r, len, y, nz, aux);
        }
        return;
    }
    if (inner == 1) {
        /* short rows, kShortRows of them a piece */
        const int64_t pieces = (outer + kShortRows - 1) / kShortRows;
        const int n_threads = threads_for(ctx, outer * len, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {
            const int64_t r0 = p * kShortRows, r1 = r0 + kShortRows < outer ? r0 + kShortRows : outer;
            BY_DTYPE_KIND(dtype, kind, short_rows, x, r0, r1, len, y, nz, aux);
        }
        return;
    }
    int64_t width = kColumns;
    while (width > kMinColumns && outer * ((inner + width - 1) / width) < ctx->cpu.num_threads)
        width /= 2;
    const int64_t chunks = (inner + width - 1) / width, pieces = outer * chunks;
    const int n_threads = threads_for(ctx, outer * len * inner, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t o = p / chunks, c0 = p % chunks * width;
        const int64_t c1 = c0 + width < inner ? c0 + width : inner;
        BY_DTYPE_KIND(dtype, kind, block_piece, x, o, len, inner, c0, c1, y, nz, aux);
    }
}

/* Elements of one piece of an elementwise gradient. */
static const int64_t kGradPiece = 16384;

void dc_cpu_reduce_block_grad(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                              int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy, void *g)
{
    const int64_t total = outer * len * inner, pieces = (total + kGradPiece - 1) / kGradPiece;
    const int n_threads = threads_for(ctx, total, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t e0 = p * kGradPiece, e1 = e0 + kGradPiece < total ? e0 + kGradPiece : total;
        BY_DTYPE_KIND(dtype, kind, block_grad, x, len, inner, y, nz, aux, gy, g, e0, e1);
    }
}

/* A maximum or minimum of a piece's rows into its bins (fresh, as
 * dc_rf_init left them) in two walks, where the piece holds no NaN: the
 * extrema by a select (a strict compare: of equal elements, two zeros of
 * different signs among them, the first stays), then each bin's first
 * element equal to its extremum takes the win. The same states as
 * dc_rf_step element by element, whose branch on a win, taken about one
 * step in eight at random over uniform values, was mispredicted: segment_max
 * at 10^6 rows took 3.9 times segment_sum on an AMD EPYC (2.9 after).
 * Rows [r0, r1) of columns [c0, c1), row r0 + j's segment seg[j];
 * extrema_walk returns whether the rows hold a NaN (the bins then to be set
 * up again and stepped). */
#define DEFINE_SEGMENT_EXTREMA_CPU(T, SFX)                                                                             \
    DC_INLINE bool extrema_walk_##SFX(int kind, const T *v, int64_t width, const int64_t *seg, int64_t r0, int64_t r1, \
                                      int64_t c0, int64_t c1, dc_rf_state_##SFX *bins)                                 \
    {                                                                                                                  \
        bool nan = false;                                                                                              \
        for (int64_t i = r0; i < r1; ++i) {                                                                            \
            dc_rf_state_##SFX *b = bins + seg[i - r0] * width;                                                         \
            for (int64_t c = c0; c < c1; ++c) {                                                                        \
                const double x = (double)v[i * width + c], m = b[c].acc;                                               \
                nan |= x != x;                                                                                         \
                b[c].acc = (kind == DC_RK_MIN ? x < m : x > m) ? x : m;                                                \
            }                                                                                                          \
        }                                                                                                              \
        return nan;                                                                                                    \
    }                                                                                                                  \
    DC_INLINE void extrema_winners_##SFX(const T *v, int64_t width, const int64_t *seg, int64_t r0, int64_t r1,        \
                                         int64_t c0, int64_t c1, dc_rf_state_##SFX *bins)                              \
    {                                                                                                                  \
        for (int64_t i = r0; i < r1; ++i) {                                                                            \
            dc_rf_state_##SFX *b = bins + seg[i - r0] * width;                                                         \
            for (int64_t c = c0; c < c1; ++c) {                                                                        \
                const double x = (double)v[i * width + c];                                                             \
                if (x == b[c].acc && b[c].aux < 0)                                                                     \
                    b[c].aux = i;                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_SEGMENT_EXTREMA_CPU(float, f32)
DEFINE_SEGMENT_EXTREMA_CPU(double, f64)

/* A sum of m rows of one column into bins, row k into bins[at[k]], two rows
 * at a time: both bins are read before either is written, where they are
 * two, so that the next row's add need not wait on this row's store (where
 * they are one, the two adds in order). The same adds in the same order as
 * dc_rf_step row by row, so the same bits: segment_sum at 10^6 rows spent
 * its time on each add's store and the next row's load of a bin. */
#define DEFINE_SEGMENT_SUM_CPU(T, SFX)                                                                                 \
    DC_INLINE void sum_rows_##SFX(dc_rf_state_##SFX *bins, const int64_t *at, const T *v, int64_t m)                   \
    {                                                                                                                  \
        int64_t k = 0;                                                                                                 \
        for (; k + 1 < m; k += 2) {                                                                                    \
            dc_rf_state_##SFX *p = bins + at[k], *q = bins + at[k + 1];                                                \
            if (p != q) {                                                                                              \
                const double x = p->acc + v[k], y = q->acc + v[k + 1];                                                 \
                p->acc = x;                                                                                            \
                q->acc = y;                                                                                            \
            } else {                                                                                                   \
                p->acc = p->acc + v[k] + v[k + 1];                                                                     \
            }                                                                                                          \
        }                                                                                                              \
        if (k < m)                                                                                                     \
            bins[at[k]].acc += v[k];                                                                                   \
    }
DEFINE_SEGMENT_SUM_CPU(float, f32)
DEFINE_SEGMENT_SUM_CPU(double, f64)

/* Rows [r0, r1), columns [c0, c1) of each, into bins ([outputs], output s
 * * width + c), initialized first; the states of outputs [k0, k1) from
 * their pieces' (piece p's bins at part + p * outputs), in order. */
#define DEFINE_SEGMENT_PIECES_CPU(T, SFX)                                                                              \
    DC_INLINE void segment_bins_##SFX(int kind, const T *v, int64_t width, const int64_t *index, int64_t n_segments,   \
                                      int64_t r0, int64_t r1, int64_t c0, int64_t c1, dc_rf_state_##SFX *bins)         \
    {                                                                                                                  \
        const dc_rf_state_##SFX s0 = dc_rf_init_##SFX(kind);                                                           \
        for (int64_t s = 0; s < n_segments; ++s)                                                                       \
            for (int64_t c = c0; c < c1; ++c)                                                                          \
                bins[s * width + c] = s0;                                                                              \
        if (kind == DC_RK_MAX || kind == DC_RK_MIN) {                                                                  \
            const bool nan = width == 1 ? extrema_walk_##SFX(kind, v, 1, index + r0, r0, r1, 0, 1, bins)               \
                                        : extrema_walk_##SFX(kind, v, width, index + r0, r0, r1, c0, c1, bins);        \
            if (!nan) {                                                                                                \
                if (width == 1)                                                                                        \
                    extrema_winners_##SFX(v, 1, index + r0, r0, r1, 0, 1, bins);                                       \
                else                                                                                                   \
                    extrema_winners_##SFX(v, width, index + r0, r0, r1, c0, c1, bins);                                 \
                return;                                                                                                \
            }                                                                                                          \
            for (int64_t s = 0; s < n_segments; ++s)                                                                   \
                for (int64_t c = c0; c < c1; ++c)                                                                      \
                    bins[s * width + c] = s0;                                                                          \
        }                                                                                                              \
        if (width == 1) { /* no loop over the columns: its set-up per row would cost more than the row */              \
            if (kind == DC_RK_SUM) {                                                                                   \
                sum_rows_##SFX(bins, index + r0, v + r0, r1 - r0);                                                     \
                return;                                                                                                \
            }                                                                                                          \
            for (int64_t i = r0; i < r1; ++i)                                                                          \
                dc_rf_step_##SFX(kind, &bins[index[i]], v[i], i);                                                      \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t i = r0; i < r1; ++i) {                                                                            \
            dc_rf_state_##SFX *b = bins + index[i] * width;                                                            \
            for (int64_t c = c0; c < c1; ++c)                                                                          \
                dc_rf_step_##SFX(kind, &b[c], v[i * width + c], i);                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    static void segment_fold_##SFX(int kind, int64_t pieces, int64_t outputs, int64_t k0, int64_t k1,                  \
                                   const dc_rf_state_##SFX *part, T *y, T *nz, int64_t *aux)                           \
    {                                                                                                                  \
        for (int64_t k = k0; k < k1; ++k) {                                                                            \
            dc_rf_state_##SFX st = dc_rf_init_##SFX(kind);                                                             \
            for (int64_t p = 0; p < pieces; ++p)                                                                       \
                st = dc_rf_combine_##SFX(kind, st, part[p * outputs + k]);                                             \
            y[k] = (T)st.acc;                                                                                          \
            nz[k] = (T)st.nz;                                                                                          \
            aux[k] = st.aux;                                                                                           \
        }                                                                                                              \
    }
DEFINE_SEGMENT_PIECES_CPU(float, f32)
DEFINE_SEGMENT_PIECES_CPU(double, f64)

/* Indices of a piece converted at a time (on the stack). */
enum { kIndexChunk = 512 };

/* As segment_bins over every column, the rows' segments read from the
 * index as stored (idx, the values' type) and checked on the way, a chunk
 * at a time: returns the first row whose index is not an integer in
 * 0..n_segments-1 (the bins then incomplete), else r1. The gradient of
 * elements e0..e1 from such an index, checked by the forward. */
#define DEFINE_SEGMENT_INDEX_CPU(T, SFX)                                                                               \
    /* rows [i0, i0 + m) of the index into at; the first row whose index is                                            \
     * not a segment, else -1 */                                                                                       \
    DC_INLINE int64_t segment_chunk_##SFX(const T *idx, int64_t n_segments, int64_t i0, int m, int64_t *at)            \
    {                                                                                                                  \
        const double top = (double)n_segments;                                                                         \
        int bad = 0;                                                                                                   \
        for (int k = 0; k < m; ++k) {                                                                                  \
            const double u = (double)idx[i0 + k];                                                                      \
            const int ok = (u >= 0) & (u < top) & (u == floor(u));                                                     \
            bad += 1 - ok;                                                                                             \
            at[k] = (int64_t)(ok ? u : 0.0);                                                                           \
        }                                                                                                              \
        for (int k = 0; bad && k < m; ++k) {                                                                           \
            const double u = (double)idx[i0 + k];                                                                      \
            if (!(u >= 0 && u < top) || u != floor(u))                                                                 \
                return i0 + k;                                                                                         \
        }                                                                                                              \
        return -1;                                                                                                     \
    }                                                                                                                  \
    DC_INLINE int64_t segment_bins_checked_##SFX(int kind, const T *v, int64_t width, const T *idx,                    \
                                                 int64_t n_segments, int64_t r0, int64_t r1, dc_rf_state_##SFX *bins)  \
    {                                                                                                                  \
        const dc_rf_state_##SFX s0 = dc_rf_init_##SFX(kind);                                                           \
        for (int64_t k = 0; k < n_segments * width; ++k)                                                               \
            bins[k] = s0;                                                                                              \
        int64_t at[kIndexChunk];                                                                                       \
        if (kind == DC_RK_MAX || kind == DC_RK_MIN) { /* in two walks (DEFINE_SEGMENT_EXTREMA_CPU) */                  \
            bool nan = false;                                                                                          \
            for (int64_t i0 = r0; i0 < r1; i0 += kIndexChunk) {                                                        \
                const int m = r1 - i0 < kIndexChunk ? (int)(r1 - i0) : kIndexChunk;                                    \
                const int64_t bad = segment_chunk_##SFX(idx, n_segments, i0, m, at);                                   \
                if (bad >= 0)                                                                                          \
                    return bad;                                                                                        \
                nan |= width == 1 ? extrema_walk_##SFX(kind, v, 1, at, i0, i0 + m, 0, 1, bins)                         \
                                  : extrema_walk_##SFX(kind, v, width, at, i0, i0 + m, 0, width, bins);                \
            }                                                                                                          \
            if (!nan) {                                                                                                \
                for (int64_t i0 = r0; i0 < r1; i0 += kIndexChunk) {                                                    \
                    const int m = r1 - i0 < kIndexChunk ? (int)(r1 - i0) : kIndexChunk;                                \
                    segment_chunk_##SFX(idx, n_segments, i0, m, at);                                                   \
                    if (width == 1)                                                                                    \
                        extrema_winners_##SFX(v, 1, at, i0, i0 + m, 0, 1, bins);                                       \
                    else                                                                                               \
                        extrema_winners_##SFX(v, width, at, i0, i0 + m, 0, width, bins);                               \
                }                                                                                                      \
                return r1;                                                                                             \
            }                                                                                                          \
            for (int64_t k = 0; k < n_segments * width; ++k)                                                           \
                bins[k] = s0;                                                                                          \
        }                                                                                                              \
        for (int64_t i0 = r0; i0 < r1; i0 += kIndexChunk) {                                                            \
            const int m = r1 - i0 < kIndexChunk ? (int)(r1 - i0) : kIndexChunk;                                        \
            const int64_t bad = segment_chunk_##SFX(idx, n_segments, i0, m, at);                                       \
            if (bad >= 0)                                                                                              \
                return bad;                                                                                            \
            if (width == 1 && kind == DC_RK_SUM) {                                                                     \
                sum_rows_##SFX(bins, at, v + i0, m);                                                                   \
                continue;                                                                                              \
            }                                                                                                          \
            if (width == 1) {                                                                                          \
                for (int k = 0; k < m; ++k)                                                                            \
                    dc_rf_step_##SFX(kind, &bins[at[k]], v[i0 + k], i0 + k);                                           \
                continue;                                                                                              \
            }                                                                                                          \
            for (int k = 0; k < m; ++k) {                                                                              \
                dc_rf_state_##SFX *b = bins + at[k] * width;                                                           \
                const T *row = v + (i0 + k) * width;                                                                   \
                for (int64_t c = 0; c < width; ++c)                                                                    \
                    dc_rf_step_##SFX(kind, &b[c], row[c], i0 + k);                                                     \
            }                                                                                                          \
        }                                                                                                              \
        return r1;                                                                                                     \
    }                                                                                                                  \
    DC_INLINE void segment_grad_checked_##SFX(int kind, const T *v, int64_t width, const T *idx, const T *y,           \
                                              const T *nz, const int64_t *aux, const T *gy, T *g, int64_t e0,          \
                                              int64_t e1)                                                              \
    {                                                                                                                  \
        if (width == 1) {                                                                                              \
            for (int64_t i = e0; i < e1; ++i) {                                                                        \
                const int64_t out = (int64_t)idx[i];                                                                   \
                g[i] = dc_rf_grad_##SFX(kind, v[i], i, y[out], nz[out], aux[out], gy[out]);                            \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t e = e0; e < e1; ++e) {                                                                            \
            const int64_t i = e / width, out = (int64_t)idx[i] * width + e % width;                                    \
            g[e] = dc_rf_grad_##SFX(kind, v[e], i, y[out], nz[out], aux[out], gy[out]);                                \
        }                                                                                                              \
    }
DEFINE_SEGMENT_INDEX_CPU(float, f32)
DEFINE_SEGMENT_INDEX_CPU(double, f64)

int64_t dc_segment_piece_rows(int64_t n, int64_t n_segments, int64_t width)
{
    return n > kSegmentRows && n_segments * width <= kSegmentBins ? kSegmentRows : (n > 0 ? n : 1);
}

size_t dc_cpu_segment_scratch(int64_t n, int64_t n_segments, int64_t width)
{
    const int64_t rows = dc_segment_piece_rows(n, n_segments, width), pieces = rows < n ? (n + rows - 1) / rows : 1;
    const int64_t outputs = n_segments * width;
    return (size_t)(pieces * (outputs > 0 ? outputs : 1)) * sizeof(dc_rf_state_f64);
}

/* The outputs [k0, k1) from the states of their pieces. */
static void segment_fold(const dc_ctx *ctx, int kind, dc_dtype dtype, int64_t pieces, int64_t outputs,
                         const void *scratch, void *y, void *nz, int64_t *aux)
{
    const int64_t chunks = (outputs + kSegmentColumns - 1) / kSegmentColumns;
    const int n_threads = threads_for(ctx, pieces * outputs, chunks);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t q = 0; q < chunks; ++q) {
        const int64_t k0 = q * kSegmentColumns, k1 = k0 + kSegmentColumns < outputs ? k0 + kSegmentColumns : outputs;
        if (dtype == DC_F32)
            segment_fold_f32(kind, pieces, outputs, k0, k1, scratch, y, nz, aux);
        else
            segment_fold_f64(kind, pieces, outputs, k0, k1, scratch, y, nz, aux);
    }
}

void dc_cpu_segment_reduce(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                           const int64_t *index, int64_t n_segments, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t rows = dc_segment_piece_rows(n, n_segments, width), outputs = n_segments * width;
    if (rows < n) {
        /* few outputs, many rows: pieces of rows, each with its own bins */
        const int64_t pieces = (n + rows - 1) / rows;
        const int n_threads = threads_for(ctx, n * width, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {
            const int64_t r0 = p * rows, r1 = r0 + rows < n ? r0 + rows : n;
            if (dtype == DC_F32)
                BY_KIND(kind, segment_bins_f32(K, values, width, index, n_segments, r0, r1, 0, width,
                                               (dc_rf_state_f32 *)scratch + p * outputs));
            else
                BY_KIND(kind, segment_bins_f64(K, values, width, index, n_segments, r0, r1, 0, width,
                                               (dc_rf_state_f64 *)scratch + p * outputs));
        }
        segment_fold(ctx, kind, dtype, pieces, outputs, scratch, y, nz, aux);
        return;
    }
    /* one piece of every row: the threads take columns */
    const int64_t chunks = (width + kSegmentColumns - 1) / kSegmentColumns;
    const int n_threads = threads_for(ctx, (n + n_segments) * width, chunks);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t q = 0; q < chunks; ++q) {
        const int64_t c0 = q * kSegmentColumns, c1 = c0 + kSegmentColumns < width ? c0 + kSegmentColumns : width;
        BY_DTYPE_KIND(dtype, kind, segment_bins, values, width, index, n_segments, 0, n, c0, c1, scratch);
    }
    segment_fold(ctx, kind, dtype, 1, outputs, scratch, y, nz, aux);
}

int64_t dc_cpu_segment_reduce_checked(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const void *index, int64_t n_segments, void *y, void *nz,
                                      int64_t *aux, void *scratch)
{
    const int64_t rows = dc_segment_piece_rows(n, n_segments, width), outputs = n_segments * width;
    const int64_t pieces = (n + rows - 1) / rows;
    const int n_threads = threads_for(ctx, n * width, pieces);
    int64_t first_bad = n;
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(min : first_bad)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t r0 = p * rows, r1 = r0 + rows < n ? r0 + rows : n;
        int64_t bad = r1;
        if (dtype == DC_F32)
            BY_KIND(kind, bad = segment_bins_checked_f32(K, values, width, index, n_segments, r0, r1,
                                                         (dc_rf_state_f32 *)scratch + p * outputs));
        else
            BY_KIND(kind, bad = segment_bins_checked_f64(K, values, width, index, n_segments, r0, r1,
                                                         (dc_rf_state_f64 *)scratch + p * outputs));
        if (bad < r1 && bad < first_bad)
            first_bad = bad;
    }
    if (first_bad < n)
        return first_bad;
    segment_fold(ctx, kind, dtype, pieces, outputs, scratch, y, nz, aux);
    return n;
}

void dc_cpu_segment_reduce_grad(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                int64_t width, const int64_t *index, const void *stored_index, const void *y,
                                const void *nz, const int64_t *aux, const void *gy, void *g)
{
    const int64_t total = n * width, pieces = (total + kGradPiece - 1) / kGradPiece;
    const int n_threads = threads_for(ctx, total, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t e0 = p * kGradPiece, e1 = e0 + kGradPiece < total ? e0 + kGradPiece : total;
        if (!index)
            BY_DTYPE_KIND(dtype, kind, segment_grad_checked, values, width, stored_index, y, nz, aux, gy, g, e0, e1);
        else
            BY_DTYPE_KIND(dtype, kind, dc_rk_segment_grad, values, width, index, y, nz, aux, gy, g, e0, e1);
    }
}

#define DEFINE_WINNERS_CPU(T, SFX)                                                                                     \
    static void add_winners_##SFX(int64_t outer, int64_t inner, int64_t o_stride, const int64_t *aux, const T *gy,     \
                                  T *g)                                                                                \
    {                                                                                                                  \
        for (int64_t o = 0; o < outer; ++o)                                                                            \
            for (int64_t c = 0; c < inner; ++c) {                                                                      \
                const int64_t k = o * inner + c;                                                                       \
                if (aux[k] >= 0)                                                                                       \
                    g[o * o_stride + aux[k] * inner + c] += gy[k];                                                     \
            }                                                                                                          \
    }
DEFINE_WINNERS_CPU(float, f32)
DEFINE_WINNERS_CPU(double, f64)

/* Rows of at most kDenseRow elements have their winners close together: a
 * gradient filled with zeros (streamed past the cache where it is large)
 * and then added to at every winner reads most of its lines back. Such
 * rows are written in one pass instead, each row's zeros and its winner's
 * adjoint (0 + gy, the add's bits). */
enum { kDenseRow = 64 };

#define DEFINE_WINNER_ROWS_CPU(T, SFX)                                                                                 \
    static void winner_rows_##SFX(const dc_ctx *ctx, int64_t rows, int64_t len, const int64_t *aux, const T *gy, T *g) \
    {                                                                                                                  \
        const int n_threads = threads_for(ctx, rows * len, rows);                                                      \
        _Pragma("omp parallel for num_threads(n_threads) schedule(static)") for (int64_t r = 0; r < rows; ++r)         \
        {                                                                                                              \
            T *row = g + r * len;                                                                                      \
            for (int64_t l = 0; l < len; ++l)                                                                          \
                row[l] = (T)0;                                                                                         \
            if (aux[r] >= 0)                                                                                           \
                row[aux[r]] = (T)0 + gy[r];                                                                            \
        }                                                                                                              \
    }
DEFINE_WINNER_ROWS_CPU(float, f32)
DEFINE_WINNER_ROWS_CPU(double, f64)

void dc_cpu_add_winners_grad(dc_dtype dtype, int64_t outer, int64_t inner, int64_t o_stride, const int64_t *aux,
                             const void *gy, void *g)
{
    if (dtype == DC_F32)
        add_winners_f32(outer, inner, o_stride, aux, gy, g);
    else
        add_winners_f64(outer, inner, o_stride, aux, gy, g);
}

void dc_cpu_fill(const dc_ctx *ctx, dc_dtype dtype, void *g, int64_t n, double value)
{
    const bool stream = DC_STREAM_STORES && (size_t)n * dc_dtype_size(dtype) >= DC_STREAM_MIN_BYTES;
    const int64_t pieces = (n + kGradPiece - 1) / kGradPiece;
    const int n_threads = threads_for(ctx, n, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t e0 = p * kGradPiece, e1 = e0 + kGradPiece < n ? e0 + kGradPiece : n;
        if (dtype == DC_F32)
            dc_stream_fill_f32(g, e0, e1, (float)value, stream);
        else
            dc_stream_fill_f64(g, e0, e1, value, stream);
        if (stream) /* each thread orders its streamed stores before the barrier that ends its pieces */
            dc_stream_fence();
    }
}

dc_status dc_cpu_winners_grad(dc_tape *tape, dc_tensor *x, int64_t outer, int64_t inner, int64_t o_stride,
                              const int64_t *aux, const void *gy, bool *done)
{
    *done = false;
    dc_write_mode mode;
    const dc_status st = dc_grad_prepare(tape, x, &mode);
    if (st != DC_OK || !dc_tensor_is_contiguous(x->grad))
        return st;
    if (mode == DC_WRITE_ASSIGN && inner == 1 && o_stride > 0 && o_stride <= kDenseRow &&
        outer * o_stride == x->numel) {
        if (x->dtype == DC_F32)
            winner_rows_f32(tape->ctx, outer, o_stride, aux, gy, x->grad->data);
        else
            winner_rows_f64(tape->ctx, outer, o_stride, aux, gy, x->grad->data);
        dc_grad_done(x);
        *done = true;
        return DC_OK;
    }
    if (mode == DC_WRITE_ASSIGN) /* the zeros and the winners in one pass, not a zero-fill then an add */
        dc_cpu_fill(tape->ctx, x->dtype, x->grad->data, x->numel, 0.0);
    dc_cpu_add_winners_grad(x->dtype, outer, inner, o_stride, aux, gy, x->grad->data);
    dc_grad_done(x);
    *done = true;
    return DC_OK;
}
