/* Eight float32 runs side by side, moved eight elements at a time through
 * vector registers as 8 x 8 tiles transposed there: a run's eight elements
 * become one element of every run, and back. The CPU reduce-adjoint's group
 * of pieces (assoc_kernels.h, dc_assoc_reduce_group) reads each field of
 * its input, and writes each of its gradient, this way, into and out of a
 * local array laid out [step][piece], so that its loops over the pieces
 * read and write neighbouring numbers; the CPU scans' lanes alike
 * (src/ops/scan_tiles.h). Only moves: the numbers are the same.
 *
 * Defines DC_TILES8 where the compiler targets AVX, and nothing else. */
#ifndef DC_BROADCAST_TILES8_H
#define DC_BROADCAST_TILES8_H

#if defined(__AVX__)
#include <immintrin.h>
#include <stdint.h>

#define DC_TILES8 1

/* Rows of r become its columns. */
static inline void dc_tile8_transpose(__m256 r[8])
{
    const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 b0 = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 b1 = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 b2 = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 b3 = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 b4 = _mm256_shuffle_ps(a4, a6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 b5 = _mm256_shuffle_ps(a4, a6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 b6 = _mm256_shuffle_ps(a5, a7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 b7 = _mm256_shuffle_ps(a5, a7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
    r[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
    r[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
    r[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
    r[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
    r[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
    r[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
    r[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

/* 4 x 4 transposes within each 128-bit half: from r[0..3], each holding
 * four elements of two rows (rows l and l + 4, l = 0..3, in its halves),
 * the four elements' columns, each then one element of all eight rows. */
static inline void dc_tile8_transpose_halves(const __m256 r[4], __m256 c[4])
{
    const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
    c[0] = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(1, 0, 1, 0));
    c[1] = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(3, 2, 3, 2));
    c[2] = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(1, 0, 1, 0));
    c[3] = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(3, 2, 3, 2));
}

/* t[j] = element j of rows 0..7 (row l at p + at[l]): each row's halves
 * are loaded into the halves of two vectors (with row l + 4), so that what
 * dc_tile8_transpose does in three stages of shuffles takes two; a load
 * into an upper half is no shuffle. */
static inline void dc_tile8_load_rows(const float *p, const int64_t at[8], __m256 t[8])
{
    for (int h = 0; h < 2; ++h) {
        __m256 r[4];
        for (int l = 0; l < 4; ++l)
            r[l] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + at[l] + 4 * h)),
                                        _mm_loadu_ps(p + at[l + 4] + 4 * h), 1);
        dc_tile8_transpose_halves(r, t + 4 * h);
    }
}

/* The inverse of dc_tile8_load_rows: element j of row l (at p + at[l]) =
 * t[j][l], each row's halves stored from the halves of two vectors. */
static inline void dc_tile8_store_rows(float *p, const int64_t at[8], const __m256 t[8])
{
    for (int h = 0; h < 2; ++h) {
        __m256 r[4];
        dc_tile8_transpose_halves(t + 4 * h, r);
        for (int l = 0; l < 4; ++l) {
            _mm_storeu_ps(p + at[l] + 4 * h, _mm256_castps256_ps128(r[l]));
            _mm_storeu_ps(p + at[l + 4] + 4 * h, _mm256_extractf128_ps(r[l], 1));
        }
    }
}

/* to[j * 8 + g] = x[first[g] + s0 + j] for steps j and pieces g < 8. */
static inline void dc_tile8_gather_f32(const float *x, const int64_t *first, int64_t s0, float *to)
{
    __m256 r[8];
    dc_tile8_load_rows(x + s0, first, r);
    for (int j = 0; j < 8; ++j)
        _mm256_storeu_ps(to + j * 8, r[j]);
}

/* How dc_tile8_scatter2_f32 writes: assigned, added in float32 to what the
 * destination holds, or assigned with streaming stores, which write whole
 * cache lines to memory without first reading them into the cache (a run
 * not on a 64-byte boundary is assigned as usual). Streaming pays where
 * what is written is too large for the cache to keep until it is read:
 * it moves two thirds of the bytes an assignment does. A kernel that
 * streams ends with dc_tile8_stream_fence. */
typedef enum dc_tile8_store { DC_TILE8_ASSIGN, DC_TILE8_ADD, DC_TILE8_STREAM } dc_tile8_store;

/* Sixteen elements of rows 0..7 (row l at p + at[l]) from two tiles of
 * one element of every row a vector, lo elements 0..7, hi 8..15 (both
 * transposed in place), written as `how` says: each row's sixteen numbers,
 * one 64-byte run, go out together, so that streaming stores fill whole
 * lines. */
static inline void dc_tile8_store2_rows(float *p, const int64_t at[8], dc_tile8_store how, __m256 lo[8],
                                        __m256 hi[8])
{
    dc_tile8_transpose(lo);
    dc_tile8_transpose(hi);
    for (int g = 0; g < 8; ++g) {
        float *to = p + at[g];
        if (how == DC_TILE8_STREAM && ((uintptr_t)to & 63) == 0) {
            _mm256_stream_ps(to, lo[g]);
            _mm256_stream_ps(to + 8, hi[g]);
        } else if (how == DC_TILE8_ADD) {
            _mm256_storeu_ps(to, _mm256_add_ps(_mm256_loadu_ps(to), lo[g]));
            _mm256_storeu_ps(to + 8, _mm256_add_ps(_mm256_loadu_ps(to + 8), hi[g]));
        } else {
            _mm256_storeu_ps(to, lo[g]);
            _mm256_storeu_ps(to + 8, hi[g]);
        }
    }
}

/* x[first[g] + s0 + j] = from[j * 8 + g] for sixteen steps j (two tiles)
 * and pieces g < 8, written as `how` says (dc_tile8_store2_rows). */
static inline void dc_tile8_scatter2_f32(float *x, const int64_t *first, int64_t s0, dc_tile8_store how,
                                         const float *from)
{
    __m256 lo[8], hi[8];
    for (int j = 0; j < 8; ++j) {
        lo[j] = _mm256_loadu_ps(from + j * 8);
        hi[j] = _mm256_loadu_ps(from + 64 + j * 8);
    }
    dc_tile8_store2_rows(x + s0, first, how, lo, hi);
}

/* Orders a kernel's streaming stores before whatever follows it (the
 * threads' join), as ordinary stores are. */
static inline void dc_tile8_stream_fence(void) { _mm_sfence(); }
#endif /* __AVX__ */

#endif /* DC_BROADCAST_TILES8_H */
