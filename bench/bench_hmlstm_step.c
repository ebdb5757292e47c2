/* The HM-LSTM training step (the demo's sizes: 3 x 128, batch 32 x 64; the
 * problem of bench/hmlstm_problem.h) on the CPU and, where there is one, on
 * the GPU, in one run: dualcast's mixed cell (store and recompute policies)
 * and pure reverse cell, each run eagerly and, on CUDA, replayed as one
 * CUDA graph. A step is forward, backward, gradient clipping at norm 1 and
 * an Adam update. Every variant is timed the same way:
 *   - step ms: the median wall time of one step, from a device at rest to
 *     its loss read back on the host;
 *   - back-to-back ms: wall time of `burst` steps queued one after the other
 *     (the device synchronized once at the end), per step;
 * with the kernels a step launches, the tape's peak bytes and (CUDA) the
 * device memory reserved. Prints a markdown table for bench/RESULTS.md.
 *
 * usage: bench_hmlstm_step [--device cpu|cuda|both] [--reps N] [--burst N] [--corpus FILE] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "hmlstm_problem.h"

typedef struct variant {
    const char *name;
    hm_cell_kind cell;
    dc_partials_policy policy;
} variant;

static const variant variants[] = {
    {"mixed, recompute", HM_CELL_MIXED, DC_PARTIALS_RECOMPUTE},
    {"mixed, store", HM_CELL_MIXED, DC_PARTIALS_STORE},
    {"pure reverse", HM_CELL_PURE, DC_PARTIALS_STORE},
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

/* One training step of a variant, as a step function. */
typedef struct step_job {
    hm_problem *p;
    dc_optimizer *adam;
    dc_tape *tape;
    hm_cell_kind cell;
    dc_partials_policy policy;
    dc_tensor *loss;
} step_job;

static dc_status train_step(void *user)
{
    step_job *job = user;
    hm_problem *p = job->p;
    dc_status st = hm_problem_forward(p, job->tape, job->cell, job->policy, &job->loss);
    if (st == DC_OK)
        st = dc_backward(job->tape, job->loss);
    if (st == DC_OK)
        st = dc_clip_grad_norm(p->ctx, p->model->n_params, p->model->params, 1.0, NULL);
    if (st == DC_OK)
        st = dc_optimizer_step(job->adam);
    return st;
}

typedef struct result {
    double step_ms, burst_ms, tape_mib, device_mib;
    long long kernels;
    const char *fallback;
} result;

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_hmlstm_step: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

static void run_once(dc_ctx *ctx, step_job *job, dc_graph *graph)
{
    if ((graph ? dc_graph_replay(graph) : train_step(job)) != DC_OK)
        die(ctx, "step");
}

static result measure(hm_problem *p, const variant *v, bool use_graph, int reps, int burst)
{
    dc_ctx *ctx = p->ctx;
    result res = {0, 0, 0, 0, 0, NULL};
    step_job job = {p, dc_optimizer_adam(ctx, p->model->n_params, p->model->params, NULL), dc_tape_new(ctx), v->cell,
                    v->policy, NULL};
    if (!job.adam || !job.tape)
        die(ctx, "setup");
    dc_graph *graph = NULL;
    /* warm-up: the tape's memory grows in the first step; the graph is
     * captured in the second */
    run_once(ctx, &job, NULL);
    if (use_graph) {
        if (!(graph = dc_graph_capture(ctx, train_step, &job, NULL)))
            die(ctx, "capture");
        res.fallback = dc_graph_fallback(graph) ? "the step runs eagerly" : NULL;
    } else {
        run_once(ctx, &job, NULL);
    }
    double loss = 0;
    if (dc_tensor_item(job.loss, &loss) != DC_OK || !isfinite(loss))
        die(ctx, "loss");
    const uint64_t before = dc_ctx_device_counters(ctx).kernel_launches;
    run_once(ctx, &job, graph);
    res.kernels = graph && !res.fallback ? (long long)dc_graph_kernels(graph)
                                         : (long long)(dc_ctx_device_counters(ctx).kernel_launches - before);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t)
        die(ctx, "out of memory");
    for (int i = 0; i < reps; ++i) {
        if (dc_ctx_synchronize(ctx) != DC_OK)
            die(ctx, "synchronize");
        const double t0 = bench_now();
        run_once(ctx, &job, graph);
        if (dc_tensor_item(job.loss, &loss) != DC_OK)
            die(ctx, "loss");
        t[i] = bench_now() - t0;
    }
    res.step_ms = 1e3 * bench_median(t, reps);
    free(t);
    if (dc_ctx_synchronize(ctx) != DC_OK)
        die(ctx, "synchronize");
    const double t0 = bench_now();
    for (int i = 0; i < burst; ++i)
        run_once(ctx, &job, graph);
    if (dc_ctx_synchronize(ctx) != DC_OK)
        die(ctx, "synchronize");
    res.burst_ms = 1e3 * (bench_now() - t0) / burst;
    res.tape_mib = (double)dc_tape_peak_bytes(job.tape) / (1 << 20);
    res.device_mib = (double)dc_ctx_device_memory(ctx).bytes_reserved / (1 << 20);
    dc_graph_free(graph);
    dc_tape_free(job.tape);
    dc_optimizer_free(job.adam);
    return res;
}

static int usage(FILE *f)
{
    fprintf(f, "usage: bench_hmlstm_step [--device cpu|cuda|both] [--reps N (20)] [--burst N (20)] [--corpus FILE]\n");
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    const char *device = "both", *corpus = NULL;
    int reps = 20, burst = 20;
    for (int a = 1; a < argc; ++a) {
        const bool has_value = a + 1 < argc;
        if (strcmp(argv[a], "--help") == 0)
            return usage(stdout);
        if (strcmp(argv[a], "--device") == 0 && has_value)
            device = argv[++a];
        else if (strcmp(argv[a], "--reps") == 0 && has_value && (reps = atoi(argv[++a])) > 0)
            continue;
        else if (strcmp(argv[a], "--burst") == 0 && has_value && (burst = atoi(argv[++a])) > 0)
            continue;
        else if (strcmp(argv[a], "--corpus") == 0 && has_value)
            corpus = argv[++a];
        else
            return usage(stderr);
    }
    const bool want_cpu = strcmp(device, "cpu") == 0 || strcmp(device, "both") == 0;
    const bool want_cuda = strcmp(device, "cuda") == 0 || strcmp(device, "both") == 0;
    if (!want_cpu && !want_cuda)
        return usage(stderr);
    bench_print_machine();
    printf("\nHM-LSTM training step (forward, backward, clip, Adam), 3 x 128 units, batch 32 x 64: median of %d "
           "synchronized steps, and %d steps back to back\n\n",
           reps, burst);
    printf("| device | cell | run | step ms | back-to-back ms per step | kernels per step | peak tape MiB | device "
           "MiB reserved |\n|---|---|---|---:|---:|---:|---:|---:|\n");
    for (int b = 0; b < 2; ++b) {
        if ((b == 0 && !want_cpu) || (b == 1 && !want_cuda))
            continue;
        dc_ctx_options o = dc_ctx_options_default();
        o.backend = b == 0 ? DC_BACKEND_CPU : DC_BACKEND_CUDA;
        o.seed = 1;
        dc_ctx *ctx = dc_ctx_new(&o, NULL);
        if (!ctx) {
            printf("\n(no %s context: %s)\n", b == 0 ? "CPU" : "CUDA", dc_last_error(NULL));
            if (b == 1 && strcmp(device, "cuda") == 0)
                return 1;
            continue;
        }
        hm_problem p;
        char err[512];
        if (hm_problem_init(&p, ctx, corpus, err, sizeof err) != 0) {
            fprintf(stderr, "bench_hmlstm_step: %s\n", err);
            return 1;
        }
        double eager_ms[N_VARIANTS] = {0}, graph_ms[N_VARIANTS] = {0};
        for (int v = 0; v < N_VARIANTS; ++v)
            for (int g = 0; g < (b == 1 ? 2 : 1); ++g) {
                const result r = measure(&p, &variants[v], g == 1, reps, burst);
                (g ? graph_ms : eager_ms)[v] = r.step_ms;
                char dev[64] = "-", kernels[32] = "-";
                if (b == 1) {
                    snprintf(dev, sizeof dev, "%.0f", r.device_mib);
                    snprintf(kernels, sizeof kernels, "%lld", r.kernels);
                }
                printf("| %s | %s | %s%s | %.2f | %.2f | %s | %.1f | %s |\n", dc_ctx_device_name(ctx),
                       variants[v].name, g ? "graph replay" : "eager", r.fallback ? " (eagerly: no capture)" : "",
                       r.step_ms, r.burst_ms, kernels, r.tape_mib, dev);
            }
        printf("\n%s: pure reverse / mixed recompute, step time: %.2fx eager", b == 0 ? "CPU" : "CUDA",
               eager_ms[2] / eager_ms[0]);
        if (b == 1)
            printf(", %.2fx graph replay; eager / graph replay, mixed recompute: %.2fx", graph_ms[2] / graph_ms[0],
                   eager_ms[0] / graph_ms[0]);
        printf("\n\n");
        hm_problem_free(&p);
        dc_ctx_free(ctx);
    }
    return 0;
}
