/* Non-temporal ("streaming") stores on the CPU: a store that goes past the
 * caches, so that it costs no read of the line it replaces and evicts
 * nothing another loop still reads. Worth it only for outputs larger than
 * the caches; callers choose by size. Where the compiler names no such
 * store (no SSE2), DC_STREAM_STORES is false and the functions store
 * nothing: the caller keeps its plain stores. */
#ifndef DC_ENGINE_STREAM_STORE_H
#define DC_ENGINE_STREAM_STORE_H

#include <stdbool.h>
#include <stdint.h>

/* The least bytes an op writes with streaming stores. Past the caches, a
 * store costs no read of the line it replaces, and an output that large
 * would not stay in a core's cache for the next op anyway; smaller ones
 * stay in the cache, where the next op reads them sooner (on the 2-core
 * Xeon of bench/RESULTS.md plain stores filled gradients faster up to
 * about this size). */
#define DC_STREAM_MIN_BYTES ((size_t)8 << 20)

#if defined(__SSE2__)
#include <emmintrin.h>
#define DC_STREAM_STORES true
#else
#define DC_STREAM_STORES false
#endif

/* Writes the n values of src at dst past the caches where dst is 16-byte
 * aligned and n a whole number of 16-byte vectors, and says whether it did
 * (else nothing is written). */
static inline bool dc_stream_copy_f32(float *dst, const float *src, int64_t n)
{
#if defined(__SSE2__)
    if ((uintptr_t)dst % 16 != 0 || n % 4 != 0)
        return false;
    for (int64_t i = 0; i < n; i += 4)
        _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    return true;
#else
    (void)dst, (void)src, (void)n;
    return false;
#endif
}

static inline bool dc_stream_copy_f64(double *dst, const double *src, int64_t n)
{
#if defined(__SSE2__)
    if ((uintptr_t)dst % 16 != 0 || n % 2 != 0)
        return false;
    for (int64_t i = 0; i < n; i += 2)
        _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
    return true;
#else
    (void)dst, (void)src, (void)n;
    return false;
#endif
}

/* Sets dst[e0 .. e1) to v: past the caches where stream and the stores
 * exist (the unaligned ends plainly), else plainly. */
static inline void dc_stream_fill_f32(float *dst, int64_t e0, int64_t e1, float v, bool stream)
{
    int64_t e = e0;
#if defined(__SSE2__)
    if (stream) {
        for (; e < e1 && (uintptr_t)(dst + e) % 16 != 0; ++e)
            dst[e] = v;
        const __m128 w = _mm_set1_ps(v);
        for (; e + 4 <= e1; e += 4)
            _mm_stream_ps(dst + e, w);
    }
#else
    (void)stream;
#endif
    for (; e < e1; ++e)
        dst[e] = v;
}

static inline void dc_stream_fill_f64(double *dst, int64_t e0, int64_t e1, double v, bool stream)
{
    int64_t e = e0;
#if defined(__SSE2__)
    if (stream) {
        for (; e < e1 && (uintptr_t)(dst + e) % 16 != 0; ++e)
            dst[e] = v;
        const __m128d w = _mm_set1_pd(v);
        for (; e + 2 <= e1; e += 2)
            _mm_stream_pd(dst + e, w);
    }
#else
    (void)stream;
#endif
    for (; e < e1; ++e)
        dst[e] = v;
}

/* Orders the calling thread's streamed stores before what follows (the
 * barrier that ends its share of a parallel loop). */
static inline void dc_stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

#endif /* DC_ENGINE_STREAM_STORE_H */
