/* The reductions' CPU kernels (reduce_cpu.h). Work is split in pieces of a
 * fixed size: an output row and up to kColumns of its columns for the
 * block reductions, up to kColumns columns of every segment for the
 * segment reductions; each output is walked in ascending element order
 * within one piece. Rows longer than kSplit (a whole tensor reduced, a long
 * row) are cut into pieces of kSplit elements whose states are then
 * combined in order. Either way the bits never depend on the thread count. */
#include "reduce_cpu.h"
#include "reduce_kinds.h"

#include <math.h>

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define DC_S float
#define DC_SFX f32
#include "reduce_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "reduce_formulas.h"
#undef DC_S
#undef DC_SFX

/* Columns of one piece: the states of a piece stay in registers or L1. */
enum { kColumns = 64 };

/* Rows (inner 1) longer than this are reduced in pieces of this length. */
enum { kSplit = 16384 };

/* Elements below which one thread does the whole op. */
static const int64_t kSerial = 32768;

static int threads_for(const dc_ctx *ctx, int64_t work, int64_t pieces)
{
    return work > kSerial && pieces > 1 ? ctx->cpu.num_threads : 1;
}

#define DEFINE_REDUCE_CPU(T, SFX)                                                                                      \
    /* output row o, columns c0..c1 of the block */                                                                    \
    static void block_piece_##SFX(int kind, const T *x, int64_t o, int64_t len, int64_t inner, int64_t c0, int64_t c1, \
                                  T *y, T *nz, int64_t *aux)                                                           \
    {                                                                                                                  \
        dc_rf_state_##SFX st[kColumns];                                                                                \
        const int64_t w = c1 - c0;                                                                                     \
        for (int64_t c = 0; c < w; ++c)                                                                                \
            st[c] = dc_rf_init_##SFX(kind);                                                                            \
        const T *row = x + o * len * inner + c0;                                                                       \
        for (int64_t l = 0; l < len; ++l)                                                                              \
            for (int64_t c = 0; c < w; ++c)                                                                            \
                dc_rf_step_##SFX(kind, &st[c], row[l * inner + c], l);                                                 \
        if (kind == DC_RK_LSE) {                                                                                       \
            for (int64_t c = 0; c < w; ++c) {                                                                          \
                const T m = st[c].acc;                                                                                 \
                T sum = 0;                                                                                             \
                for (int64_t l = 0; dc_rf_lse_sums_##SFX(m) && l < len; ++l)                                           \
                    sum += dc_rf_lse_term_##SFX(row[l * inner + c], m);                                                \
                st[c].acc = dc_rf_lse_finish_##SFX(m, sum);                                                            \
            }                                                                                                          \
        }                                                                                                              \
        for (int64_t c = 0; c < w; ++c) {                                                                              \
            const int64_t out = o * inner + c0 + c;                                                                    \
            y[out] = st[c].acc;                                                                                        \
            nz[out] = st[c].nz;                                                                                        \
            aux[out] = st[c].aux;                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    /* elements e0..e1 of the block's gradient */                                                                      \
    static void block_grad_##SFX(int kind, const T *x, int64_t len, int64_t inner, const T *y, const T *nz,            \
                                 const int64_t *aux, const T *gy, T *g, int64_t e0, int64_t e1)                        \
    {                                                                                                                  \
        for (int64_t e = e0; e < e1; ++e) {                                                                            \
            const int64_t o = e / (len * inner), l = e / inner % len;                                                  \
            const int64_t out = o * inner + e % inner;                                                                 \
            g[e] = dc_rf_grad_##SFX(kind, x[e], l, y[out], nz[out], aux[out], gy[out]);                                \
        }                                                                                                              \
    }                                                                                                                  \
    /* columns c0..c1 of every segment, the rows in ascending order */                                                 \
    static void segment_piece_##SFX(int kind, const T *v, int64_t n, int64_t width, const int64_t *index,              \
                                    int64_t n_segments, int64_t c0, int64_t c1, T *y, T *nz, int64_t *aux)             \
    {                                                                                                                  \
        const dc_rf_state_##SFX s0 = dc_rf_init_##SFX(kind);                                                           \
        for (int64_t s = 0; s < n_segments; ++s)                                                                       \
            for (int64_t c = c0; c < c1; ++c) {                                                                        \
                y[s * width + c] = s0.acc;                                                                             \
                nz[s * width + c] = s0.nz;                                                                             \
                aux[s * width + c] = s0.aux;                                                                           \
            }                                                                                                          \
        for (int64_t i = 0; i < n; ++i)                                                                                \
            for (int64_t c = c0; c < c1; ++c) {                                                                        \
                const int64_t out = index[i] * width + c;                                                              \
                dc_rf_state_##SFX st = {y[out], nz[out], aux[out]};                                                    \
                dc_rf_step_##SFX(kind, &st, v[i * width + c], i);                                                      \
                y[out] = st.acc;                                                                                       \
                nz[out] = st.nz;                                                                                       \
                aux[out] = st.aux;                                                                                     \
            }                                                                                                          \
    }                                                                                                                  \
    /* elements e0..e1 of the values' gradient */                                                                      \
    static void segment_grad_##SFX(int kind, const T *v, int64_t width, const int64_t *index, const T *y, const T *nz, \
                                   const int64_t *aux, const T *gy, T *g, int64_t e0, int64_t e1)                      \
    {                                                                                                                  \
        for (int64_t e = e0; e < e1; ++e) {                                                                            \
            const int64_t i = e / width, out = index[i] * width + e % width;                                           \
            g[e] = dc_rf_grad_##SFX(kind, v[e], i, y[out], nz[out], aux[out], gy[out]);                                \
        }                                                                                                              \
    }
DEFINE_REDUCE_CPU(float, f32)
DEFINE_REDUCE_CPU(double, f64)

/* Long rows: piece p (row p / splits, its elements from p % splits * kSplit)
 * into part[p]; pass 0 the state, pass 1 log-sum-exp's sum of terms (the
 * row's maximum in y by then). The rows' results from their parts, in
 * order: pass 0 into y, nz, aux; pass 1 log-sum-exp finished. */
#define DEFINE_SPLIT_CPU(T, SFX)                                                                                       \
    static void split_piece_##SFX(int kind, int pass, const T *x, int64_t len, int64_t splits, int64_t p, const T *y,  \
                                  dc_rf_state_##SFX *part)                                                             \
    {                                                                                                                  \
        const int64_t r = p / splits, l0 = p % splits * kSplit, l1 = l0 + kSplit < len ? l0 + kSplit : len;            \
        const T *row = x + r * len;                                                                                    \
        dc_rf_state_##SFX st = dc_rf_init_##SFX(pass ? DC_RK_SUM : kind);                                              \
        for (int64_t l = l0; l < l1; ++l) {                                                                            \
            if (pass == 0)                                                                                             \
                dc_rf_step_##SFX(kind, &st, row[l], l);                                                                \
            else if (dc_rf_lse_sums_##SFX(y[r]))                                                                       \
                st.acc += dc_rf_lse_term_##SFX(row[l], y[r]);                                                          \
        }                                                                                                              \
        part[p] = st;                                                                                                  \
    }                                                                                                                  \
    static void split_combine_##SFX(int kind, int pass, int64_t r, int64_t splits, const dc_rf_state_##SFX *part,      \
                                    T *y, T *nz, int64_t *aux)                                                         \
    {                                                                                                                  \
        dc_rf_state_##SFX st = part[r * splits];                                                                       \
        for (int64_t k = 1; k < splits; ++k)                                                                           \
            st = dc_rf_combine_##SFX(pass ? DC_RK_SUM : kind, st, part[r * splits + k]);                               \
        if (pass == 0) {                                                                                               \
            y[r] = st.acc;                                                                                             \
            nz[r] = st.nz;                                                                                             \
            aux[r] = st.aux;                                                                                           \
        } else {                                                                                                       \
            y[r] = dc_rf_lse_finish_##SFX(y[r], st.acc);                                                               \
        }                                                                                                              \
    }
DEFINE_SPLIT_CPU(float, f32)
DEFINE_SPLIT_CPU(double, f64)

static int64_t splits_of(int64_t len, int64_t inner)
{
    return inner == 1 && len > kSplit ? (len + kSplit - 1) / kSplit : 1;
}

size_t dc_cpu_reduce_scratch(int64_t outer, int64_t len, int64_t inner)
{
    const int64_t splits = splits_of(len, inner);
    return splits > 1 ? (size_t)(outer * splits) * sizeof(dc_rf_state_f64) : 0;
}

static void reduce_split(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t rows, int64_t len,
                         int64_t splits, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t pieces = rows * splits;
    const int n_threads = threads_for(ctx, rows * len, pieces), row_threads = threads_for(ctx, rows * len, rows);
    for (int pass = 0; pass < (kind == DC_RK_LSE ? 2 : 1); ++pass) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t p = 0; p < pieces; ++p) {
            if (dtype == DC_F32)
                split_piece_f32(kind, pass, x, len, splits, p, y, scratch);
            else
                split_piece_f64(kind, pass, x, len, splits, p, y, scratch);
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

void dc_cpu_reduce_block(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                         int64_t inner, void *y, void *nz, int64_t *aux, void *scratch)
{
    const int64_t splits = splits_of(len, inner);
    if (splits > 1) {
        reduce_split(ctx, kind, dtype, x, outer, len, splits, y, nz, aux, scratch);
        return;
    }
    const int64_t chunks = (inner + kColumns - 1) / kColumns, pieces = outer * chunks;
    const int n_threads = threads_for(ctx, outer * len * inner, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t o = p / chunks, c0 = p % chunks * kColumns;
        const int64_t c1 = c0 + kColumns < inner ? c0 + kColumns : inner;
        if (dtype == DC_F32)
            block_piece_f32(kind, x, o, len, inner, c0, c1, y, nz, aux);
        else
            block_piece_f64(kind, x, o, len, inner, c0, c1, y, nz, aux);
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
        if (dtype == DC_F32)
            block_grad_f32(kind, x, len, inner, y, nz, aux, gy, g, e0, e1);
        else
            block_grad_f64(kind, x, len, inner, y, nz, aux, gy, g, e0, e1);
    }
}

void dc_cpu_segment_reduce(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                           const int64_t *index, int64_t n_segments, void *y, void *nz, int64_t *aux)
{
    const int64_t pieces = (width + kColumns - 1) / kColumns;
    const int n_threads = threads_for(ctx, (n + n_segments) * width, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t c0 = p * kColumns, c1 = c0 + kColumns < width ? c0 + kColumns : width;
        if (dtype == DC_F32)
            segment_piece_f32(kind, values, n, width, index, n_segments, c0, c1, y, nz, aux);
        else
            segment_piece_f64(kind, values, n, width, index, n_segments, c0, c1, y, nz, aux);
    }
}

void dc_cpu_segment_reduce_grad(const dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                int64_t width, const int64_t *index, const void *y, const void *nz, const int64_t *aux,
                                const void *gy, void *g)
{
    const int64_t total = n * width, pieces = (total + kGradPiece - 1) / kGradPiece;
    const int n_threads = threads_for(ctx, total, pieces);
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
        const int64_t e0 = p * kGradPiece, e1 = e0 + kGradPiece < total ? e0 + kGradPiece : total;
        if (dtype == DC_F32)
            segment_grad_f32(kind, values, width, index, y, nz, aux, gy, g, e0, e1);
        else
            segment_grad_f64(kind, values, width, index, y, nz, aux, gy, g, e0, e1);
    }
}
