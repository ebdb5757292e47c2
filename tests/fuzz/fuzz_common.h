/* What the fuzz targets share: reading the input as a stream of choices, the
 * values those choices pick from, and the checks of the library's error
 * contract. Header-only: each target is one translation unit. */
#ifndef DC_FUZZ_COMMON_H
#define DC_FUZZ_COMMON_H

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

/* Size bound of dc_tensor_new: the product of the sizes, zeros counted as
 * ones, is at most this (src/tensor.c, dc_check_shape). */
#define FZ_SPAN_BOUND (INT64_MAX / 16)

/* UndefinedBehaviorSanitizer's report says where the call came from (the
 * build stops at the first report: -fno-sanitize-recover). */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

/* Whether DC_FUZZ_TRACE is set (and not "0"): the targets then print each
 * call they make and its result. */
static inline bool fz_tracing_requested(void)
{
    const char *e = getenv("DC_FUZZ_TRACE");
    return e && *e && strcmp(e, "0") != 0;
}

/* A cursor over the fuzzer's bytes; past the end every read gives 0, so a
 * short input is a valid program that stops early. */
typedef struct fz_input {
    const uint8_t *p;
    size_t n, at;
} fz_input;

static inline bool fz_more(const fz_input *in) { return in->at < in->n; }

static inline uint8_t fz_u8(fz_input *in) { return in->at < in->n ? in->p[in->at++] : 0; }

static inline uint16_t fz_u16(fz_input *in)
{
    uint16_t lo = fz_u8(in);
    return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

static inline bool fz_bit(fz_input *in) { return fz_u8(in) & 1; }

/* A tensor size: mostly small, sometimes one of the values at which size
 * arithmetic breaks (2^31, 2^32, products near 2^63, the bound of
 * dc_tensor_new and one past it), sometimes negative. */
static inline int64_t fz_dim(fz_input *in)
{
    static const int64_t special[] = {
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        16,
        31,
        64,
        255,
        1000,
        4096,
        (int64_t)1 << 16,
        ((int64_t)1 << 31) - 1,
        (int64_t)1 << 31,
        (int64_t)1 << 32,
        (int64_t)1 << 34,
        (int64_t)1 << 40,
        (int64_t)1 << 58,
        FZ_SPAN_BOUND,
        FZ_SPAN_BOUND + 1,
        (int64_t)1 << 62,
        INT64_MAX,
        -1,
        INT64_MIN,
        (int64_t)1 << 30,
    };
    const uint8_t b = fz_u8(in);
    /* small sizes most of the time: shapes that broadcast and fit */
    if (b < 160)
        return b % 6;
    return special[(b - 160) % (sizeof special / sizeof special[0])];
}

/* An int argument (axis, rank, count, region): small, or extreme. */
static inline int fz_int(fz_input *in)
{
    static const int special[] = {INT_MIN, INT_MIN + 1, -1000, 1000, INT_MAX - 1, INT_MAX};
    const uint8_t b = fz_u8(in);
    if (b < 240)
        return (int)(b % 24) - 10; /* -10 .. 13 */
    return special[(b - 240) % (sizeof special / sizeof special[0])];
}

/* An int64_t argument (slice start and length, reshape size, index). */
static inline int64_t fz_i64(fz_input *in)
{
    const uint8_t b = fz_u8(in);
    if (b < 128)
        return (int64_t)(b % 20) - 4; /* -4 .. 15 */
    if (b < 192)
        return fz_dim(in);
    if (b < 224) /* negated (INT64_MIN stays itself) */
        return (int64_t)(0 - (uint64_t)fz_dim(in));
    return (int64_t)((uint64_t)fz_u16(in) | (uint64_t)fz_u16(in) << 16 | (uint64_t)fz_u16(in) << 32 |
                     (uint64_t)fz_u16(in) << 48);
}

/* A double argument or element value: ordinary numbers, signed zeros,
 * subnormals, huge values, infinities and NaN. */
static inline double fz_double(fz_input *in)
{
    static const double special[] = {
        0.0,  1.0,   -1.0, 0.5,     2.0,   -0.0,     3.0,     -2.5,   0.25, 1e-3, 100.0, 1e30,
        -1e30, 1e300, -1e300, 4.9e-324, 1e-310, HUGE_VAL, -HUGE_VAL, NAN,    7.0,  -7.0, 0.75,  1e-45,
    };
    return special[fz_u8(in) % (sizeof special / sizeof special[0])];
}

/* Stops the run with a message the crash report shows: a broken contract is
 * a finding like a sanitizer report. */
#define FZ_FAIL(...)                                                                                               \
    do {                                                                                                           \
        fprintf(stderr, "fuzz contract violated at %s:%d: ", __FILE__, __LINE__);                                 \
        fprintf(stderr, __VA_ARGS__);                                                                              \
        fputc('\n', stderr);                                                                                       \
        abort();                                                                                                   \
    } while (0)

/* A failed call must leave its reason behind: a status other than DC_OK and
 * a message (status.h, ops.h). */
static inline void fz_check_error(const dc_ctx *ctx, const char *call, dc_status st)
{
    if (st == DC_OK)
        FZ_FAIL("%s failed but returned DC_OK", call);
    if ((int)st < 0 || st >= DC_STATUS_COUNT)
        FZ_FAIL("%s returned status %d, not a dc_status", call, (int)st);
    if (dc_last_status(ctx) == DC_OK)
        FZ_FAIL("%s failed with %s but dc_last_status is DC_OK", call, dc_status_name(st));
    if (dc_last_error(ctx)[0] == '\0')
        FZ_FAIL("%s failed with %s and left no message", call, dc_status_name(st));
}

#endif /* DC_FUZZ_COMMON_H */
