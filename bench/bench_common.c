/* clock_gettime and CLOCK_MONOTONIC are POSIX, not ISO C */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <dualcast.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_samples_init(bench_samples *s, int cap)
{
    s->n = 0;
    s->cap = cap;
    s->fwd = malloc((size_t)cap * sizeof(double));
    s->bwd = malloc((size_t)cap * sizeof(double));
    s->total = malloc((size_t)cap * sizeof(double));
    if (!s->fwd || !s->bwd || !s->total) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
}

void bench_samples_add(bench_samples *s, double fwd, double bwd)
{
    if (s->n >= s->cap)
        return;
    s->fwd[s->n] = fwd;
    s->bwd[s->n] = bwd;
    s->total[s->n] = fwd + bwd;
    s->n++;
}

void bench_samples_medians(bench_samples *s, double *fwd, double *bwd, double *total)
{
    *fwd = bench_median(s->fwd, s->n);
    *bwd = bench_median(s->bwd, s->n);
    *total = bench_median(s->total, s->n);
}

void bench_samples_free(bench_samples *s)
{
    free(s->fwd);
    free(s->bwd);
    free(s->total);
    s->fwd = s->bwd = s->total = NULL;
    s->n = s->cap = 0;
}

const char *bench_cpu_name(void)
{
    static char name[256];
    if (name[0])
        return name;
    char model[200] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *colon = strchr(line, ':');
                if (colon) {
                    snprintf(model, sizeof model, "%s", colon + 2);
                    model[strcspn(model, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    snprintf(name, sizeof name, "%s, %d threads", model, omp_get_max_threads());
    return name;
}

void bench_print_machine(void)
{
    dc_blas_info blas;
    dc_blas_info_get(&blas);
    printf("machine: %s\n", bench_cpu_name());
    printf("BLAS: %s (kernels: %s)\n", blas.library, blas.core[0] ? blas.core : "not said");
    if (blas.warning[0]) {
        printf("WARNING: %s\n", blas.warning);
        fprintf(stderr, "WARNING: %s\n", blas.warning);
    }
}

void bench_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; ++i) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * 0x1.0p-24);
    }
}

/* The loops of the stream measurement, written plainly so that the compiler
 * vectorizes them as it would any loop of ours: 4 arrays in and 5 out (the
 * shape of a c-update forward pass with its partials), or a copy. */
static void stream_4_5(int64_t n, float *const *a)
{
    const float *restrict x0 = a[0], *restrict x1 = a[1], *restrict x2 = a[2], *restrict x3 = a[3];
    float *restrict y0 = a[4], *restrict y1 = a[5], *restrict y2 = a[6], *restrict y3 = a[7], *restrict y4 = a[8];
#pragma omp parallel for simd schedule(static)
    for (int64_t e = 0; e < n; ++e) {
        const float s = x0[e] + x1[e] + x2[e] + x3[e];
        y0[e] = s;
        y1[e] = 2 * s;
        y2[e] = 3 * s;
        y3[e] = 4 * s;
        y4[e] = 5 * s;
    }
}

static void stream_1_1(int64_t n, float *const *a)
{
    const float *restrict x = a[0];
    float *restrict y = a[1];
#pragma omp parallel for simd schedule(static)
    for (int64_t e = 0; e < n; ++e)
        y[e] = x[e];
}

static void stream_pass(int64_t n, int n_in, int n_out, float *const *a)
{
    if (n_in == 4 && n_out == 5)
        stream_4_5(n, a);
    else
        stream_1_1(n, a);
}

void bench_stream_init(bench_stream *s, int64_t n, int n_in, int n_out)
{
    if (!((n_in == 4 && n_out == 5) || (n_in == 1 && n_out == 1))) {
        fprintf(stderr, "bench_stream_init: shapes 4 in 5 out and 1 in 1 out only\n");
        exit(1);
    }
    s->n = n;
    s->n_in = n_in;
    s->n_out = n_out;
    for (int k = 0; k < n_in + n_out; ++k) {
        s->a[k] = aligned_alloc(64, (size_t)n * sizeof(float));
        if (!s->a[k]) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        /* first touch by the threads that will stream the pages */
        float *a = s->a[k];
#pragma omp parallel for schedule(static)
        for (int64_t e = 0; e < n; ++e)
            a[e] = 1.0f;
    }
    stream_pass(n, n_in, n_out, s->a);
}

double bench_stream_sample(bench_stream *s, int reps)
{
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int r = 0; r < reps; ++r) {
        const double t0 = bench_now();
        stream_pass(s->n, s->n_in, s->n_out, s->a);
        t[r] = bench_now() - t0;
    }
    const double med = bench_median(t, reps);
    free(t);
    return (double)s->n * (s->n_in + s->n_out) * sizeof(float) / med / 1e9;
}

void bench_stream_free(bench_stream *s)
{
    for (int k = 0; k < s->n_in + s->n_out; ++k)
        free(s->a[k]);
}

double bench_stream_gbs(int64_t n, int n_in, int n_out, int reps)
{
    bench_stream s;
    bench_stream_init(&s, n, n_in, n_out);
    const double gbs = bench_stream_sample(&s, reps);
    bench_stream_free(&s);
    return gbs;
}

bool bench_list_has(const char *list, const char *name)
{
    if (!list)
        return true;
    const size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return true;
    return false;
}

double bench_median_of(double (*once)(void *arg), void *arg, int reps)
{
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    for (int w = 0; w < 2; ++w)
        once(arg);
    for (int r = 0; r < reps; ++r)
        t[r] = once(arg);
    const double m = bench_median(t, reps);
    free(t);
    return m;
}

/* One copy, timed as an iteration is (bench_copy_gbs). */
typedef struct timed_copy {
    dc_ctx *ctx;
    dc_tensor *dst;
    const dc_tensor *src;
} timed_copy;

static void copy_die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

static double copy_timed(void *arg)
{
    const timed_copy *t = arg;
    if (dc_ctx_synchronize(t->ctx) != DC_OK)
        copy_die(t->ctx, "synchronize");
    const double t0 = bench_now();
    if (dc_tensor_copy(t->dst, t->src) != DC_OK || dc_ctx_synchronize(t->ctx) != DC_OK)
        copy_die(t->ctx, "copy");
    return bench_now() - t0;
}

double bench_copy_gbs(dc_ctx *ctx, const dc_tensor *src, int reps)
{
    dc_tensor *dst = dc_tensor_new(ctx, dc_tensor_dtype(src), dc_tensor_ndim(src), dc_tensor_shape(src));
    if (!dst)
        copy_die(ctx, "copy buffer");
    timed_copy t = {ctx, dst, src};
    const double s = bench_median_of(copy_timed, &t, reps);
    dc_tensor_free(dst);
    const double bytes = 2.0 * (double)dc_tensor_numel(src) * (dc_tensor_dtype(src) == DC_F32 ? 4.0 : 8.0);
    return bytes / s / 1e9;
}

static void step_die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

double bench_step_once(const bench_step *s, bool gradient, dc_tensor **out)
{
    dc_tape_reset(s->tape);
    for (int p = 0; p < 2; ++p)
        dc_tensor_zero_grad(s->params[p]);
    if (dc_ctx_synchronize(s->ctx) != DC_OK)
        step_die(s->ctx, "synchronize");
    dc_tape_set_recording(s->tape, gradient);
    const double t0 = bench_now();
    dc_tensor *y = s->run(s->tape, s->arg);
    if (!y)
        step_die(s->ctx, "the op");
    if (gradient && dc_backward_with(s->tape, y, s->seed(s->arg)) != DC_OK)
        step_die(s->ctx, "backward");
    if (dc_ctx_synchronize(s->ctx) != DC_OK)
        step_die(s->ctx, "synchronize");
    const double t = bench_now() - t0;
    if (out)
        *out = y;
    return t;
}

void bench_step_medians(const bench_step *s, int reps, double *primal, double *gradient)
{
    double *t = malloc(2 * (size_t)reps * sizeof *t);
    if (!t) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    for (int w = 0; w < 2; ++w) {
        bench_step_once(s, false, NULL);
        bench_step_once(s, true, NULL);
    }
    for (int r = 0; r < reps; ++r) {
        t[r] = bench_step_once(s, false, NULL);
        t[reps + r] = bench_step_once(s, true, NULL);
    }
    *primal = bench_median(t, reps);
    *gradient = bench_median(t + reps, reps);
    free(t);
}
