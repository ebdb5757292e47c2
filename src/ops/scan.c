/* Prefix scans along one axis (dc_op_scan), one node each: the input seen as
 * an [outer, len, inner] block (axes.h), scanned along len. The formulas,
 * forward and adjoint, are scan_formulas.h's, shared with CUDA (scan.cu).
 *
 * On the CPU a piece of work is a group of up to CPU_WIDTH neighbouring
 * lines (columns, or one row where inner is 1) over a chunk of len. Where
 * lines are few and long, each is cut into chunks of CPU_CHUNK elements:
 * every chunk is summarized alone (its total, or the affine map of its
 * adjoint), the summaries of a line are chained in order, and every chunk is
 * scanned again from its carry. The pieces depend on the shape only, so the
 * result has the same bits on any number of threads. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"
#include "../cuda/scan_cuda.h"
#include "../engine/stream_store.h"
#include "axes.h"
#include "backward.h"

#define DC_S float
#define DC_SFX f32
#include "scan_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "scan_formulas.h"
#undef DC_S
#undef DC_SFX

/* CPU_CHUNK: elements of a line per chunk where lines are cut; they are cut
 * where they are longer and fewer than CPU_FEW_GROUPS groups of
 * CPU_CUT_WIDTH lines make them (a rule of the shape alone: the bits
 * depend on it). The chunks of a row are scanned LANES at a time, side by
 * side: at 4096 elements their streams lay 16 KiB apart and shared the same
 * cache sets, at 4080 they do not (a float32 sum's scan of 10^7 on two
 * threads: about 6.8 ms at 4096, 4.5 at 4080). A piece of columns walks up
 * to CPU_WIDTH of them side by side, 2 KiB of float32 a position: at 64 (256
 * bytes) the prefetchers fell behind (a float32 sum's scan over axis 0 of
 * [10000, 1000], two threads: 12.5 ms in groups of 64). */
enum { CPU_CHUNK = 4080, CPU_WIDTH = 512, CPU_CUT_WIDTH = 64, CPU_FEW_GROUPS = 64 };

typedef struct cpu_plan {
    int op;
    bool exclusive;
    int64_t len, inner;
    int64_t width;      /* lines per group: min(inner, CPU_WIDTH) */
    int64_t col_groups; /* groups per index of outer */
    int64_t groups;
    int64_t chunk, chunks; /* per line */
    /* a product's per piece: whether the piece's x and y are all finite and
     * not zero; written by a recorded forward, read by the adjoint (NULL:
     * every piece takes the general path) */
    unsigned char *factors_ok;
    /* whether the output (the forward's: a sum's only, see dc_op_scan) or
     * a gradient the adjoint assigns goes out in streaming stores where
     * tiles take it (scan_tiles.h; outputs and gradients written in place
     * past stream_store.h's threshold) */
    bool stream;
} cpu_plan;

/* The plan of a scan on `threads` threads: groups as wide as CPU_WIDTH,
 * narrowed (not below CPU_CUT_WIDTH) while a thread would have no piece.
 * Lines are scanned alone in any group, so the bits do not depend on it;
 * the adjoint's plan is the forward's (same context, same threads), whose
 * pieces it reads (factors_ok). */
static cpu_plan plan_cpu(int op, bool exclusive, const dc_axes *ax, int threads)
{
    cpu_plan p;
    p.op = op;
    p.exclusive = exclusive;
    p.len = ax->len;
    p.inner = ax->inner;
    const int64_t cut_groups = ax->outer * ((ax->inner + CPU_CUT_WIDTH - 1) / CPU_CUT_WIDTH);
    p.chunks = ax->len == 0                                         ? 0
               : ax->len > CPU_CHUNK && cut_groups < CPU_FEW_GROUPS ? (ax->len + CPU_CHUNK - 1) / CPU_CHUNK
                                                                    : 1;
    p.chunk = p.chunks > 1 ? CPU_CHUNK : ax->len;
    p.width = ax->inner < CPU_WIDTH ? ax->inner : CPU_WIDTH;
    while (p.width / 2 >= CPU_CUT_WIDTH && ax->outer * ((ax->inner + p.width - 1) / p.width) * p.chunks < threads)
        p.width /= 2;
    p.col_groups = p.width ? (ax->inner + p.width - 1) / p.width : 0;
    p.groups = ax->outer * p.col_groups;
    p.factors_ok = NULL;
    p.stream = false;
    return p;
}

/* Where piece p (group and chunk) lies: the offset of its first line, its
 * lines and its positions [b, e). */
typedef struct cpu_piece {
    int64_t offset, lines, b, e;
} cpu_piece;

static cpu_piece piece_of(const cpu_plan *p, int64_t k)
{
    const int64_t g = k / p->chunks, c = k % p->chunks;
    const int64_t o = g / p->col_groups, j0 = (g % p->col_groups) * p->width;
    cpu_piece q;
    q.offset = o * p->len * p->inner + j0;
    q.lines = p->inner - j0 < p->width ? p->inner - j0 : p->width;
    q.b = c * p->chunk;
    q.e = q.b + p->chunk < p->len ? q.b + p->chunk : p->len;
    return q;
}

/* APPLY_ADD: APPLY adding to the input's gradient (the adjoint only). */
enum { SUMMARIZE, APPLY, APPLY_ADD };

/* The adjoint's variants of a piece besides the ops (dc_reduction): a
 * product's whose factors are all finite and not zero (dc_scan_mul_nonzero),
 * and a maximum's or minimum's where nothing takes over (dc_scan_run_quiet):
 * summarized as the sum's, its input's adjoint all zero. */
enum { PROD_NONZERO = DC_REDUCE_MIN + 1, QUIET };

/* LANES: pieces of single lines (inner 1) scanned side by side by one
 * thread, so that their independent recurrences overlap instead of each
 * waiting on the latency of its own. Each piece is computed exactly as alone:
 * the bits do not depend on it. Rows shorter than SHORT_ROW go SHORT_LANES
 * side by side: a batch of eight rows of four spent most of its time
 * finding its pieces (a float32 sum's scan over axis 1 of [2500000, 4], two
 * threads: 13.6 ms in batches of eight). */
enum { LANES = 8, SHORT_LANES = 64, SHORT_ROW = 16 };
_Static_assert((int)SHORT_LANES <= (int)CPU_WIDTH, "a piece's carries hold the lanes' too");

#include "scan_tiles.h"

/* Whether lanes of T go through scan_tiles.h: float32, nl LANES side by
 * side (es 1). */
#define TILED(T, nl, es) (DC_SCAN_TILES && sizeof(T) == sizeof(float) && (nl) == LANES && (es) == 1)

/* One step of the adjoint's recurrence at a position of terms t: SUMMARIZE
 * composes the position into the map acc of the positions after it; APPLY
 * (and APPLY_ADD) carries the adjoint acc->c and returns the input's
 * adjoint. */
DC_INLINE double adjoint_step(int mode, dc_scan_terms t, dc_scan_affine *acc)
{
    if (mode == SUMMARIZE) {
        const dc_scan_affine here = {t.c, t.k};
        *acc = dc_scan_affine_then(*acc, here);
        return 0.0;
    }
    acc->c = t.c + dc_scan_mul(t.k, acc->c);
    return dc_scan_mul(t.s, acc->c);
}

/* The kernels, written once per dtype, and inlined into one loop per op,
 * mode and direction, so that none of these is tested inside the loop.
 * They run over nl lines of n positions: position i of line l at element
 * l * ls + i * es (columns: ls 1, es inner; side-by-side lanes of a row: ls
 * the distance of the pieces, es 1). */
/* The lanes' loop is left to the compiler: forcing it unrolled (with
 * `#pragma GCC unroll`) made no measured difference to the scans at 10^6 and
 * 10^7 elements, and made this file 16 times larger and its compilation 10
 * times longer. */

/* Stores v, an element of the input's adjoint, at dst: assigned (APPLY) or
 * added in T (APPLY_ADD), the bits of a temporary added afterwards. */
#define STORE_ADJOINT(T, mode, dst, v) ((dst) = (mode) == APPLY_ADD ? (T)((dst) + (T)(v)) : (T)(v))

/* A sum's summaries, a piece's total and its adjoint's total of the output's
 * adjoint, add the piece's elements in an order of their own: any order
 * fixed by the piece's length keeps the bits a function of the shape alone.
 * sum_runs keeps SUM_WAYS running sums per line, element i going into sum
 * i % SUM_WAYS, which then add pairwise; the compiler makes the running sums
 * vector lanes, the same operations in the same order, so the same bits
 * whether it does or not. No chain of dependent adds per element and no
 * transposes, as a lane's steps have. Up to LANES lines are read side by
 * side, as many streams as the lanes' tiles read: one line after another
 * took longer (the forward's summaries of a float32 sum's scan of 10^7 on
 * two threads: 1.34-1.39 ms, against 0.95-0.98 side by side). */
enum { SUM_WAYS = 16 };

#define DEFINE_SUM_RUNS(T, SFX)                                                                                        \
    /* sums[l] += the sum in double of v[l ls .. l ls + n), lines l < nl */                                            \
    static void sum_runs_##SFX(const T *v, int nl, int64_t ls, int64_t n, double *sums)                                \
    {                                                                                                                  \
        for (int l0 = 0; l0 < nl; l0 += LANES) {                                                                       \
            const int m = nl - l0 < LANES ? nl - l0 : LANES;                                                           \
            const T *w = v + l0 * ls;                                                                                  \
            double s[LANES][SUM_WAYS] = {{0}};                                                                         \
            int64_t i = 0;                                                                                             \
            for (; i + SUM_WAYS <= n; i += SUM_WAYS)                                                                   \
                for (int l = 0; l < m; ++l)                                                                            \
                    for (int j = 0; j < SUM_WAYS; ++j)                                                                 \
                        s[l][j] += (double)w[l * ls + i + j];                                                          \
            for (int l = 0; l < m; ++l) {                                                                              \
                for (int j = 0; i + j < n; ++j)                                                                        \
                    s[l][j] += (double)w[l * ls + i + j];                                                              \
                for (int half = SUM_WAYS / 2; half > 0; half /= 2)                                                     \
                    for (int j = 0; j < half; ++j)                                                                     \
                        s[l][j] += s[l][j + half];                                                                     \
                sums[l0 + l] += s[l][0];                                                                               \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_SUM_RUNS(float, f32)
DEFINE_SUM_RUNS(double, f64)

/* A factor's magnitude's bits less one, unsigned: a zero wraps round to the
 * top, infinities and NaN lie at factor_bits(INFINITY) and above, every
 * finite number but zero below. The greatest over a run tells whether all
 * its factors are finite and not zero (dc_scan_prod_factor_ok), in a loop
 * the compiler vectorizes into integer maxima, three operations a vector.
 * Tested as two compares of floating-point numbers, the check took 4.0% of
 * the samples of a float32 product's scan of 10^7 (primal and gradient,
 * perf on a 2-core Xeon), this way 2.9%. */
typedef uint32_t factor_bits_t_f32;
typedef uint64_t factor_bits_t_f64;
static inline uint32_t factor_bits_f32(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x7fffffffu) - 1u;
}
static inline uint64_t factor_bits_f64(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x7fffffffffffffffu) - 1u;
}

#define DEFINE_CPU_KERNELS(T, SFX)                                                                                     \
    /* acc: the lines' carries (SUMMARIZE: totals from the neutral element) */                                         \
    DC_INLINE void forward_lines_##SFX(int op, bool exclusive, int mode, int nl, const T *x, T *y, int64_t n,          \
                                       int64_t es, int64_t ls, bool stream, double *acc)                               \
    {                                                                                                                  \
        if (mode == SUMMARIZE && op == DC_REDUCE_SUM && es == 1) {                                                     \
            sum_runs_##SFX(x, nl, ls, n, acc);                                                                         \
            return;                                                                                                    \
        }                                                                                                              \
        int64_t i = 0;                                                                                                 \
        if (TILED(T, nl, es) && (op == DC_REDUCE_SUM || op == DC_REDUCE_PROD))                                         \
            i = tiles_forward_f32(op == DC_REDUCE_PROD, exclusive, mode, (const float *)x, (float *)y, n, ls, stream,  \
                                  acc);                                                                                \
        for (; i < n; ++i) {                                                                                           \
            for (int l = 0; l < nl; ++l) {                                                                             \
                const int64_t at = l * ls + i * es;                                                                    \
                const double v = (double)x[at];                                                                        \
                if (mode == APPLY && exclusive)                                                                        \
                    y[at] = (T)acc[l];                                                                                 \
                acc[l] = dc_scan_combine(op, acc[l], v);                                                               \
                if (mode == APPLY && !exclusive)                                                                       \
                    y[at] = (T)acc[l];                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static void forward_run_##SFX(int op, bool exclusive, int mode, int nl, const T *x, T *y, int64_t n, int64_t es,   \
                                  int64_t ls, bool stream, double *acc){                                               \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wswitch\"")                                  \
            FOR_EACH_SCAN_VARIANT(forward_lines_##SFX, x, y, n, es, ls, stream, acc) _Pragma("GCC diagnostic pop")}    \
    /* Positions hi - 1 down to lo of a piece (1 <= lo, hi <= n - 1), one at a                                         \
     * time, of a sum or a nonzero product (PROD_NONZERO), whose carry (and                                            \
     * summary) run raw (see adjoint_lines), in arrays of their own, c and m,                                          \
     * by line: a loop over lines side by side in memory (columns) reads and                                           \
     * writes them as vectors, where dc_scan_affine's c and m interleave.                                              \
     * x, y, g, gx at the piece's first position. */                                                                   \
    DC_INLINE void raw_steps_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y, const T *g,       \
                                   T *gx, int64_t hi, int64_t lo, int64_t es, int64_t ls, double *c, double *m)        \
    {                                                                                                                  \
        for (int64_t i = hi; i-- > lo;) {                                                                              \
            for (int l = 0; l < nl; ++l) {                                                                             \
                const int64_t at = l * ls + i * es;                                                                    \
                const double t = (double)g[exclusive ? at + es : at];                                                  \
                if (op == DC_REDUCE_SUM) {                                                                             \
                    /* k = s = 1: dc_scan_mul(1, v) is v + 0.0; the carry                                              \
                     * runs raw, one add on its path */                                                                \
                    c[l] = t + c[l];                                                                                   \
                    if (mode != SUMMARIZE)                                                                             \
                        STORE_ADJOINT(T, mode, gx[at], c[l] + 0.0);                                                    \
                    continue;                                                                                          \
                }                                                                                                      \
                /* the products', without the zero-safe tests; the carry (and                                          \
                 * m) raw, a multiply and an add on its path */                                                        \
                c[l] = t + (double)x[at + es] * c[l];                                                                  \
                if (mode == SUMMARIZE)                                                                                 \
                    m[l] = (double)x[at + es] * m[l];                                                                  \
                else                                                                                                   \
                    STORE_ADJOINT(T, mode, gx[at], dc_scan_mul_nonzero((double)y[exclusive ? at : at - es], c[l]));    \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* The same for the other ops and variants, through the terms of                                                   \
     * scan_formulas.h without the cases of a line's ends, which the caller                                            \
     * steps through with dc_scan_terms. */                                                                            \
    DC_INLINE void adjoint_steps_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y, const T *g,   \
                                       T *gx, int64_t hi, int64_t lo, int64_t es, int64_t ls, dc_scan_affine *acc)     \
    {                                                                                                                  \
        for (int64_t i = hi; i-- > lo;) {                                                                              \
            for (int l = 0; l < nl; ++l) {                                                                             \
                const int64_t at = l * ls + i * es;                                                                    \
                dc_scan_terms t;                                                                                       \
                t.c = (double)g[exclusive ? at + es : at];                                                             \
                if (op == DC_REDUCE_PROD) {                                                                            \
                    t.k = (double)x[at + es];                                                                          \
                    t.s = (double)y[exclusive ? at : at - es];                                                         \
                } else {                                                                                               \
                    /* k, s: 0 or 1; dc_scan_mul(1, v) is v + 0.0 */                                                   \
                    const double here = (double)y[exclusive ? at + es : at];                                           \
                    const double before = (double)y[exclusive ? at : at - es];                                         \
                    const bool next_wins = dc_scan_takes_over(op, here, (double)x[at + es]);                           \
                    const bool wins = dc_scan_takes_over(op, before, (double)x[at]);                                   \
                    if (mode == SUMMARIZE) {                                                                           \
                        acc[l].c = t.c + (next_wins ? 0.0 : acc[l].c + 0.0);                                           \
                        acc[l].m = next_wins ? 0.0 : acc[l].m + 0.0;                                                   \
                    } else {                                                                                           \
                        acc[l].c = t.c + (next_wins ? 0.0 : acc[l].c + 0.0);                                           \
                        STORE_ADJOINT(T, mode, gx[at], wins ? acc[l].c + 0.0 : 0.0);                                   \
                    }                                                                                                  \
                    continue;                                                                                          \
                }                                                                                                      \
                const double v = adjoint_step(mode, t, &acc[l]);                                                       \
                if (mode != SUMMARIZE)                                                                                 \
                    STORE_ADJOINT(T, mode, gx[at], v);                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* Positions 1 .. n - 2 of a piece of n positions, the last first. Where                                           \
     * tiles take them, the positions above the first whose tile stores (or,                                           \
     * summarizing, loads) 32 aligned bytes (64 where they stream, whole                                               \
     * lines) are stepped alone first: tiles walked down from n - 1 straddled                                          \
     * two cache lines in every other load and store. A sum's summary of side                                          \
     * by side lanes (es 1) is no recurrence: sum_runs adds the positions'                                             \
     * terms to the carry instead. */                                                                                  \
    DC_INLINE void adjoint_lines_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y, const T *g,   \
                                       T *gx, int64_t n, int64_t es, int64_t ls, bool stream, dc_scan_affine *acc)     \
    {                                                                                                                  \
        if (op != DC_REDUCE_SUM && op != PROD_NONZERO) {                                                               \
            adjoint_steps_##SFX(op, exclusive, mode, nl, x, y, g, gx, n - 1, 1, es, ls, acc);                          \
            return;                                                                                                    \
        }                                                                                                              \
        double c[CPU_WIDTH], m[CPU_WIDTH];                                                                             \
        for (int l = 0; l < nl; ++l) {                                                                                 \
            c[l] = acc[l].c;                                                                                           \
            m[l] = acc[l].m;                                                                                           \
        }                                                                                                              \
        int64_t top = n - 1;                                                                                           \
        if (mode == SUMMARIZE && op == DC_REDUCE_SUM && es == 1 && n > 2) {                                            \
            sum_runs_##SFX(g + (exclusive ? 2 : 1), nl, ls, n - 2, c);                                                 \
            top = 1;                                                                                                   \
        } else if (TILED(T, nl, es) && n > 2) {                                                                        \
            const T *edge = mode == SUMMARIZE ? g + (exclusive ? 1 : 0) : gx;                                          \
            const uintptr_t line = stream && mode == APPLY ? 64 : 32;                                                  \
            /* a product's tiles find the products before each position                                                \
             * tile by tile (tiles_adjoint_f32): their tiles lie where the                                             \
             * piece's positions put them, whatever gx's address, so that                                              \
             * the bits depend on the shape alone (the same lines where the                                            \
             * piece starts on one) */                                                                                 \
            const int64_t above = op == PROD_NONZERO && mode != SUMMARIZE                                              \
                                      ? top % (int64_t)(64 / sizeof(T))                                                \
                                      : (int64_t)(((uintptr_t)(edge + top) % line) / sizeof(T));                       \
            const int64_t aligned = top - above > 1 ? top - above : 1;                                                 \
            raw_steps_##SFX(op, exclusive, mode, nl, x, y, g, gx, top, aligned, es, ls, c, m);                         \
            top = tiles_adjoint_f32(op == PROD_NONZERO, exclusive, mode, (const float *)x, (const float *)y,           \
                                    (const float *)g, (float *)gx, aligned, ls, stream, c, m);                         \
        }                                                                                                              \
        raw_steps_##SFX(op, exclusive, mode, nl, x, y, g, gx, top, 1, es, ls, c, m);                                   \
        /* The carry c and summary m ran raw: c' = t + k c where the terms say                                         \
         * t + (k c + 0.0) (dc_scan_mul_nonzero; k 1 for the sum), and m' = k m                                        \
         * where they say k m + 0.0. After a step the two differ only where                                            \
         * the raw one is -0 and the other +0 (by induction: k times either                                            \
         * differs at most in a zero's sign, and adding t, then 0.0, maps both                                         \
         * to one value), so the raw one plus 0.0 is the other, bit for bit: so                                        \
         * are the stores above, and the carry and summary leaving the run.                                            \
         * sum_runs' total is never -0 (its sums start at +0, and adding to +0                                         \
         * never gives -0), nor is the carry it leaves: plus 0.0 changes                                               \
         * neither. */                                                                                                 \
        for (int l = 0; l < nl; ++l) {                                                                                 \
            acc[l].c = n > 2 ? c[l] + 0.0 : c[l];                                                                      \
            acc[l].m = n > 2 ? m[l] + 0.0 : m[l];                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    static void adjoint_run_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y, const T *g, T *gx, \
                                  int64_t n, int64_t es, int64_t ls, bool stream, dc_scan_affine *acc)                 \
    {                                                                                                                  \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wswitch\"")                                  \
            FOR_EACH_ADJOINT_VARIANT(adjoint_lines_##SFX, x, y, g, gx, n, es, ls, stream, acc)                         \
                _Pragma("GCC diagnostic pop")                                                                          \
    }                                                                                                                  \
    /* One position i of a piece's lines through the general terms (a line's                                           \
     * first and last positions included); x, y, g, gx at the lines' starts */                                         \
    static void adjoint_edge_##SFX(const cpu_plan *p, int mode, int64_t lines, const T *x, const T *y, const T *g,     \
                                   T *gx, int64_t i, int64_t ls, dc_scan_affine *acc)                                  \
    {                                                                                                                  \
        for (int64_t l = 0; l < lines; ++l) {                                                                          \
            const int64_t at = l * ls;                                                                                 \
            const dc_scan_terms t =                                                                                    \
                dc_scan_terms_##SFX(p->op, p->exclusive, x + at, y + at, g + at, i, p->len, p->inner);                 \
            const double v = adjoint_step(mode, t, &acc[l]);                                                           \
            if (mode != SUMMARIZE)                                                                                     \
                STORE_ADJOINT(T, mode, gx[at + i * p->inner], v);                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    /* Position i of nl short rows (whole rows, ls apart) through the general                                          \
     * terms, the rows' carries in c: adjoint_step's APPLY (and APPLY_ADD),                                            \
     * first and last constant where this is inlined, so that their tests                                              \
     * fold away. The lanes' loop is vectorized (omp simd: each lane's steps                                           \
     * alone, the same operations) with strided loads; left to itself, gcc 12                                          \
     * kept it scalar, its branches mispredicted on random data. A maximum's                                           \
     * or minimum's k and s are 0 or 1, and dc_scan_mul(1, v) is v + 0.0: the                                          \
     * same values without dc_scan_mul's zero tests, whose mix with the terms'                                         \
     * tests kept gcc 12 from vectorizing even so */                                                                   \
    DC_INLINE void short_rows_at_##SFX(int op, bool exclusive, int mode, bool first, bool last, int nl, const T *x,    \
                                       const T *y, const T *g, T *gx, int64_t i, int64_t ls, double *c)                \
    {                                                                                                                  \
        _Pragma("omp simd") for (int l = 0; l < nl; ++l)                                                               \
        {                                                                                                              \
            const int64_t at = l * ls;                                                                                 \
            const dc_scan_terms t = dc_scan_terms_at_##SFX(op, exclusive, first, last, x + at, y + at, g + at, i, 1);  \
            if (op == DC_REDUCE_MAX || op == DC_REDUCE_MIN) {                                                          \
                c[l] = t.c + (t.k != 0.0 ? c[l] + 0.0 : 0.0);                                                          \
                STORE_ADJOINT(T, mode, gx[at + i], t.s != 0.0 ? c[l] + 0.0 : 0.0);                                     \
            } else {                                                                                                   \
                c[l] = t.c + dc_scan_mul(t.k, c[l]);                                                                   \
                STORE_ADJOINT(T, mode, gx[at + i], dc_scan_mul(t.s, c[l]));                                            \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* The adjoint of nl short rows of len positions, ls apart, from the                                               \
     * last position down: the terms and steps of the other paths, the same                                            \
     * bits */                                                                                                         \
    DC_INLINE void short_rows_lines_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y,            \
                                          const T *g, T *gx, int64_t len, int64_t ls)                                  \
    {                                                                                                                  \
        double c[SHORT_LANES];                                                                                         \
        for (int l = 0; l < nl; ++l)                                                                                   \
            c[l] = dc_scan_affine_identity().c;                                                                        \
        if (len == 1) {                                                                                                \
            short_rows_at_##SFX(op, exclusive, mode, true, true, nl, x, y, g, gx, 0, ls, c);                           \
            return;                                                                                                    \
        }                                                                                                              \
        short_rows_at_##SFX(op, exclusive, mode, false, true, nl, x, y, g, gx, len - 1, ls, c);                        \
        for (int64_t i = len - 2; i > 0; --i)                                                                          \
            short_rows_at_##SFX(op, exclusive, mode, false, false, nl, x, y, g, gx, i, ls, c);                         \
        short_rows_at_##SFX(op, exclusive, mode, true, false, nl, x, y, g, gx, 0, ls, c);                              \
    }                                                                                                                  \
    static void short_rows_run_##SFX(int op, bool exclusive, int mode, int nl, const T *x, const T *y, const T *g,     \
                                     T *gx, int64_t len, int64_t ls)                                                   \
    {                                                                                                                  \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wswitch\"")                                  \
            FOR_EACH_SHORT_ROWS_VARIANT(short_rows_lines_##SFX, x, y, g, gx, len, ls) _Pragma("GCC diagnostic pop")    \
    }                                                                                                                  \
    /* Whether the n elements of v at stride es are all finite and not zero                                            \
     * (dc_scan_prod_factor_ok: the same test, exact in either type), one                                              \
     * test over the whole run (factor_bits) */                                                                        \
    static bool factors_ok_##SFX(const T *v, int64_t n, int64_t es)                                                    \
    {                                                                                                                  \
        factor_bits_t_##SFX worst = 0;                                                                                 \
        if (es == 1)                                                                                                   \
            for (int64_t i = 0; i < n; ++i) {                                                                          \
                const factor_bits_t_##SFX b = factor_bits_##SFX(v[i]);                                                 \
                worst = b > worst ? b : worst;                                                                         \
            }                                                                                                          \
        else                                                                                                           \
            for (int64_t i = 0; i < n; ++i) {                                                                          \
                const factor_bits_t_##SFX b = factor_bits_##SFX(v[i * es]);                                            \
                worst = b > worst ? b : worst;                                                                         \
            }                                                                                                          \
        return worst < factor_bits_##SFX((T)INFINITY);                                                                 \
    }                                                                                                                  \
    /* factors_ok over a piece's n positions of `lines` neighbouring lines                                             \
     * (a position's elements contiguous), position after position as they                                             \
     * lie: a line after line walk reads each cache line once per line */                                              \
    static bool block_factors_ok_##SFX(const T *v, int64_t n, int64_t lines, int64_t inner)                            \
    {                                                                                                                  \
        if (lines == 1)                                                                                                \
            return factors_ok_##SFX(v, n, inner);                                                                      \
        bool ok = true;                                                                                                \
        for (int64_t i = 0; ok && i < n; ++i)                                                                          \
            ok = factors_ok_##SFX(v + i * inner, lines, 1);                                                            \
        return ok;                                                                                                     \
    }                                                                                                                  \
    /* Whether nothing takes over in positions [b, e) of nl lines of a                                                 \
     * maximum or minimum (b > 0); x, y at the lines' starts */                                                        \
    static bool run_quiet_##SFX(const cpu_plan *p, const T *x, const T *y, int64_t nl, int64_t b, int64_t e,           \
                                int64_t es, int64_t ls)                                                                \
    {                                                                                                                  \
        bool quiet = b > 0;                                                                                            \
        for (int64_t l = 0; quiet && l < nl; ++l) {                                                                    \
            const double first = dc_scan_inclusive_at_##SFX(p->op, p->exclusive, x + l * ls, y + l * ls, b - 1, es);   \
            const double last = dc_scan_inclusive_at_##SFX(p->op, p->exclusive, x + l * ls, y + l * ls, e - 1, es);    \
            quiet = dc_scan_run_quiet(p->op, first, last);                                                             \
        }                                                                                                              \
        return quiet;                                                                                                  \
    }                                                                                                                  \
    /* The variant of the adjoint for positions [b, e) of nl lines, piece k:                                           \
     * p's op, PROD_NONZERO (the piece's x and y all finite and not zero, as                                           \
     * its recorded forward found: the variant's loop reads no factor beyond                                           \
     * the piece, whose first and last positions take the general terms) or                                            \
     * QUIET. The variants give the same bits: the tests choose the fastest                                            \
     * that applies */                                                                                                 \
    static int adjoint_variant_##SFX(const cpu_plan *p, int64_t k, const T *x, const T *y, int64_t nl, int64_t b,      \
                                     int64_t e, int64_t es, int64_t ls)                                                \
    {                                                                                                                  \
        if (p->op == DC_REDUCE_PROD && p->factors_ok && p->factors_ok[k])                                              \
            return PROD_NONZERO;                                                                                       \
        if ((p->op == DC_REDUCE_MAX || p->op == DC_REDUCE_MIN) && run_quiet_##SFX(p, x, y, nl, b, e, es, ls))          \
            return QUIET;                                                                                              \
        return p->op;                                                                                                  \
    }                                                                                                                  \
    /* A QUIET run's input adjoint, positions [b, e) of nl lines: zero */                                              \
    static void store_zeros_##SFX(int mode, T *gx, int64_t nl, int64_t b, int64_t e, int64_t es, int64_t ls)           \
    {                                                                                                                  \
        for (int64_t l = 0; l < nl; ++l)                                                                               \
            for (int64_t i = b; i < e; ++i)                                                                            \
                STORE_ADJOINT(T, mode, gx[l * ls + i * es], 0.0);                                                      \
    }

/* Calls KERNEL(op, exclusive, mode, nl, ...) with all four constant (nl
 * LANES, or any count), from the variables op, exclusive, mode and nl. */
#define SCAN_VARIANT_MODES(KERNEL, OP, NL, ...)                                                                        \
    if (mode == SUMMARIZE && exclusive)                                                                                \
        KERNEL(OP, true, SUMMARIZE, NL, __VA_ARGS__);                                                                  \
    else if (mode == SUMMARIZE)                                                                                        \
        KERNEL(OP, false, SUMMARIZE, NL, __VA_ARGS__);                                                                 \
    else if (exclusive)                                                                                                \
        KERNEL(OP, true, APPLY, NL, __VA_ARGS__);                                                                      \
    else                                                                                                               \
        KERNEL(OP, false, APPLY, NL, __VA_ARGS__);
#define ADJOINT_VARIANT_MODES(KERNEL, OP, NL, ...)                                                                     \
    if (mode == APPLY_ADD && exclusive)                                                                                \
        KERNEL(OP, true, APPLY_ADD, NL, __VA_ARGS__);                                                                  \
    else if (mode == APPLY_ADD)                                                                                        \
        KERNEL(OP, false, APPLY_ADD, NL, __VA_ARGS__);                                                                 \
    else                                                                                                               \
        SCAN_VARIANT_MODES(KERNEL, OP, NL, __VA_ARGS__)
#define SCAN_VARIANT_OP(KERNEL, MODES, OP, ...)                                                                        \
    case OP:                                                                                                           \
        if (nl == LANES) {                                                                                             \
            MODES(KERNEL, OP, LANES, __VA_ARGS__)                                                                      \
        } else {                                                                                                       \
            MODES(KERNEL, OP, nl, __VA_ARGS__)                                                                         \
        }                                                                                                              \
        break;
#define FOR_EACH_SCAN_VARIANT(KERNEL, ...)                                                                             \
    switch (op) {                                                                                                      \
        SCAN_VARIANT_OP(KERNEL, SCAN_VARIANT_MODES, DC_REDUCE_SUM, __VA_ARGS__)                                        \
        SCAN_VARIANT_OP(KERNEL, SCAN_VARIANT_MODES, DC_REDUCE_PROD, __VA_ARGS__)                                       \
        SCAN_VARIANT_OP(KERNEL, SCAN_VARIANT_MODES, DC_REDUCE_MAX, __VA_ARGS__)                                        \
        SCAN_VARIANT_OP(KERNEL, SCAN_VARIANT_MODES, DC_REDUCE_MIN, __VA_ARGS__)                                        \
    }
/* The adjoint's: APPLY_ADD too, and PROD_NONZERO (QUIET runs as the sum). */
#define FOR_EACH_ADJOINT_VARIANT(KERNEL, ...)                                                                          \
    switch (op) {                                                                                                      \
        SCAN_VARIANT_OP(KERNEL, ADJOINT_VARIANT_MODES, DC_REDUCE_SUM, __VA_ARGS__)                                     \
        SCAN_VARIANT_OP(KERNEL, ADJOINT_VARIANT_MODES, DC_REDUCE_PROD, __VA_ARGS__)                                    \
        SCAN_VARIANT_OP(KERNEL, ADJOINT_VARIANT_MODES, PROD_NONZERO, __VA_ARGS__)                                      \
        SCAN_VARIANT_OP(KERNEL, ADJOINT_VARIANT_MODES, DC_REDUCE_MAX, __VA_ARGS__)                                     \
        SCAN_VARIANT_OP(KERNEL, ADJOINT_VARIANT_MODES, DC_REDUCE_MIN, __VA_ARGS__)                                     \
    }

/* The short rows' adjoint: each op, both directions, APPLY and APPLY_ADD
 * (whole rows are never summarized). */
#define SHORT_ROWS_OP(KERNEL, OP, ...)                                                                                 \
    case OP:                                                                                                           \
        if (mode == APPLY_ADD && exclusive)                                                                            \
            KERNEL(OP, true, APPLY_ADD, nl, __VA_ARGS__);                                                              \
        else if (mode == APPLY_ADD)                                                                                    \
            KERNEL(OP, false, APPLY_ADD, nl, __VA_ARGS__);                                                             \
        else if (exclusive)                                                                                            \
            KERNEL(OP, true, APPLY, nl, __VA_ARGS__);                                                                  \
        else                                                                                                           \
            KERNEL(OP, false, APPLY, nl, __VA_ARGS__);                                                                 \
        break;
#define FOR_EACH_SHORT_ROWS_VARIANT(KERNEL, ...)                                                                       \
    switch (op) {                                                                                                      \
        SHORT_ROWS_OP(KERNEL, DC_REDUCE_SUM, __VA_ARGS__)                                                              \
        SHORT_ROWS_OP(KERNEL, DC_REDUCE_PROD, __VA_ARGS__)                                                             \
        SHORT_ROWS_OP(KERNEL, DC_REDUCE_MAX, __VA_ARGS__)                                                              \
        SHORT_ROWS_OP(KERNEL, DC_REDUCE_MIN, __VA_ARGS__)                                                              \
    }

DEFINE_CPU_KERNELS(float, f32)
DEFINE_CPU_KERNELS(double, f64)

/* Whether p's pieces are short whole rows (inner 1): shorter than SHORT_ROW,
 * or for a maximum or minimum up to SHORT_MAX_ROW. They go SHORT_LANES at a
 * time, their adjoint through short_rows_run, every position through the
 * general terms, which take every variant's place (adjoint_variant's give
 * the same bits): a recorded product does not test its factors for them.
 * The walk of the other rows, LANES at a time, was faster beyond (float32
 * on two threads of a 2-core AMD EPYC, 10^7 elements, forward and adjoint in
 * ms, this walk against the other: maxima in rows of 16: 23.3 against 43.7,
 * 32: 26.9 / 32.6, 48: 30.2 / 29.0, 256: 54.5 / 23.6; sums in rows of 32:
 * 13.9 / 8.0; products in rows of 16: 15.6 / 11.8). */
enum { SHORT_MAX_ROW = 32 };
static bool short_rows(const cpu_plan *p)
{
    const bool extremum = p->op == DC_REDUCE_MAX || p->op == DC_REDUCE_MIN;
    return p->inner == 1 && p->chunks == 1 && (p->len < SHORT_ROW || (extremum && p->len <= SHORT_MAX_ROW));
}

/* Whether pieces k0 .. k0 + nl - 1 can be the lanes of one kernel call:
 * pieces of rows (inner 1), of the same length, evenly spaced (chunks of one
 * row, or whole rows); their distance in *ls. */
static bool as_lanes(const cpu_plan *p, int64_t k0, int nl, int64_t *ls)
{
    if (p->inner != 1 || nl < 2)
        return false;
    if (p->chunks == 1) { /* whole rows */
        *ls = p->len;
        return true;
    }
    const cpu_piece first = piece_of(p, k0);
    const int64_t start = first.offset + first.b;
    const cpu_piece second = piece_of(p, k0 + 1);
    *ls = second.offset + second.b - start;
    for (int l = 0; l < nl; ++l) {
        const cpu_piece q = piece_of(p, k0 + l);
        if (q.e - q.b != first.e - first.b || q.offset + q.b != start + l * *ls)
            return false;
    }
    return true;
}

#define DEFINE_CPU_SCAN(T, SFX)                                                                                        \
    /* SUMMARIZE: the totals of pieces k0 .. k0 + nl - 1 into sums; APPLY:                                             \
     * their outputs, from the carries in sums (the neutral element where                                              \
     * lines are not cut) */                                                                                           \
    static void forward_pieces_##SFX(const cpu_plan *p, int64_t k0, int nl, const T *x, T *y, double *sums, int mode)  \
    {                                                                                                                  \
        int64_t ls;                                                                                                    \
        double acc[CPU_WIDTH];                                                                                         \
        if (nl > 1 && as_lanes(p, k0, nl, &ls)) {                                                                      \
            const cpu_piece q = piece_of(p, k0);                                                                       \
            for (int l = 0; l < nl; ++l)                                                                               \
                acc[l] = mode == APPLY && sums ? sums[k0 + l] : dc_scan_neutral(p->op);                                \
            const int64_t at = q.offset + q.b;                                                                         \
            forward_run_##SFX(p->op, p->exclusive, mode, nl, x + at, y + at, q.e - q.b, 1, ls, p->stream, acc);        \
            for (int l = 0; mode == SUMMARIZE && l < nl; ++l)                                                          \
                sums[k0 + l] = acc[l];                                                                                 \
            for (int l = 0; mode == APPLY && p->factors_ok && l < nl; ++l)                                             \
                p->factors_ok[k0 + l] = factors_ok_##SFX(x + at + l * ls, q.e - q.b, 1) &&                             \
                                        factors_ok_##SFX(y + at + l * ls, q.e - q.b, 1);                               \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t k = k0; k < k0 + nl; ++k) {                                                                       \
            const cpu_piece q = piece_of(p, k);                                                                        \
            double *sum = sums ? sums + k * p->width : NULL;                                                           \
            for (int64_t j = 0; j < q.lines; ++j)                                                                      \
                acc[j] = mode == APPLY && sum ? sum[j] : dc_scan_neutral(p->op);                                       \
            const int64_t at = q.offset + q.b * p->inner;                                                              \
            forward_run_##SFX(p->op, p->exclusive, mode, (int)q.lines, x + at, y + at, q.e - q.b, p->inner, 1,         \
                              p->stream, acc);                                                                         \
            for (int64_t j = 0; mode == SUMMARIZE && j < q.lines; ++j)                                                 \
                sum[j] = acc[j];                                                                                       \
            if (mode == APPLY && p->factors_ok)                                                                        \
                p->factors_ok[k] = block_factors_ok_##SFX(x + at, q.e - q.b, q.lines, p->inner) &&                     \
                                   block_factors_ok_##SFX(y + at, q.e - q.b, q.lines, p->inner);                       \
        }                                                                                                              \
    }                                                                                                                  \
    /* SUMMARIZE: the affine maps of the adjoints of pieces k0 .. k0 + nl - 1                                          \
     * into maps; APPLY (APPLY_ADD): the input's adjoint gx, from the adjoint                                          \
     * after each piece in maps (0 where lines are not cut). A piece goes                                              \
     * through its variant (adjoint_variant), the lanes through the one they                                           \
     * share, else through the op's. */                                                                                \
    static void adjoint_pieces_##SFX(const cpu_plan *p, int64_t k0, int nl, const T *x, const T *y, const T *g, T *gx, \
                                     dc_scan_affine *maps, int mode)                                                   \
    {                                                                                                                  \
        int64_t ls;                                                                                                    \
        dc_scan_affine acc[CPU_WIDTH];                                                                                 \
        if (nl > 1 && short_rows(p) && as_lanes(p, k0, nl, &ls)) {                                                     \
            const int64_t o = k0 * p->len;                                                                             \
            short_rows_run_##SFX(p->op, p->exclusive, mode, nl, x + o, y + o, g + o, gx + o, p->len, ls);              \
            return;                                                                                                    \
        }                                                                                                              \
        if (nl > 1 && as_lanes(p, k0, nl, &ls)) {                                                                      \
            /* whole rows (one chunk a row) share their positions: their                                               \
             * pieces follow from the first, and their ends are stepped                                                \
             * together */                                                                                             \
            const bool rows = p->chunks == 1;                                                                          \
            cpu_piece q[SHORT_LANES];                                                                                  \
            int variant = -1;                                                                                          \
            for (int l = 0; l < nl; ++l) {                                                                             \
                if (rows)                                                                                              \
                    q[l] = (cpu_piece){(k0 + l) * p->len, 1, 0, p->len};                                               \
                else                                                                                                   \
                    q[l] = piece_of(p, k0 + l);                                                                        \
                const int v =                                                                                          \
                    adjoint_variant_##SFX(p, k0 + l, x + q[l].offset, y + q[l].offset, 1, q[l].b, q[l].e, 1, 0);       \
                variant = variant < 0 || variant == v ? v : p->op;                                                     \
            }                                                                                                          \
            if (variant == QUIET && mode != SUMMARIZE) {                                                               \
                for (int l = 0; l < nl; ++l)                                                                           \
                    store_zeros_##SFX(mode, gx + q[l].offset, 1, q[l].b, q[l].e, 1, 0);                                \
                return;                                                                                                \
            }                                                                                                          \
            for (int l = 0; l < nl; ++l)                                                                               \
                acc[l] = mode != SUMMARIZE && maps ? maps[k0 + l] : dc_scan_affine_identity();                         \
            const int64_t o0 = q[0].offset, at = o0 + q[0].b;                                                          \
            if (rows)                                                                                                  \
                adjoint_edge_##SFX(p, mode, nl, x + o0, y + o0, g + o0, gx + o0, p->len - 1, ls, acc);                 \
            else                                                                                                       \
                for (int l = 0; l < nl; ++l) {                                                                         \
                    const int64_t o = q[l].offset;                                                                     \
                    adjoint_edge_##SFX(p, mode, 1, x + o, y + o, g + o, gx + o, q[l].e - 1, 1, &acc[l]);               \
                }                                                                                                      \
            adjoint_run_##SFX(variant == QUIET ? DC_REDUCE_SUM : variant, p->exclusive, mode, nl, x + at, y + at,      \
                              g + at, gx + at, q[0].e - q[0].b, 1, ls, p->stream, acc);                                \
            if (rows && p->len > 1)                                                                                    \
                adjoint_edge_##SFX(p, mode, nl, x + o0, y + o0, g + o0, gx + o0, 0, ls, acc);                          \
            for (int l = 0; l < nl; ++l) {                                                                             \
                const int64_t o = q[l].offset;                                                                         \
                if (!rows && q[l].e - q[l].b > 1)                                                                      \
                    adjoint_edge_##SFX(p, mode, 1, x + o, y + o, g + o, gx + o, q[l].b, 1, &acc[l]);                   \
                if (mode == SUMMARIZE)                                                                                 \
                    maps[k0 + l] = acc[l];                                                                             \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t k = k0; k < k0 + nl; ++k) {                                                                       \
            const cpu_piece q = piece_of(p, k);                                                                        \
            const int64_t o = q.offset, at = q.offset + q.b * p->inner;                                                \
            const int variant = adjoint_variant_##SFX(p, k, x + o, y + o, q.lines, q.b, q.e, p->inner, 1);             \
            if (variant == QUIET && mode != SUMMARIZE) {                                                               \
                store_zeros_##SFX(mode, gx + o, q.lines, q.b, q.e, p->inner, 1);                                       \
                continue;                                                                                              \
            }                                                                                                          \
            dc_scan_affine *map = maps ? maps + k * p->width : NULL;                                                   \
            for (int64_t j = 0; j < q.lines; ++j)                                                                      \
                acc[j] = mode != SUMMARIZE && map ? map[j] : dc_scan_affine_identity();                                \
            adjoint_edge_##SFX(p, mode, q.lines, x + o, y + o, g + o, gx + o, q.e - 1, 1, acc);                        \
            adjoint_run_##SFX(variant == QUIET ? DC_REDUCE_SUM : variant, p->exclusive, mode, (int)q.lines, x + at,    \
                              y + at, g + at, gx + at, q.e - q.b, p->inner, 1, p->stream, acc);                        \
            if (q.e - q.b > 1)                                                                                         \
                adjoint_edge_##SFX(p, mode, q.lines, x + o, y + o, g + o, gx + o, q.b, 1, acc);                        \
            for (int64_t j = 0; mode == SUMMARIZE && j < q.lines; ++j)                                                 \
                map[j] = acc[j];                                                                                       \
        }                                                                                                              \
    }
DEFINE_CPU_SCAN(float, f32)
DEFINE_CPU_SCAN(double, f64)

/* Each chunk's total replaced by the total of the chunks before it in its
 * line, in order. */
static void chain_totals(const cpu_plan *p, int64_t g, double *sums)
{
    for (int64_t j = 0; j < piece_of(p, g * p->chunks).lines; ++j) {
        double carry = dc_scan_neutral(p->op);
        for (int64_t c = 0; c < p->chunks; ++c) {
            double *s = sums + (g * p->chunks + c) * p->width + j;
            const double total = *s;
            *s = carry;
            carry = dc_scan_combine(p->op, carry, total);
        }
    }
}

/* Each chunk's adjoint map replaced by the map of the chunks after it. */
static void chain_maps(const cpu_plan *p, int64_t g, dc_scan_affine *maps)
{
    for (int64_t j = 0; j < piece_of(p, g * p->chunks).lines; ++j) {
        dc_scan_affine after = dc_scan_affine_identity();
        for (int64_t c = p->chunks; c-- > 0;) {
            dc_scan_affine *m = maps + (g * p->chunks + c) * p->width + j;
            const dc_scan_affine own = *m;
            *m = after;
            after = dc_scan_affine_then(after, own);
        }
    }
}

/* The scan (adjoint false: y from x) or its adjoint (gx from x, y, g; add:
 * added to what gx holds), on the CPU, in one or three parallel passes. */
static dc_status scan_cpu(dc_tape *tape, const cpu_plan *p, dc_dtype dtype, bool adjoint, const void *x, const void *y,
                          const void *g, void *out, bool add)
{
    const int64_t n_pieces = p->groups * p->chunks;
    /* rows' pieces go LANES (short rows SHORT_LANES) at a time */
    const int64_t batch = p->inner != 1 ? 1 : short_rows(p) ? SHORT_LANES : LANES;
    const int64_t n_batches = (n_pieces + batch - 1) / batch;
    const int64_t numel = p->groups * p->width * p->len;
    const int n_threads = numel > 32768 ? tape->ctx->cpu.num_threads : 1;
    double *sums = NULL;
    if (p->chunks > 1) {
        sums = dc_tape_alloc_meta(tape, (size_t)n_pieces * (size_t)p->width * sizeof(dc_scan_affine));
        if (!sums)
            return DC_ERR_MEMORY;
    }
    dc_scan_affine *maps = (dc_scan_affine *)sums;
    const bool f32 = dtype == DC_F32;
    for (int pass = p->chunks > 1 ? 0 : 2; pass < 3; ++pass) {
        if (pass == 1) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
            for (int64_t gi = 0; gi < p->groups; ++gi) {
                if (adjoint)
                    chain_maps(p, gi, maps);
                else
                    chain_totals(p, gi, sums);
            }
            continue;
        }
        const int mode = pass == 0 ? SUMMARIZE : add ? APPLY_ADD : APPLY;
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t b = 0; b < n_batches; ++b) {
            const int64_t k0 = b * batch;
            const int nl = (int)(n_pieces - k0 < batch ? n_pieces - k0 : batch);
            if (adjoint && f32)
                adjoint_pieces_f32(p, k0, nl, x, y, g, out, maps, mode);
            else if (adjoint)
                adjoint_pieces_f64(p, k0, nl, x, y, g, out, maps, mode);
            else if (f32)
                forward_pieces_f32(p, k0, nl, x, out, sums, mode);
            else
                forward_pieces_f64(p, k0, nl, x, out, sums, mode);
        }
    }
    return DC_OK;
}

/* The products' adjoint reads the scan's output through
 * dc_scan_zero_safe_output, which needs each line's first zero element.
 * Lines are cut every ZERO_CUT positions to find it on every thread. */
enum { ZERO_CUT = 4096 };

/* first[(o * cuts + c) * inner + j]: the first zero of line (o, j) up to
 * the end of cut c (len where none), for the [outer, len, inner] block x. */
#define DEFINE_FIRST_ZEROS(T, SFX)                                                                                     \
    static void first_zeros_##SFX(const dc_axes *ax, const T *x, int64_t cuts, int64_t *first, int n_threads)          \
    {                                                                                                                  \
        const int64_t len = ax->len, inner = ax->inner;                                                                \
        _Pragma("omp parallel for num_threads(n_threads) schedule(static)")                                            \
        for (int64_t oc = 0; oc < ax->outer * cuts; ++oc) {                                                            \
            const int64_t o = oc / cuts, b = oc % cuts * ZERO_CUT, e = b + ZERO_CUT < len ? b + ZERO_CUT : len;         \
            int64_t *f = first + oc * inner;                                                                           \
            for (int64_t j = 0; j < inner; ++j)                                                                        \
                f[j] = len;                                                                                            \
            for (int64_t i = e; i-- > b;)                                                                              \
                for (int64_t j = 0; j < inner; ++j)                                                                    \
                    if (x[(o * len + i) * inner + j] == 0)                                                             \
                        f[j] = i;                                                                                      \
        }                                                                                                              \
        for (int64_t o = 0; o < ax->outer; ++o)                                                                        \
            for (int64_t c = 1; c < cuts; ++c)                                                                         \
                for (int64_t j = 0; j < inner; ++j) {                                                                  \
                    int64_t *f = first + (o * cuts + c) * inner + j;                                                   \
                    if (f[-inner] < *f)                                                                                \
                        *f = f[-inner];                                                                                \
                }                                                                                                      \
    }                                                                                                                  \
    /* ys: y as the products' adjoint takes it (dc_scan_zero_safe_output) */                                           \
    static void zero_safe_outputs_##SFX(const dc_axes *ax, bool exclusive, const T *y, const int64_t *first,           \
                                        int64_t cuts, T *ys, int n_threads)                                            \
    {                                                                                                                  \
        const int64_t len = ax->len, inner = ax->inner;                                                                \
        _Pragma("omp parallel for num_threads(n_threads) schedule(static)")                                            \
        for (int64_t oc = 0; oc < ax->outer * cuts; ++oc) {                                                            \
            const int64_t o = oc / cuts, b = oc % cuts * ZERO_CUT, e = b + ZERO_CUT < len ? b + ZERO_CUT : len;         \
            const int64_t *f = first + oc * inner;                                                                     \
            for (int64_t i = b; i < e; ++i)                                                                            \
                for (int64_t j = 0; j < inner; ++j) {                                                                  \
                    const int64_t at = (o * len + i) * inner + j;                                                      \
                    ys[at] = (T)dc_scan_zero_safe_output(exclusive, f[j], i, (double)y[at]);                           \
                }                                                                                                      \
        }                                                                                                              \
    }
DEFINE_FIRST_ZEROS(float, f32)
DEFINE_FIRST_ZEROS(double, f64)

/* The scan's output y as a product's adjoint takes it (its factors s,
 * dc_scan_zero_safe_output): y itself where no line holds a zero element
 * (then every product before a position is y's), else a copy with the
 * products over a zero made 0, in *out. A recorded forward that found every
 * piece's factors finite and not zero (factors_ok) saves the search. */
static dc_status zero_safe_products(dc_tape *tape, const cpu_plan *p, const dc_axes *ax, dc_dtype dtype, const void *x,
                                    const void *y, const void **out)
{
    *out = y;
    const int64_t n_pieces = p->groups * p->chunks;
    bool all_ok = p->factors_ok != NULL;
    for (int64_t k = 0; all_ok && k < n_pieces; ++k)
        all_ok = p->factors_ok[k] != 0;
    const int64_t numel = ax->outer * ax->len * ax->inner;
    if (all_ok || numel == 0)
        return DC_OK;
    const int64_t cuts = (ax->len + ZERO_CUT - 1) / ZERO_CUT;
    const int n_threads = numel > 32768 ? tape->ctx->cpu.num_threads : 1;
    int64_t *first = dc_tape_alloc_meta(tape, (size_t)(ax->outer * cuts * ax->inner) * sizeof *first);
    if (!first)
        return DC_ERR_MEMORY;
    if (dtype == DC_F32)
        first_zeros_f32(ax, x, cuts, first, n_threads);
    else
        first_zeros_f64(ax, x, cuts, first, n_threads);
    bool any = false;
    for (int64_t o = 0; !any && o < ax->outer; ++o)
        for (int64_t j = 0; !any && j < ax->inner; ++j)
            any = first[((o + 1) * cuts - 1) * ax->inner + j] < ax->len;
    if (!any)
        return DC_OK;
    void *ys = dc_tape_alloc_data(tape, (size_t)numel * dc_dtype_size(dtype));
    if (!ys)
        return DC_ERR_MEMORY;
    if (dtype == DC_F32)
        zero_safe_outputs_f32(ax, p->exclusive, y, first, cuts, ys, n_threads);
    else
        zero_safe_outputs_f64(ax, p->exclusive, y, first, cuts, ys, n_threads);
    *out = ys;
    return DC_OK;
}

dc_tensor *dc_op_scan(dc_tape *tape, dc_tensor *x, dc_reduction op, int axis, bool exclusive)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_scan", 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (op != DC_REDUCE_SUM && op != DC_REDUCE_PROD && op != DC_REDUCE_MAX && op != DC_REDUCE_MIN) {
        char s[128];
        dc_error(ctx, DC_ERR_ARG,
                 "dc_op_scan: op %d is not one of DC_REDUCE_SUM, DC_REDUCE_PROD, DC_REDUCE_MAX, "
                 "DC_REDUCE_MIN (x of shape %s)",
                 (int)op, dc_tensor_shape_str(x, s, sizeof s));
        return NULL;
    }
    dc_axes ax;
    if (dc_axes_parse(ctx, "dc_op_scan", x, 1, &axis, true, &ax) != DC_OK)
        return NULL;
    const dc_tensor *xb = dc_axes_block(tape, x, &ax);
    dc_tensor *y = xb ? dc_tape_alloc_tensor(tape, x->dtype, x->ndim, x->shape) : NULL;
    if (!y)
        return NULL;
    const bool record = dc_tape_wants_node(tape, 1, &x);
    cpu_plan p = plan_cpu((int)op, exclusive, &ax, ctx->cpu.num_threads);
    if (ctx->cuda) {
        const size_t bytes = dc_cuda_scan_parts_bytes(ax.outer, ax.len, ax.inner, false);
        void *parts = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if ((bytes && !parts) || dc_cuda_scan(ctx, x->dtype, (int)op, exclusive, xb->data, y->data, ax.outer, ax.len,
                                              ax.inner, parts) != DC_OK)
            return NULL;
    } else {
        /* a recorded product tests its pieces' factors while they are in
         * the cache, for its adjoint */
        if (record && op == DC_REDUCE_PROD && p.groups * p.chunks > 0 && !short_rows(&p) &&
            !(p.factors_ok = dc_tape_alloc_meta(tape, (size_t)(p.groups * p.chunks))))
            return NULL;
        /* a sum's output past the caches goes out in streaming stores: no
         * adjoint reads it (a product's reads it back, a recorded one at
         * once) */
        p.stream = DC_STREAM_STORES && op == DC_REDUCE_SUM &&
                   (size_t)(ax.outer * ax.len * ax.inner) * dc_dtype_size(x->dtype) >= DC_STREAM_MIN_BYTES;
        if (scan_cpu(tape, &p, x->dtype, false, xb->data, NULL, NULL, y->data, false) != DC_OK)
            return NULL;
    }
    if (!record)
        return y;
    dc_axes *kept = dc_tape_alloc_meta(tape, sizeof *kept);
    dc_node *node = kept ? dc_tape_record(tape, DC_OP_SCAN, 1, &x, 1, &y) : NULL;
    if (!node)
        return NULL;
    *kept = ax;
    node->as.scan.block = xb;
    node->as.scan.axes = kept;
    node->as.scan.op = op;
    node->as.scan.exclusive = exclusive;
    node->as.scan.factors_ok = p.factors_ok;
    return y;
}

/* The input's adjoint (scan_formulas.h) written straight into its gradient
 * where the block lies as the gradient does (assigned or added in the same
 * pass), else into a block then added through the input's layout. */
dc_status dc_scan_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *y = node->out[0], *xb = node->as.scan.block;
    const dc_axes *ax = node->as.scan.axes;
    const int op = (int)node->as.scan.op;
    const bool exclusive = node->as.scan.exclusive;
    const dc_tensor *g = dc_grad_contiguous(tape, y);
    if (!g)
        return DC_ERR_MEMORY;
    void *gx;
    bool direct, add = false;
    dc_status st = dc_axes_grad_target(tape, x, dc_axes_one_run(ax), &gx, &direct, &add);
    if (st != DC_OK)
        return st;
    if (tape->ctx->cuda) {
        const size_t bytes = dc_cuda_scan_parts_bytes(ax->outer, ax->len, ax->inner, true);
        void *parts = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if (bytes && !parts)
            return DC_ERR_MEMORY;
        /* a product's y as its adjoint takes it (zero_safe_products), on
         * the device always: nothing there says the factors hold no zero
         * without a wait for the host */
        const void *y_read = y->data;
        if (op == DC_REDUCE_PROD && y->numel > 0) {
            const size_t zero_bytes = dc_cuda_scan_zero_scratch_bytes(ax->outer, ax->len, ax->inner);
            void *zeros = dc_tape_alloc_data(tape, zero_bytes);
            void *ys = dc_tape_alloc_data(tape, (size_t)y->numel * dc_dtype_size(x->dtype));
            if (!zeros || !ys)
                return DC_ERR_MEMORY;
            st = dc_cuda_scan_zero_safe_outputs(tape->ctx, x->dtype, exclusive, xb->data, y->data, ax->outer, ax->len,
                                                ax->inner, zeros, ys);
            if (st != DC_OK)
                return st;
            y_read = ys;
        }
        st = dc_cuda_scan_adjoint(tape->ctx, x->dtype, op, exclusive, xb->data, y_read, g->data, gx, ax->outer,
                                  ax->len, ax->inner, parts, add);
    } else {
        cpu_plan p = plan_cpu(op, exclusive, ax, tape->ctx->cpu.num_threads);
        p.factors_ok = node->as.scan.factors_ok;
        const void *y_read = y->data;
        if (op == DC_REDUCE_PROD && (st = zero_safe_products(tape, &p, ax, x->dtype, xb->data, y->data, &y_read)) != DC_OK)
            return st;
        /* not a block that is added through the input's layout next: it
         * would be read back at once */
        p.stream = DC_STREAM_STORES && direct &&
                   (size_t)(ax->outer * ax->len * ax->inner) * dc_dtype_size(x->dtype) >= DC_STREAM_MIN_BYTES;
        st = scan_cpu(tape, &p, x->dtype, true, xb->data, y_read, g->data, gx, add);
    }
    if (st != DC_OK)
        return st;
    if (!direct)
        return dc_axes_add_block_grad(tape, x, ax, gx);
    dc_grad_done(x);
    return DC_OK;
}
