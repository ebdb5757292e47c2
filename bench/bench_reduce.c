/* Reductions, scans and reductions by index: the primal time (the op alone,
 * nothing recorded) and the gradient time (the op recorded, then its
 * adjoint from an all-ones output adjoint), and their ratio, the AD
 * overhead. Each time is the median wall time of one iteration, from the
 * device at rest to the device at rest (dc_ctx_synchronize), primal and
 * gradient iterations alternating (bench_step_medians), the way
 * bench/peers/reduce_peers.py times PyTorch and JAX on the same inputs.
 *
 *   bench_reduce [--device cpu|cuda] [--sizes 1000000,10000000] [--reps N]
 *                [--ops name,...] [--dump DIR]
 *
 * Inputs (float32): for the products, x uniform in [0.999, 1.001] (products
 * of 10^7 of them stay finite); for the others, uniform in [-1, 1], whose
 * finer grid of floats leaves few ties at a maximum (PyTorch and JAX split
 * a tie's adjoint, dualcast gives it to the first winner); for the
 * reductions by index SEGMENTS segments picked uniformly per element.
 * --dump DIR writes each size's inputs (x_<n>.npy, near1_<n>.npy,
 * index_<n>.npy) and each case's output and gradient (<case>_<n>_out.npy,
 * <case>_<n>_grad.npy; the user operator's cases also <case>_<n>_grad_a.npy,
 * the gradient of its field a) for the peers to compare.
 *
 * Bandwidth: each case's least traffic (bench_case's words, below) over its
 * time, beside the copy bandwidth of the same device measured at each size
 * in the same run, timed the same way (dc_tensor_copy of n float32: 8n
 * bytes). The least traffic's ratio, gradient over primal, is the overhead
 * a kernel moving exactly those bytes at one bandwidth would show: the
 * floor of a memory-bound op's overhead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "peer_io.h"

enum { SEGMENTS = 1000 };

DC_ASSOC_DECLARE(linrec);

/* K_USER_*: the user operator linrec (tests/assoc/linrec.dc.h), the
 * composition of affine maps x -> a x + b over the pair (a, b) = (near1,
 * x): its scan is the linear recurrence x_t = a_t x_{t-1} + b_t, in field
 * b, the output whose adjoint is all ones. */
typedef enum kind { K_REDUCE, K_LOGSUMEXP, K_SCAN, K_SEGMENT, K_USER_SCAN, K_USER_REDUCE } kind;

/* primal_words, gradient_words: the least float32 words per element that
 * the primal and the gradient (forward and adjoint) read or write, what the
 * formulas need whatever the schedule: an input read once, an output or a
 * gradient written once, outputs with one element per segment or fewer not
 * counted. The adjoints read: reduce_prod and logsumexp x; max and min
 * nothing (the winners are known); a scan the output's adjoint, for prod x
 * (the products before each element follow from x and one of them), for
 * max and min x and y; a reduction by index the index, and for prod
 * x; the user operator's scan its k = 2 fields of x, the k states before
 * each element and the one adjoint given, and writes k; its reduction
 * reads x and writes k. */
typedef struct bench_case {
    const char *name;
    kind kind;
    dc_reduction op;
    int primal_words, gradient_words;
} bench_case;

static const bench_case cases[] = {
    {"reduce_sum", K_REDUCE, DC_REDUCE_SUM, 1, 2},
    {"reduce_prod", K_REDUCE, DC_REDUCE_PROD, 1, 3},
    {"reduce_max", K_REDUCE, DC_REDUCE_MAX, 1, 2},
    {"reduce_min", K_REDUCE, DC_REDUCE_MIN, 1, 2},
    {"logsumexp", K_LOGSUMEXP, DC_REDUCE_SUM, 1, 3},
    {"scan_sum", K_SCAN, DC_REDUCE_SUM, 2, 4},
    {"scan_prod", K_SCAN, DC_REDUCE_PROD, 2, 5},
    {"scan_max", K_SCAN, DC_REDUCE_MAX, 2, 6},
    {"scan_min", K_SCAN, DC_REDUCE_MIN, 2, 6},
    {"segment_sum", K_SEGMENT, DC_REDUCE_SUM, 2, 4},
    {"segment_prod", K_SEGMENT, DC_REDUCE_PROD, 2, 5},
    {"segment_max", K_SEGMENT, DC_REDUCE_MAX, 2, 3},
    {"segment_min", K_SEGMENT, DC_REDUCE_MIN, 2, 3},
    {"user_scan_linrec", K_USER_SCAN, DC_REDUCE_SUM, 4, 11},
    {"user_reduce_linrec", K_USER_REDUCE, DC_REDUCE_SUM, 2, 6},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_reduce: %s: %s\n", what, ctx ? dc_last_error(ctx) : dc_last_error(NULL));
    exit(1);
}

/* One size's inputs and the all-ones adjoints of the three output shapes. */
typedef struct inputs {
    int64_t n;
    dc_tensor *x, *near1, *index, *ones_n, *ones_seg, *one;
} inputs;

static void make_inputs(dc_ctx *ctx, int64_t n, inputs *in)
{
    in->n = n;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        die(NULL, "out of host memory");
    bench_fill_uniform(v, n, 0.999f, 1.001f, 5);
    in->near1 = dc_tensor_from_host(ctx, DC_F32, 1, &n, v);
    bench_fill_uniform(v, n, -1.0f, 1.0f, 7);
    in->x = dc_tensor_from_host(ctx, DC_F32, 1, &n, v);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; ++i) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)(s % SEGMENTS);
    }
    in->index = dc_tensor_from_host(ctx, DC_F32, 1, &n, v);
    free(v);
    const int64_t seg = SEGMENTS;
    in->ones_n = dc_tensor_new(ctx, DC_F32, 1, &n);
    in->ones_seg = dc_tensor_new(ctx, DC_F32, 1, &seg);
    in->one = dc_tensor_new(ctx, DC_F32, 0, NULL);
    if (!in->x || !in->near1 || !in->index || !in->ones_n || !in->ones_seg || !in->one ||
        dc_tensor_fill(in->ones_n, 1) != DC_OK || dc_tensor_fill(in->ones_seg, 1) != DC_OK ||
        dc_tensor_fill(in->one, 1) != DC_OK)
        die(ctx, "inputs");
    if (dc_tensor_set_requires_grad(in->x, true) != DC_OK || dc_tensor_set_requires_grad(in->near1, true) != DC_OK)
        die(ctx, "requires_grad");
}

static void free_inputs(inputs *in)
{
    dc_tensor_free(in->x);
    dc_tensor_free(in->near1);
    dc_tensor_free(in->index);
    dc_tensor_free(in->ones_n);
    dc_tensor_free(in->ones_seg);
    dc_tensor_free(in->one);
}

/* The input a built-in case reads (a user case reads both). */
static dc_tensor *input_of(const inputs *in, const bench_case *c)
{
    return c->op == DC_REDUCE_PROD ? in->near1 : in->x;
}

static bool is_user(const bench_case *c) { return c->kind == K_USER_SCAN || c->kind == K_USER_REDUCE; }

static dc_tensor *ones_for(const inputs *in, const bench_case *c)
{
    return c->kind == K_SCAN || c->kind == K_USER_SCAN ? in->ones_n : c->kind == K_SEGMENT ? in->ones_seg : in->one;
}

/* A case on one size's inputs: bench_step's argument. */
typedef struct case_on {
    const bench_case *c;
    const inputs *in;
} case_on;

static dc_tensor *run_case(dc_tape *tape, const void *arg)
{
    const case_on *k = arg;
    const inputs *in = k->in;
    dc_tensor *pair[2] = {in->near1, in->x}, *out[2] = {NULL, NULL};
    switch (k->c->kind) {
    case K_USER_SCAN:
        return dc_op_scan_fn(tape, DC_ASSOC_REF(linrec), pair, 0, false, out) == DC_OK ? out[1] : NULL;
    case K_USER_REDUCE:
        return dc_op_reduce_fn(tape, DC_ASSOC_REF(linrec), pair, 0, NULL, false, out) == DC_OK ? out[1] : NULL;
    case K_REDUCE:
        return dc_op_reduce(tape, input_of(in, k->c), k->c->op, 0, NULL, false);
    case K_LOGSUMEXP:
        return dc_op_logsumexp(tape, in->x, 0, NULL, false);
    case K_SCAN:
        return dc_op_scan(tape, input_of(in, k->c), k->c->op, 0, false);
    case K_SEGMENT:
        return dc_op_segment_reduce(tape, input_of(in, k->c), in->index, SEGMENTS, k->c->op);
    }
    return NULL;
}

static const dc_tensor *seed_of(const void *arg)
{
    const case_on *k = arg;
    return ones_for(k->in, k->c);
}

static bench_step step_of(dc_ctx *ctx, dc_tape *tape, const case_on *k)
{
    const bench_step s = {ctx, tape, run_case, seed_of, k, {k->in->x, k->in->near1}};
    return s;
}

static void dump_case(dc_ctx *ctx, dc_tape *tape, const bench_case *c, const inputs *in, const char *dir)
{
    dc_tensor *y;
    const case_on k = {c, in};
    const bench_step step = step_of(ctx, tape, &k);
    bench_step_once(&step, true, &y);
    char name[96];
    snprintf(name, sizeof name, "%s_%lld_out", c->name, (long long)in->n);
    if (npy_write_tensor(dir, name, y) != DC_OK)
        die(ctx, "writing an output");
    snprintf(name, sizeof name, "%s_%lld_grad", c->name, (long long)in->n);
    if (npy_write_tensor(dir, name, dc_tensor_grad(is_user(c) ? in->x : input_of(in, c))) != DC_OK)
        die(ctx, "writing a gradient");
    snprintf(name, sizeof name, "%s_%lld_grad_a", c->name, (long long)in->n);
    if (is_user(c) && npy_write_tensor(dir, name, dc_tensor_grad(in->near1)) != DC_OK)
        die(ctx, "writing a gradient");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_reduce [--device cpu|cuda] [--sizes N,...] [--reps N (15)] [--ops name,...] "
               "[--dump DIR]\ncases:");
    for (int c = 0; c < N_CASES; ++c)
        fprintf(f, " %s", cases[c].name);
    fprintf(f, "\n");
}

int main(int argc, char **argv)
{
    const char *device = "cpu", *ops = NULL, *dump = NULL, *sizes = "1000000,10000000";
    int reps = 15;
    for (int a = 1; a < argc; ++a) {
        const bool has_value = a + 1 < argc;
        if (strcmp(argv[a], "--device") == 0 && has_value) {
            device = argv[++a];
        } else if (strcmp(argv[a], "--sizes") == 0 && has_value) {
            sizes = argv[++a];
        } else if (strcmp(argv[a], "--reps") == 0 && has_value) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--ops") == 0 && has_value) {
            ops = argv[++a];
        } else if (strcmp(argv[a], "--dump") == 0 && has_value) {
            dump = argv[++a];
        } else {
            usage(strcmp(argv[a], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[a], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)) {
        usage(stderr);
        return 2;
    }
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = strcmp(device, "cuda") == 0 ? DC_BACKEND_CUDA : DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx)
        die(NULL, "context");
    dc_tape *tape = dc_tape_new(ctx);
    if (!tape)
        die(ctx, "tape");
    printf("device: %s\n", o.backend == DC_BACKEND_CUDA ? dc_ctx_device_name(ctx) : bench_cpu_name());
    printf("| case | n | primal ms | gradient ms | overhead | least-traffic overhead | primal GB/s | gradient GB/s "
           "| primal %% of copy | gradient %% of copy |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    double *copies = calloc(strlen(sizes) + 1, sizeof *copies);
    int n_sizes = 0;
    if (!copies)
        die(NULL, "out of host memory");
    for (const char *p = sizes; p && *p;) {
        const int64_t n = strtoll(p, NULL, 10);
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
        if (n < 1)
            continue;
        inputs in;
        make_inputs(ctx, n, &in);
        if (dump) {
            char name[64];
            snprintf(name, sizeof name, "x_%lld", (long long)n);
            if (npy_write_tensor(dump, name, in.x) != DC_OK)
                die(ctx, "writing x");
            snprintf(name, sizeof name, "near1_%lld", (long long)n);
            if (npy_write_tensor(dump, name, in.near1) != DC_OK)
                die(ctx, "writing near1");
            snprintf(name, sizeof name, "index_%lld", (long long)n);
            if (npy_write_tensor(dump, name, in.index) != DC_OK)
                die(ctx, "writing index");
        }
        const double copy = bench_copy_gbs(ctx, in.x, reps);
        copies[n_sizes++] = copy;
        for (int c = 0; c < N_CASES; ++c) {
            if (!bench_list_has(ops, cases[c].name))
                continue;
            const bench_case *bc = &cases[c];
            const case_on k = {bc, &in};
            const bench_step step = step_of(ctx, tape, &k);
            double primal, gradient;
            bench_step_medians(&step, reps, &primal, &gradient);
            const double primal_gbs = 4.0 * bc->primal_words * (double)n / primal / 1e9;
            const double gradient_gbs = 4.0 * bc->gradient_words * (double)n / gradient / 1e9;
            printf("| %s | %lld | %.3f | %.3f | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f |\n", bc->name, (long long)n,
                   primal * 1e3, gradient * 1e3, gradient / primal, (double)bc->gradient_words / bc->primal_words,
                   primal_gbs, gradient_gbs, 100.0 * primal_gbs / copy, 100.0 * gradient_gbs / copy);
            fflush(stdout);
            if (dump)
                dump_case(ctx, tape, &cases[c], &in, dump);
        }
        dc_tape_reset(tape);
        free_inputs(&in);
    }
    printf("\ncopy bandwidth (dc_tensor_copy of n float32, bytes read + written, median of %d):", reps);
    n_sizes = 0;
    for (const char *p = sizes; p && *p;) {
        const int64_t n = strtoll(p, NULL, 10);
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
        if (n >= 1)
            printf(" %.1f GB/s at n = %lld%s", copies[n_sizes++], (long long)n, p ? ";" : "");
    }
    printf("\n");
    free(copies);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
    return 0;
}
