#include "test_support.h"

#include <math.h>
#include <stdlib.h>

dc_ctx *test_cpu_ctx_threads(int threads, uint64_t seed)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.num_threads = threads;
    o.seed = seed;
    dc_status st;
    dc_ctx *ctx = dc_ctx_new(&o, &st);
    if (!ctx)
        fail_msg("dc_ctx_new: %s", dc_last_error(NULL));
    if (threads > 0)
        assert_int_equal(dc_ctx_num_threads(ctx), threads);
    return ctx;
}

dc_ctx *test_cpu_ctx(void) { return test_cpu_ctx_threads(0, 1); }

void test_set_values(dc_tensor *t, const double *values)
{
    dc_ctx *ctx = dc_tensor_ctx(t);
    const int64_t n = dc_tensor_numel(t);
    if (!dc_tensor_is_contiguous(t)) {
        for (int64_t i = 0; i < n; ++i)
            if (dc_tensor_set(t, i, values[i]) != DC_OK)
                fail_msg("dc_tensor_set: %s", dc_last_error(ctx));
        return;
    }
    /* one copy, not one per element: on a device each copy waits for it */
    const bool single = dc_tensor_dtype(t) == DC_F32;
    const size_t bytes = (size_t)n * (single ? sizeof(float) : sizeof(double));
    void *host = malloc(bytes ? bytes : 1);
    assert_non_null(host);
    for (int64_t i = 0; i < n; ++i)
        if (single)
            ((float *)host)[i] = (float)values[i];
        else
            ((double *)host)[i] = values[i];
    if (dc_tensor_from_host_copy(t, host, bytes) != DC_OK)
        fail_msg("dc_tensor_from_host_copy: %s", dc_last_error(ctx));
    free(host);
}

dc_tensor *test_tensor(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const double *values)
{
    dc_tensor *t = dc_tensor_new(ctx, dtype, ndim, shape);
    if (!t)
        fail_msg("dc_tensor_new: %s", dc_last_error(ctx));
    test_set_values(t, values);
    return t;
}

dc_tensor *test_random(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, double lo, double hi)
{
    dc_tensor *t = dc_tensor_new(ctx, dtype, ndim, shape);
    if (!t || dc_tensor_fill_uniform(t, lo, hi) != DC_OK)
        fail_msg("random tensor: %s", dc_last_error(ctx));
    return t;
}

double *test_values(const dc_tensor *t)
{
    int64_t n = dc_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    if (!dc_tensor_is_contiguous(t)) {
        for (int64_t i = 0; i < n; ++i)
            if (dc_tensor_get(t, i, &v[i]) != DC_OK)
                fail_msg("dc_tensor_get: %s", dc_last_error(dc_tensor_ctx(t)));
        return v;
    }
    /* one copy, not one per element: on a device each copy waits for it */
    if (dc_tensor_dtype(t) == DC_F32) {
        float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
        assert_non_null(f);
        if (dc_tensor_to_host(t, f, (size_t)n * sizeof *f) != DC_OK)
            fail_msg("dc_tensor_to_host: %s", dc_last_error(dc_tensor_ctx(t)));
        for (int64_t i = 0; i < n; ++i)
            v[i] = f[i];
        free(f);
    } else if (dc_tensor_to_host(t, v, (size_t)n * sizeof *v) != DC_OK) {
        fail_msg("dc_tensor_to_host: %s", dc_last_error(dc_tensor_ctx(t)));
    }
    return v;
}

void test_assert_close(const double *a, const double *b, int64_t n, double atol, double rtol, const char *what)
{
    for (int64_t i = 0; i < n; ++i) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (!(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i])))
            fail_msg("%s: element %lld: %.17g vs %.17g (diff %.3g)", what, (long long)i, a[i], b[i],
                     fabs(a[i] - b[i]));
    }
}
