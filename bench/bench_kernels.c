/* What the c-update's kernels cost in arithmetic alone: each instantiation
 * (primal, dual, recompute adjoint; uniform and varying control) run over
 * arrays that stay in L1, one thread, per branch taken; and the scalar math
 * they are made of. Beside the bandwidth figures of bench_cupdate, this says
 * whether a loop is bound by memory or by arithmetic.
 *
 *   bench_kernels [--reps N]                                                 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "cupdate_fused.h"
#include "dual/scalar_math.h"

DC_BFN_DECLARE(hmlstm_update_c);

enum { N = 2048 };

/* The hand-fused loop (forward and gradients in one pass) in the kernels'
 * signature, on the same arrays: in[0..5] z, zb, c, f, i, g, in[6] the
 * adjoint; out[0..4]. */
static void fused_kernel(int64_t n, const void *const *in, void *const *out, bool uniform)
{
    const float *const *x = (const float *const *)in;
    float *const *y = (float *const *)out;
    cupdate_fused_row(n, uniform, x[0], x[1], x[2], x[3], x[4], x[5], x[6], y[0], y[1], y[2], y[3], y[4]);
}
static void fused_uniform(int64_t n, const void *const *in, void *const *out, const void *arg)
{
    (void)arg;
    fused_kernel(n, in, out, true);
}
static void fused_varying(int64_t n, const void *const *in, void *const *out, const void *arg)
{
    (void)arg;
    fused_kernel(n, in, out, false);
}

static double time_kernel(dc_bfn_cpu_kernel k, int64_t n, const void *const *in, void *const *out, int reps)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; ++r) {
        const double t0 = bench_now();
        for (int i = 0; i < 200; ++i)
            k(n, in, out, NULL);
        t[r] = (bench_now() - t0) / 200;
    }
    const double med = bench_median(t, reps);
    free(t);
    return med / (double)n * 1e9;
}

#define MATH_LOOP(name, expr)                                                                      \
    static void name(const float *restrict a, float *restrict b, int n)                            \
    {                                                                                              \
        for (int e = 0; e < n; ++e) {                                                              \
            const float x = a[e];                                                                  \
            b[e] = (expr);                                                                         \
        }                                                                                          \
    }
MATH_LOOP(loop_exp, dc_exp_f32(x))
MATH_LOOP(loop_expm1, dc_expm1_f32(x))
MATH_LOOP(loop_tanh, dc_tanh_f32(x))
MATH_LOOP(loop_sigmoid, dc_sigmoid_f32(x))
MATH_LOOP(loop_log, dc_log_f32(x + 5.0f))
MATH_LOOP(loop_div, 1.0f / (x + 5.0f))

static double time_math(void (*f)(const float *, float *, int), const float *a, float *b, int reps)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; ++r) {
        const double t0 = bench_now();
        for (int i = 0; i < 2000; ++i) {
            f(a, b, N);
            __asm__ volatile("" : : "r"(b) : "memory");
        }
        t[r] = (bench_now() - t0) / 2000;
    }
    const double med = bench_median(t, reps);
    free(t);
    return med / N * 1e9;
}

int main(int argc, char **argv)
{
    int reps = 21;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc && atoi(argv[a + 1]) > 0) {
            reps = atoi(argv[++a]);
        } else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    const dc_bfn *fn = DC_BFN_REF(hmlstm_update_c);
    float *buf[16];
    for (int k = 0; k < 16; ++k) {
        buf[k] = aligned_alloc(64, N * sizeof(float));
        bench_fill_uniform(buf[k], N, -2.0f, 2.0f, 3 + (uint64_t)k);
    }
    printf("# c-update kernels, arithmetic only (%d elements, L1 and L2, one thread), float32\n", N);
    bench_print_machine();
    printf("\n");
    printf("| control | kernel | uniform ns/elem | varying ns/elem |\n|---|---|---:|---:|\n");
    const char *names[4] = {"FLUSH", "COPY", "UPDATE", "random per element"};
    for (int c = 0; c < 4; ++c) {
        /* z, zb: the branch taken, or random */
        uint64_t s = 17;
        for (int e = 0; e < N; ++e) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[0][e] = c == 0 ? 1.0f : c < 3 ? 0.0f : (float)(s & 1);
            buf[1][e] = c == 1 ? 0.0f : c == 2 ? 1.0f : (float)((s >> 1) & 1);
        }
        const void *in[8];
        void *out[8];
        for (int j = 0; j < 8; ++j) {
            in[j] = buf[j];
            out[j] = buf[8 + j];
        }
        const char *kinds[3] = {"primal", "dual (store)", "adjoint (recompute)"};
        for (int k = 0; k < 3; ++k) {
            const dc_bfn_cpu_kernel *v =
                k == 0 ? fn->cpu[DC_BFN_F32].primal : k == 1 ? fn->cpu[DC_BFN_F32].dual : fn->cpu[DC_BFN_F32].adjoint;
            char uniform[32] = "n/a";
            if (c < 3)
                snprintf(uniform, sizeof uniform, "%.2f", time_kernel(v[DC_BFN_UNIFORM], N, in, out, reps));
            printf("| %s | %s | %s | %.2f |\n", names[c], kinds[k], uniform, time_kernel(v[DC_BFN_VARYING], N, in, out, reps));
        }
        char uniform[32] = "n/a";
        if (c < 3)
            snprintf(uniform, sizeof uniform, "%.2f", time_kernel(fused_uniform, N, in, out, reps));
        printf("| %s | hand-fused (forward and gradients) | %s | %.2f |\n", names[c], uniform,
               time_kernel(fused_varying, N, in, out, reps));
    }
    printf("\n| scalar function | ns/elem |\n|---|---:|\n");
    printf("| exp | %.3f |\n", time_math(loop_exp, buf[2], buf[8], reps));
    printf("| expm1 | %.3f |\n", time_math(loop_expm1, buf[2], buf[8], reps));
    printf("| tanh | %.3f |\n", time_math(loop_tanh, buf[2], buf[8], reps));
    printf("| sigmoid | %.3f |\n", time_math(loop_sigmoid, buf[2], buf[8], reps));
    printf("| log | %.3f |\n", time_math(loop_log, buf[2], buf[8], reps));
    printf("| division | %.3f |\n", time_math(loop_div, buf[2], buf[8], reps));
    for (int k = 0; k < 16; ++k)
        free(buf[k]);
    return 0;
}
