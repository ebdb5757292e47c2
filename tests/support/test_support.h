/* Helpers shared by the tests: contexts, tensors from values, comparisons. */
#ifndef DC_TEST_SUPPORT_H
#define DC_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dualcast.h>

/* A CPU context (seed 1) that fails the test if it cannot be made. */
dc_ctx *test_cpu_ctx(void);

/* A CPU context with exactly `threads` threads (0: OpenMP's default) and the
 * given seed, whatever the machine has; fails the test if it cannot be made. */
dc_ctx *test_cpu_ctx_threads(int threads, uint64_t seed);

/* Sets every element of t from `values` (numel doubles, row-major): in one
 * copy where t is contiguous, element by element where it is a view. */
void test_set_values(dc_tensor *t, const double *values);

/* A persistent tensor of the given shape with values from `values`
 * (numel doubles), in `dtype`. */
dc_tensor *test_tensor(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const double *values);

/* A persistent tensor of uniform random values in [lo, hi). */
dc_tensor *test_random(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, double lo, double hi);

/* All elements as doubles (malloc'd; free it). */
double *test_values(const dc_tensor *t);

/* Fails the test unless a and b (n values) agree within atol + rtol * |b|,
 * naming the first element that does not. */
void test_assert_close(const double *a, const double *b, int64_t n, double atol, double rtol, const char *what);

/* Fails the test unless status is DC_OK, printing dc_last_error. */
#define TEST_OK(ctx, expr)                                                                         \
    do {                                                                                           \
        dc_status test_st_ = (expr);                                                               \
        if (test_st_ != DC_OK)                                                                     \
            fail_msg("%s -> %s: %s", #expr, dc_status_name(test_st_), dc_last_error(ctx));         \
    } while (0)

/* Fails the test when a pointer is NULL, printing dc_last_error. */
#define TEST_NONNULL(ctx, expr)                                                                    \
    do {                                                                                           \
        if (!(expr))                                                                               \
            fail_msg("%s is NULL: %s", #expr, dc_last_error(ctx));                                 \
    } while (0)

#endif /* DC_TEST_SUPPORT_H */
