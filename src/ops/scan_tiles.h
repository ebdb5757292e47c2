/* The CPU scans' side-by-side lanes (scan.c) in vector registers: eight
 * float32 lanes, rows of one tensor at distance ls, read and written eight
 * positions at a time as 8 x 8 tiles, transposed in registers so that one
 * vector holds one position of every lane. Each lane's recurrence then runs
 * in double, lane by lane, exactly as scan.c's scalar loops run it: the same
 * operations in the same order, so the same bits (the build contracts no
 * multiply and add into one, -ffp-contract=off). Only the sum and the
 * products' nonzero variant take them, the sum for its outputs and
 * gradients only (its summaries need no recurrence: scan.c's sum_runs
 * adds them, so the tiles' summaries of sums are never reached); the rest
 * of a run, and every run where the compiler targets no AVX
 * (broadcast/tiles8.h), goes through scan.c's loops.
 *
 * Included by scan.c after its enums (SUMMARIZE, APPLY, APPLY_ADD,
 * PROD_NONZERO, LANES). */
#ifndef DC_OPS_SCAN_TILES_H
#define DC_OPS_SCAN_TILES_H

#include <stdbool.h>
#include <stdint.h>

#include "../../dual/hd.h"

#include "../../broadcast/tiles8.h"

#if defined(DC_TILES8)

enum { TILE = 8 };
_Static_assert((int)TILE == (int)LANES, "a tile holds every lane");

/* t[j]: position j of lanes 0..7, lane l's positions starting at p + l * ls. */
static inline void tile_load(__m256 t[TILE], const float *p, int64_t ls)
{
    const int64_t at[TILE] = {0, ls, 2 * ls, 3 * ls, 4 * ls, 5 * ls, 6 * ls, 7 * ls};
    dc_tile8_load_rows(p, at, t);
}

/* The inverse of tile_load. */
static inline void tile_store(float *p, int64_t ls, const __m256 t[TILE])
{
    const int64_t at[TILE] = {0, ls, 2 * ls, 3 * ls, 4 * ls, 5 * ls, 6 * ls, 7 * ls};
    dc_tile8_store_rows(p, at, t);
}

#if defined(__AVX512F__)
/* A position's lanes in double, in one 512-bit register: one instruction
 * widens or narrows a position (the same conversions as two halves). */
typedef struct tile_wide {
    __m512d v;
} tile_wide;

static inline tile_wide tile_widen(__m256 v)
{
    const tile_wide w = {_mm512_cvtps_pd(v)};
    return w;
}

static inline __m256 tile_narrow(tile_wide w) { return _mm512_cvtpd_ps(w.v); }

static inline tile_wide tile_add(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm512_add_pd(a.v, b.v)};
    return w;
}

static inline tile_wide tile_mul(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm512_mul_pd(a.v, b.v)};
    return w;
}

static inline tile_wide tile_div(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm512_div_pd(a.v, b.v)};
    return w;
}

static inline tile_wide tile_wide_load(const double *v)
{
    const tile_wide w = {_mm512_loadu_pd(v)};
    return w;
}

static inline void tile_wide_store(double *v, tile_wide w) { _mm512_storeu_pd(v, w.v); }

static inline tile_wide tile_wide_zero(void)
{
    const tile_wide w = {_mm512_setzero_pd()};
    return w;
}
#else
/* A position's lanes in double: lanes 0..3 in lo, 4..7 in hi. */
typedef struct tile_wide {
    __m256d lo, hi;
} tile_wide;

static inline tile_wide tile_widen(__m256 v)
{
    const tile_wide w = {_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))};
    return w;
}

static inline __m256 tile_narrow(tile_wide w)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(w.lo)), _mm256_cvtpd_ps(w.hi), 1);
}

static inline tile_wide tile_add(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)};
    return w;
}

static inline tile_wide tile_mul(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)};
    return w;
}

static inline tile_wide tile_div(tile_wide a, tile_wide b)
{
    const tile_wide w = {_mm256_div_pd(a.lo, b.lo), _mm256_div_pd(a.hi, b.hi)};
    return w;
}

static inline tile_wide tile_wide_load(const double *v)
{
    const tile_wide w = {_mm256_loadu_pd(v), _mm256_loadu_pd(v + 4)};
    return w;
}

static inline void tile_wide_store(double *v, tile_wide w)
{
    _mm256_storeu_pd(v, w.lo);
    _mm256_storeu_pd(v + 4, w.hi);
}

static inline tile_wide tile_wide_zero(void)
{
    const tile_wide w = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    return w;
}
#endif

/* One position of the lanes, lane l's at p + l * ls, in double. */
static inline tile_wide tile_gather_wide(const float *p, int64_t ls)
{
    return tile_widen(_mm256_setr_ps(p[0], p[ls], p[2 * ls], p[3 * ls], p[4 * ls], p[5 * ls], p[6 * ls], p[7 * ls]));
}

/* The inverse of tile_load for two tiles, with streaming stores
 * (tiles8.h's dc_tile8_store2_rows): lo holds positions 0..7 of the lanes,
 * hi positions 8..15, so that each lane's sixteen numbers, a whole 64-byte
 * line, go out together; a lane not on a 64-byte boundary is stored as
 * usual. */
static inline void tile_stream2(float *p, int64_t ls, __m256 lo[TILE], __m256 hi[TILE])
{
    const int64_t at[TILE] = {0, ls, 2 * ls, 3 * ls, 4 * ls, 5 * ls, 6 * ls, 7 * ls};
    dc_tile8_store2_rows(p, at, DC_TILE8_STREAM, lo, hi);
}

/* Positions i .. i + 7 of the forward of tiles_forward_f32, from the
 * carries a; out: the output at them (APPLY). */
DC_INLINE void tile_forward_f32(bool mul, bool exclusive, int mode, const float *x, int64_t i, int64_t ls, tile_wide *a,
                                __m256 out[TILE])
{
    tile_load(out, x + i, ls);
    for (int j = 0; j < TILE; ++j) {
        const tile_wide v = tile_widen(out[j]);
        if (mode == APPLY && exclusive)
            out[j] = tile_narrow(*a);
        *a = mul ? tile_mul(*a, v) : tile_add(*a, v);
        if (mode == APPLY && !exclusive)
            out[j] = tile_narrow(*a);
    }
}

/* The forward of a sum (mul false) or a product over positions [0, n) of
 * eight lanes, as forward_lines steps them from the carries acc: in whole
 * tiles, as far as they go. With stream (a sum's APPLY only: the products'
 * loop stays as it was, a stream flag no cost to it), two tiles at a time
 * go out in streaming stores (tile_stream2), the same numbers. Returns the
 * positions done (acc then the carries after them). The plain loop keeps
 * its own copy of tile_forward_f32's steps: through the helper, a float32
 * sum's scan of 10^7 took 2.80-2.87 ms against 2.69-2.78 (three alternating
 * runs). */
DC_INLINE int64_t tiles_forward_f32(bool mul, bool exclusive, int mode, const float *x, float *y, int64_t n, int64_t ls,
                                    bool stream, double *acc)
{
    tile_wide a = tile_wide_load(acc);
    int64_t i = 0;
    if (stream && mode == APPLY && !mul) {
        for (; i + 2 * TILE <= n; i += 2 * TILE) {
            __m256 lo[TILE], hi[TILE];
            tile_forward_f32(mul, exclusive, mode, x, i, ls, &a, lo);
            tile_forward_f32(mul, exclusive, mode, x, i + TILE, ls, &a, hi);
            tile_stream2(y + i, ls, lo, hi);
        }
        dc_tile8_stream_fence(); /* ordered before the threads' join, as plain stores are */
    }
    for (; i + TILE <= n; i += TILE) {
        __m256 t[TILE];
        tile_load(t, x + i, ls);
        for (int j = 0; j < TILE; ++j) {
            const tile_wide v = tile_widen(t[j]);
            if (mode == APPLY && exclusive)
                t[j] = tile_narrow(a);
            a = mul ? tile_mul(a, v) : tile_add(a, v);
            if (mode == APPLY && !exclusive)
                t[j] = tile_narrow(a);
        }
        if (mode == APPLY)
            tile_store(y + i, ls, t);
    }
    tile_wide_store(acc, a);
    return i;
}

/* Positions i0 + 7 down to i0 of the adjoint of tiles_adjoint_f32, from
 * the carries cc (and summaries mm); out: the input's adjoint at them (one
 * vector a position; with APPLY_ADD, added to what gx holds). A product's
 * (APPLY, APPLY_ADD) takes the product of x before each position from
 * *before, the product before i0 + 8 on entry and before i0 on return: the
 * one before i0 is *before divided by the tile's eight factors, and those
 * after it follow by multiplies (see tiles_adjoint_f32). */
DC_INLINE void tile_adjoint_f32(bool prod, bool exclusive, int mode, const float *x, const float *g, const float *gx,
                                int64_t i0, int64_t ls, tile_wide *cc, tile_wide *mm, tile_wide *before,
                                __m256 out[TILE])
{
    const tile_wide zero = tile_wide_zero();
    __m256 tg[TILE], tx[TILE];
    tile_wide s[TILE];
    tile_load(tg, g + i0 + (exclusive ? 1 : 0), ls);
    if (prod)
        tile_load(tx, x + i0 + 1, ls);
    if (prod && mode != SUMMARIZE) {
        /* s[j]: the product before i0 + j; tx[j] is x at i0 + j + 1 */
        const tile_wide first = tile_gather_wide(x + i0, ls);
        tile_wide factors = first;
        for (int j = 0; j < TILE - 1; ++j)
            factors = tile_mul(factors, tile_widen(tx[j]));
        s[0] = tile_div(*before, factors);
        s[1] = tile_mul(s[0], first);
        for (int j = 2; j < TILE; ++j)
            s[j] = tile_mul(s[j - 1], tile_widen(tx[j - 2]));
        *before = s[0];
    }
    if (mode == APPLY_ADD)
        tile_load(out, gx + i0, ls);
    for (int j = TILE; j-- > 0;) {
        const tile_wide gj = tile_widen(tg[j]);
        if (prod) {
            const tile_wide k = tile_widen(tx[j]);
            *cc = tile_add(gj, tile_mul(k, *cc));
            if (mode == SUMMARIZE)
                *mm = tile_mul(k, *mm);
        } else {
            *cc = tile_add(gj, *cc);
        }
        if (mode == SUMMARIZE)
            continue;
        const tile_wide v = tile_add(prod ? tile_mul(s[j], *cc) : *cc, zero);
        out[j] = mode == APPLY_ADD ? _mm256_add_ps(out[j], tile_narrow(v)) : tile_narrow(v);
    }
}

/* The adjoint of a sum (prod false) or of a product's nonzero variant over
 * positions top - 1 down to 1 of eight lanes, as adjoint_lines steps them
 * from the carries c (and, summarizing a product, the summaries m): in
 * whole tiles, as far as they go. With stream (APPLY only), while gx + top
 * lies on a 64-byte boundary, two tiles at a time go out in streaming
 * stores (tile_stream2), the same numbers. Returns the position below the
 * last done (the caller steps the rest, from it down to 1).
 *
 * A product's input adjoint is the product of x before a position times
 * the carry there. The tiles read that product from y once, before top,
 * and get it at every position below from x alone: before a tile, the one
 * after it divided by the tile's eight factors; up the tile, multiplied by
 * each. So the adjoint reads three streams, not four (y's is as long as
 * x's), for one division and fifteen multiplies a tile. The nonzero
 * variant's factors are finite and not zero, x's and y's alike (as
 * float32), so each tile's factors in double are a ratio of two such
 * products, far from the ends of double's range. The products so found
 * carry double's rounding errors, a few units of 2^-53 a tile, far below
 * the 2^-24 of float32 in y itself over any line float32 is used for: the
 * adjoint agrees with one taken from y to float32's rounding, not bit for
 * bit (the positions the caller steps read y). The tiles lie where the
 * piece's positions put them (adjoint_lines), so the bits depend on the
 * shape alone, as everywhere. */
DC_INLINE int64_t tiles_adjoint_f32(bool prod, bool exclusive, int mode, const float *x, const float *y, const float *g,
                                    float *gx, int64_t top, int64_t ls, bool stream, double *c, double *m)
{
    tile_wide cc = tile_wide_load(c), mm = tile_wide_load(m);
    tile_wide before = tile_wide_zero();
    if (prod && mode != SUMMARIZE)
        before = tile_gather_wide(y + top - (exclusive ? 0 : 1), ls);
    if (stream && mode == APPLY && ((uintptr_t)(gx + top) & 63) == 0) {
        for (; top - 2 * TILE >= 1; top -= 2 * TILE) {
            __m256 lo[TILE], hi[TILE];
            tile_adjoint_f32(prod, exclusive, mode, x, g, gx, top - TILE, ls, &cc, &mm, &before, hi);
            tile_adjoint_f32(prod, exclusive, mode, x, g, gx, top - 2 * TILE, ls, &cc, &mm, &before, lo);
            tile_stream2(gx + top - 2 * TILE, ls, lo, hi);
        }
        dc_tile8_stream_fence(); /* ordered before the threads' join, as plain stores are */
    }
    for (; top - TILE >= 1; top -= TILE) {
        __m256 out[TILE];
        tile_adjoint_f32(prod, exclusive, mode, x, g, gx, top - TILE, ls, &cc, &mm, &before, out);
        if (mode != SUMMARIZE)
            tile_store(gx + top - TILE, ls, out);
    }
    tile_wide_store(c, cc);
    tile_wide_store(m, mm);
    return top;
}

#define DC_SCAN_TILES 1
#else
/* No tiles: every position is left to scan.c's loops. */
DC_INLINE int64_t tiles_forward_f32(bool mul, bool exclusive, int mode, const float *x, float *y, int64_t n, int64_t ls,
                                    bool stream, double *acc)
{
    (void)mul, (void)exclusive, (void)mode, (void)x, (void)y, (void)n, (void)ls, (void)stream, (void)acc;
    return 0;
}

DC_INLINE int64_t tiles_adjoint_f32(bool prod, bool exclusive, int mode, const float *x, const float *y, const float *g,
                                    float *gx, int64_t top, int64_t ls, bool stream, double *c, double *m)
{
    (void)prod, (void)exclusive, (void)mode, (void)x, (void)y, (void)g, (void)gx, (void)ls, (void)stream, (void)c,
        (void)m;
    return top;
}
#define DC_SCAN_TILES 0
#endif

#endif /* DC_OPS_SCAN_TILES_H */
