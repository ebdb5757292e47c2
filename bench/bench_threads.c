/* Thread scaling on the CPU: the HM-LSTM training step (forward and
 * backward, the demo's default sizes) and the c-update at one size, at 1, 2,
 * 4, ... threads up to the cores this process may run on, then at the core
 * count and at four times it (oversubscribed), in one run.
 *
 *   bench_threads [--threads 1,2,4,...] [--reps N] [--dims 1024] [--corpus PATH]
 *
 * Each thread count gets its own context and OpenMP count
 * (omp_set_num_threads), as OMP_NUM_THREADS sets for a program. The
 * oversubscribed count runs twice: as a program started with that
 * OMP_NUM_THREADS gets it (a context with num_threads 0, which takes no more
 * threads than there are CPUs), and given to the context
 * (dc_ctx_options.num_threads), which takes it as given. The variants take
 * turns within each round, so that a change of the machine's speed falls on
 * all of them alike; medians of the rounds. */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include <dualcast.h>

#include "bench_common.h"
#include "cupdate_fused.h"
#include "cupdate_problem.h"
#include "hmlstm_problem.h"

DC_BFN_DECLARE(hmlstm_update_c);

enum { STEP_RECOMPUTE, STEP_STORE, STEP_PURE, CUP_RECOMPUTE, CUP_PURE, CUP_FUSED, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {
    "step, mixed recompute", "step, mixed store", "step, pure reverse",
    "c-update, mixed recompute", "c-update, pure reverse", "c-update, hand-fused"};

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_threads: %s: %s\n", what, ctx ? dc_last_error(ctx) : "");
    exit(1);
}

/* CPUs this process may run on. */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    return omp_get_num_procs();
}

/* The c-update at dims x dims with control per row, as bench_cupdate poses it. */
typedef struct cupdate {
    int64_t dims;
    dc_tensor *z, *zb, *x[4], *ones;
    float *out, *grad[4];
} cupdate;

static void cupdate_init(cupdate *c, dc_ctx *ctx, int64_t dims)
{
    memset(c, 0, sizeof *c);
    c->dims = dims;
    const int64_t shape[2] = {dims, dims}, cshape[2] = {dims, 1};
    float *vz = malloc((size_t)dims * sizeof *vz), *vzb = malloc((size_t)dims * sizeof *vzb);
    float *tmp = malloc((size_t)(dims * dims) * sizeof *tmp);
    if (!vz || !vzb || !tmp)
        die(NULL, "out of memory");
    cupdate_control_values(dims, vz, vzb);
    c->z = dc_tensor_from_host(ctx, DC_F32, 2, cshape, vz);
    c->zb = dc_tensor_from_host(ctx, DC_F32, 2, cshape, vzb);
    for (int k = 0; k < 4; ++k) {
        bench_fill_uniform(tmp, dims * dims, -2.0f, 2.0f, 11 + (uint64_t)k);
        c->x[k] = dc_tensor_from_host(ctx, DC_F32, 2, shape, tmp);
        if (!c->x[k])
            die(ctx, "c-update inputs");
        dc_tensor_set_requires_grad(c->x[k], true);
    }
    for (int64_t e = 0; e < dims * dims; ++e)
        tmp[e] = 1.0f;
    c->ones = dc_tensor_from_host(ctx, DC_F32, 2, shape, tmp);
    if (!c->z || !c->zb || !c->ones)
        die(ctx, "c-update inputs");
    free(vz);
    free(vzb);
    free(tmp);
    c->out = aligned_alloc(64, (size_t)(dims * dims) * sizeof(float));
    for (int k = 0; k < 4; ++k)
        c->grad[k] = aligned_alloc(64, (size_t)(dims * dims) * sizeof(float));
}

static void cupdate_free(cupdate *c)
{
    dc_tensor_free(c->z);
    dc_tensor_free(c->zb);
    dc_tensor_free(c->ones);
    for (int k = 0; k < 4; ++k) {
        dc_tensor_free(c->x[k]);
        free(c->grad[k]);
    }
    free(c->out);
}

/* One forward and backward of the c-update; seconds. */
static double cupdate_run(cupdate *c, dc_ctx *ctx, dc_tape *tape, int variant)
{
    const double t0 = bench_now();
    if (variant == CUP_FUSED) {
        float *d[4];
        for (int k = 0; k < 4; ++k)
            d[k] = dc_tensor_data(c->x[k]);
        cupdate_fused(c->dims, c->dims, true, dc_tensor_data(c->z), dc_tensor_data(c->zb), d[0], d[1], d[2], d[3],
                      dc_tensor_data(c->ones), c->out, c->grad[0], c->grad[1], c->grad[2], c->grad[3]);
        return bench_now() - t0;
    }
    dc_tape_reset(tape);
    for (int k = 0; k < 4; ++k)
        dc_tensor_zero_grad(c->x[k]);
    dc_tensor *out = NULL;
    if (variant == CUP_PURE) {
        out = cupdate_pure(tape, c->z, c->zb, c->x);
    } else {
        dc_tensor *in[6] = {c->z, c->zb, c->x[0], c->x[1], c->x[2], c->x[3]};
        if (dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &out, DC_PARTIALS_RECOMPUTE) != DC_OK)
            out = NULL;
    }
    if (!out || dc_backward_with(tape, out, c->ones) != DC_OK)
        die(ctx, "c-update");
    return bench_now() - t0;
}

/* Medians in seconds of every variant at one OpenMP thread count, given to
 * the context too or not. */
static void measure(int threads, bool to_context, int reps, int64_t dims, const char *corpus, double *median)
{
    omp_set_num_threads(threads);
    dc_ctx_options o = dc_ctx_options_default();
    o.num_threads = to_context ? threads : 0;
    o.backend = DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx)
        die(NULL, dc_last_error(NULL));
    char err[512];
    hm_problem hp;
    if (hm_problem_init(&hp, ctx, corpus, err, sizeof err) != 0) {
        fprintf(stderr, "bench_threads: %s\n", err);
        exit(1);
    }
    cupdate cu;
    cupdate_init(&cu, ctx, dims);
    dc_tape *tape[N_VARIANTS];
    double *t[N_VARIANTS];
    for (int v = 0; v < N_VARIANTS; ++v) {
        tape[v] = dc_tape_new(ctx);
        t[v] = malloc((size_t)reps * sizeof *t[v]);
        if (!tape[v] || !t[v])
            die(ctx, "out of memory");
    }
    double loss[3] = {0, 0, 0};
    for (int r = -2; r < reps; ++r) { /* two warm-up rounds: arenas, pages, thread pools */
        for (int v = 0; v < N_VARIANTS; ++v) {
            double seconds;
            if (v <= STEP_PURE) {
                const hm_cell_kind cell = v == STEP_PURE ? HM_CELL_PURE : HM_CELL_MIXED;
                const dc_partials_policy policy = v == STEP_STORE ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE;
                const double t0 = bench_now();
                if (hm_problem_step(&hp, tape[v], cell, policy, &loss[v], NULL, NULL) != DC_OK)
                    die(ctx, variant_names[v]);
                seconds = bench_now() - t0;
            } else {
                seconds = cupdate_run(&cu, ctx, tape[v], v);
            }
            if (r >= 0)
                t[v][r] = seconds;
        }
    }
    /* the three cells compute the same step */
    if (fabs(loss[STEP_STORE] - loss[STEP_RECOMPUTE]) > 1e-5 || fabs(loss[STEP_PURE] - loss[STEP_RECOMPUTE]) > 1e-5) {
        fprintf(stderr, "bench_threads: losses differ: %.7f %.7f %.7f\n", loss[0], loss[1], loss[2]);
        exit(1);
    }
    for (int v = 0; v < N_VARIANTS; ++v) {
        median[v] = bench_median(t[v], reps);
        free(t[v]);
        dc_tape_free(tape[v]);
    }
    cupdate_free(&cu);
    hm_problem_free(&hp);
    dc_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    int counts[32], n_counts = 0, reps = 7;
    int64_t dims = 1024;
    const char *corpus = NULL;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc) {
            for (char *tok = strtok(argv[++a], ","); tok && n_counts < 32; tok = strtok(NULL, ","))
                counts[n_counts++] = atoi(tok);
        } else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--dims") == 0 && a + 1 < argc) {
            dims = atoll(argv[++a]);
        } else if (strcmp(argv[a], "--corpus") == 0 && a + 1 < argc) {
            corpus = argv[++a];
        } else {
            fprintf(stderr, "usage: %s [--threads 1,2,4,...] [--reps N] [--dims 1024] [--corpus PATH]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || dims < 3)
        return fprintf(stderr, "bench_threads: reps >= 1 and dims >= 3\n"), 2;
    const int cpus = usable_cpus();
    if (n_counts == 0) {
        for (int n = 1; n < cpus && n_counts < 29; n *= 2)
            counts[n_counts++] = n;
        counts[n_counts++] = cpus;
        counts[n_counts++] = 4 * cpus;
        counts[n_counts++] = 4 * cpus;
    }
    for (int i = 0; i < n_counts; ++i)
        if (counts[i] < 1)
            return fprintf(stderr, "bench_threads: thread counts must be positive\n"), 2;

    printf("# Thread scaling: HM-LSTM training step (3 x 128, batch 32 x 64) and c-update %lld^2 (control per row), "
           "forward + backward, float32\n",
           (long long)dims);
    bench_print_machine();
    printf("CPUs this process may run on: %d; median of %d rounds per thread count\n\n", cpus, reps);
    printf("| threads |");
    for (int v = 0; v < N_VARIANTS; ++v)
        printf(" %s ms |", variant_names[v]);
    printf("\n|---:|");
    for (int v = 0; v < N_VARIANTS; ++v)
        printf("---:|");
    printf("\n");
    double first[N_VARIANTS];
    for (int i = 0; i < n_counts; ++i) {
        double m[N_VARIANTS];
        /* an oversubscribed count seen before: the second time, given to the context */
        bool seen = false;
        for (int j = 0; j < i; ++j)
            seen = seen || counts[j] == counts[i];
        const bool to_context = counts[i] <= cpus || seen;
        measure(counts[i], to_context, reps, dims, corpus, m);
        if (i == 0)
            memcpy(first, m, sizeof first);
        if (counts[i] <= cpus)
            printf("| %d |", counts[i]);
        else
            printf("| %d, oversubscribed, %s |", counts[i],
                   to_context ? "given to the context" : "OMP_NUM_THREADS only (context default)");
        for (int v = 0; v < N_VARIANTS; ++v)
            printf(" %.2f (%.2fx) |", 1e3 * m[v], first[v] / m[v]);
        printf("\n");
        fflush(stdout);
    }
    printf("\n(x): speed against the first row; above 1 is faster.\n");
    return 0;
}
