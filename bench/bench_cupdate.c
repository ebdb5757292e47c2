/* The paper's c-update benchmark on the CPU: forward plus backward with an
 * all-ones adjoint, mixed mode (store and recompute policies) against pure
 * reverse mode (one tape node per primitive) against a hand-fused loop, with
 * achieved bandwidth beside the machine's measured streaming bandwidth.
 * That bandwidth is sampled again before and after each table (dims and
 * layout): on a shared machine it drifts within a run, and each table's
 * percentages use the bandwidth measured around it.
 *
 *   bench_cupdate [--dims 512,1024,2048,4096] [--layout row,column] [--reps N]
 *
 * Control varies along the slow dimension ("row": z has shape [dims, 1]) or
 * along the fast one ("column": [1, dims]), randomly, with the first three
 * rows or columns forced to FLUSH, COPY and UPDATE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "cupdate_problem.h"
#include "cupdate_fused.h"

DC_BFN_DECLARE(hmlstm_update_c);

enum { V_STORE, V_RECOMPUTE, V_PURE, V_FUSED, V_COUNT };
static const char *const variant_names[V_COUNT] = {"mixed, store", "mixed, recompute", "pure reverse", "hand-fused"};

/* Bytes per element each pass must move (float32; control vectors are
 * negligible): store writes 4 partials forward and reads them back. */
static const double fwd_bytes[V_COUNT] = {36, 20, 0, 40};
static const double bwd_bytes[V_COUNT] = {36, 36, 0, 0};

typedef struct problem {
    int64_t dims;
    bool per_row;
    dc_ctx *ctx;
    dc_tensor *z, *zb, *x[4], *ones;
    float *raw_out, *raw_grad[4];
} problem;

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_cupdate: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

static void make_problem(problem *p, dc_ctx *ctx, int64_t dims, bool per_row)
{
    memset(p, 0, sizeof *p);
    p->dims = dims;
    p->per_row = per_row;
    p->ctx = ctx;
    int64_t shape[2] = {dims, dims}, cshape[2] = {per_row ? dims : 1, per_row ? 1 : dims};
    float *vz = malloc((size_t)dims * sizeof *vz), *vzb = malloc((size_t)dims * sizeof *vzb);
    cupdate_control_values(dims, vz, vzb);
    p->z = dc_tensor_from_host(ctx, DC_F32, 2, cshape, vz);
    p->zb = dc_tensor_from_host(ctx, DC_F32, 2, cshape, vzb);
    free(vz);
    free(vzb);
    const size_t n = (size_t)(dims * dims);
    float *tmp = malloc(n * sizeof *tmp);
    for (int k = 0; k < 4; ++k) {
        bench_fill_uniform(tmp, (int64_t)n, -2.0f, 2.0f, 11 + (uint64_t)k);
        p->x[k] = dc_tensor_from_host(ctx, DC_F32, 2, shape, tmp);
        if (!p->x[k])
            die(ctx, "inputs");
        dc_tensor_set_requires_grad(p->x[k], true);
    }
    for (size_t e = 0; e < n; ++e)
        tmp[e] = 1.0f;
    p->ones = dc_tensor_from_host(ctx, DC_F32, 2, shape, tmp);
    free(tmp);
    if (!p->z || !p->zb || !p->ones)
        die(ctx, "inputs");
    p->raw_out = aligned_alloc(64, n * sizeof(float));
    for (int k = 0; k < 4; ++k)
        p->raw_grad[k] = aligned_alloc(64, n * sizeof(float));
}

static void free_problem(problem *p)
{
    dc_tensor_free(p->z);
    dc_tensor_free(p->zb);
    dc_tensor_free(p->ones);
    for (int k = 0; k < 4; ++k) {
        dc_tensor_free(p->x[k]);
        free(p->raw_grad[k]);
    }
    free(p->raw_out);
}

/* One forward and backward of a variant; times in seconds. */
static void run_once(problem *p, dc_tape *tape, int variant, double *t_fwd, double *t_bwd)
{
    if (variant == V_FUSED) {
        float *d[4];
        for (int k = 0; k < 4; ++k)
            d[k] = dc_tensor_data(p->x[k]);
        double t0 = bench_now();
        cupdate_fused(p->dims, p->dims, p->per_row, dc_tensor_data(p->z), dc_tensor_data(p->zb), d[0], d[1], d[2],
                      d[3], dc_tensor_data(p->ones), p->raw_out, p->raw_grad[0], p->raw_grad[1], p->raw_grad[2],
                      p->raw_grad[3]);
        *t_fwd = bench_now() - t0;
        *t_bwd = 0;
        return;
    }
    dc_tape_reset(tape);
    for (int k = 0; k < 4; ++k)
        dc_tensor_zero_grad(p->x[k]);
    double t0 = bench_now();
    dc_tensor *out;
    if (variant == V_PURE) {
        out = cupdate_pure(tape, p->z, p->zb, p->x);
    } else {
        dc_tensor *in[6] = {p->z, p->zb, p->x[0], p->x[1], p->x[2], p->x[3]};
        out = NULL;
        if (dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &out,
                                variant == V_STORE ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE) != DC_OK)
            out = NULL;
    }
    if (!out)
        die(p->ctx, "forward");
    double t1 = bench_now();
    if (dc_backward_with(tape, out, p->ones) != DC_OK)
        die(p->ctx, "backward");
    double t2 = bench_now();
    *t_fwd = t1 - t0;
    *t_bwd = t2 - t1;
}

/* Largest relative difference between a variant's gradient and the
 * hand-fused one, as a check that every variant computes the same thing. */
static double max_grad_diff(problem *p)
{
    const int64_t n = p->dims * p->dims;
    double worst = 0;
    for (int k = 0; k < 4; ++k) {
        const dc_tensor *g = dc_tensor_grad(p->x[k]);
        const float *gv = g ? dc_tensor_data((dc_tensor *)g) : NULL;
        for (int64_t e = 0; e < n; ++e) {
            double a = gv ? gv[e] : 0.0, b = p->raw_grad[k][e];
            double d = fabs(a - b) / fmax(1e-6, fabs(b));
            if (d > worst)
                worst = d;
        }
    }
    return worst;
}

typedef struct result {
    double fwd, bwd, total; /* medians, seconds */
    double peak_mib;        /* tape memory */
    double grad_diff;       /* against the hand-fused gradients */
} result;

/* Every variant once per round, rounds repeated: background load on the
 * machine then falls on all variants alike. Medians per variant. */
static void measure_all(problem *p, dc_ctx *ctx, int reps, result *res)
{
    /* the hand-fused variant runs first in each round: its gradients are
     * the reference the others are compared with */
    const int order[V_COUNT] = {V_FUSED, V_STORE, V_RECOMPUTE, V_PURE};
    dc_tape *tapes[V_COUNT];
    bench_samples t[V_COUNT];
    for (int v = 0; v < V_COUNT; ++v) {
        tapes[v] = dc_tape_new(ctx);
        if (!tapes[v])
            die(ctx, "out of memory");
        bench_samples_init(&t[v], reps);
        res[v].grad_diff = 0;
    }
    for (int r = -1; r < reps; ++r) { /* round -1 warms up: arenas, pages, caches */
        for (int oi = 0; oi < V_COUNT; ++oi) {
            const int v = order[oi];
            double f, b;
            run_once(p, tapes[v], v, &f, &b);
            if (v != V_FUSED)
                res[v].grad_diff = fmax(res[v].grad_diff, max_grad_diff(p));
            if (r >= 0)
                bench_samples_add(&t[v], f, b);
        }
    }
    for (int v = 0; v < V_COUNT; ++v) {
        res[v].peak_mib = v == V_FUSED ? 0.0 : (double)dc_tape_peak_bytes(tapes[v]) / (1 << 20);
        bench_samples_medians(&t[v], &res[v].fwd, &res[v].bwd, &res[v].total);
        dc_tape_free(tapes[v]);
        bench_samples_free(&t[v]);
    }
}

static void format_gbs(char *gbs, char *pct, size_t size, double bytes, double seconds, double stream)
{
    gbs[0] = pct[0] = '\0';
    if (bytes <= 0 || seconds <= 0)
        return;
    const double g = bytes / seconds / 1e9;
    snprintf(gbs, size, "%.1f", g);
    snprintf(pct, size, "%.0f%%", 100 * g / stream);
}

static void print_rows(const problem *p, const result *res, double stream)
{
    char stream_col[32];
    snprintf(stream_col, sizeof stream_col, "%.1f", stream);
    const double n = (double)(p->dims * p->dims);
    for (int v = 0; v < V_COUNT; ++v) {
        char fg[32], fs[32], bg[32], bs[32];
        format_gbs(fg, fs, sizeof fg, n * fwd_bytes[v], v == V_FUSED ? res[v].total : res[v].fwd, stream);
        format_gbs(bg, bs, sizeof bg, n * bwd_bytes[v], res[v].bwd, stream);
        printf("| %lld | per %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %.2fx | %.2fx | %.0f | %.1e |\n",
               (long long)p->dims, p->per_row ? "row" : "column", variant_names[v], 1e3 * res[v].fwd,
               1e3 * res[v].bwd, 1e3 * res[v].total, fg, bg, stream_col, fs, bs, res[V_PURE].total / res[v].total,
               res[v].total / res[V_FUSED].total, res[v].peak_mib, res[v].grad_diff);
    }
    fflush(stdout);
}

static int reps_for(int64_t dims, int asked)
{
    if (asked > 0)
        return asked;
    return dims <= 512 ? 60 : dims <= 1024 ? 30 : dims <= 2048 ? 15 : 9;
}

int main(int argc, char **argv)
{
    int64_t dims_list[8] = {512, 1024, 2048, 4096};
    int n_dims = 4, reps_asked = 0;
    bool layouts[2] = {true, true}; /* row, column */
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--dims") == 0 && a + 1 < argc) {
            n_dims = 0;
            for (char *tok = strtok(argv[++a], ","); tok && n_dims < 8; tok = strtok(NULL, ","))
                dims_list[n_dims++] = atoll(tok);
        } else if (strcmp(argv[a], "--layout") == 0 && a + 1 < argc) {
            const char *l = argv[++a];
            layouts[0] = strstr(l, "row") != NULL;
            layouts[1] = strstr(l, "column") != NULL;
        } else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps_asked = atoi(argv[++a]);
        } else {
            fprintf(stderr, "usage: %s [--dims 512,1024,2048,4096] [--layout row,column] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    for (int d = 0; d < n_dims; ++d)
        if (dims_list[d] < 4 || dims_list[d] > 16384) {
            fprintf(stderr, "bench_cupdate: dims %lld outside 4..16384\n", (long long)dims_list[d]);
            return 2;
        }

    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx)
        die(NULL, "context");
    bench_stream probe;
    bench_stream_init(&probe, 4096LL * 4096, 4, 5);
    const double stream = bench_stream_sample(&probe, 7);
    const double copy = bench_stream_gbs(4096LL * 4096, 1, 1, 7);
    printf("# c-update, forward + backward with an all-ones adjoint, float32, CPU\n");
    bench_print_machine();
    printf("streaming bandwidth (plain loop, 4 arrays in, 5 out): %.1f GB/s; copy: %.1f GB/s\n\n", stream, copy);
    printf("| dims | control | variant | forward ms | backward ms | total ms | fwd GB/s | bwd GB/s | stream GB/s "
           "| fwd %% of stream | bwd %% of stream | vs pure | vs fused | peak tape MiB | max grad rel diff |\n");
    printf("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);

    char drift[1024] = "";
    for (int di = 0; di < n_dims; ++di) {
        for (int layout = 0; layout < 2; ++layout) {
            if (!layouts[layout])
                continue;
            problem p;
            make_problem(&p, ctx, dims_list[di], layout == 0);
            const int reps = reps_for(p.dims, reps_asked);
            result res[V_COUNT];
            const double before = bench_stream_sample(&probe, 3);
            measure_all(&p, ctx, reps, res);
            const double after = bench_stream_sample(&probe, 3);
            print_rows(&p, res, 0.5 * (before + after));
            if (fabs(after - before) > 0.15 * before) {
                const size_t used = strlen(drift);
                snprintf(drift + used, sizeof drift - used, "%s%lld per %s (%.1f -> %.1f GB/s)", used ? ", " : "",
                         (long long)p.dims, p.per_row ? "row" : "column", before, after);
            }
            free_problem(&p);
        }
    }
    const double stream_end = bench_stream_sample(&probe, 7);
    bench_stream_free(&probe);
    printf("\nstream GB/s: the mean of the streaming loop's medians of 3 passes just before and just after "
           "the table's rounds; the percentages use it.\n");
    if (drift[0])
        printf("tables whose streaming bandwidth moved more than 15%% while they ran: %s\n", drift);
    printf("streaming bandwidth measured again at the end of the run: %.1f GB/s%s\n", stream_end,
           fabs(stream_end - stream) > 0.15 * stream ? " (more than 15% from the first: the machine's speed changed)"
                                                      : "");
    dc_ctx_free(ctx);
    return 0;
}
