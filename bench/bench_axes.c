/* Reductions and scans over one axis of a matrix: the primal time (the op
 * alone, nothing recorded) and the gradient time (the op recorded, then its
 * adjoint from an all-ones output adjoint) of sums, products, maxima and
 * log-sum-exp, of inclusive scans with sums, products and maxima, and of a
 * product with a vector broadcast along the axis (bcast_mul: x * b, b of
 * shape [1, cols] along axis 0, [rows, 1] along axis 1; its gradient sums
 * over the axis), over axis 0 (down the columns) or axis 1 (along the rows)
 * of float32 matrices of n elements, from a few tall columns to many short
 * rows. Each time is the median wall time of one iteration from the device
 * at rest to the device at rest, primal and gradient iterations alternating
 * (bench_step_medians), as bench_reduce times the whole reductions.
 *
 *   bench_axes [--device cpu|cuda] [--n N (10000000)] [--reps N (15)]
 *              [--ops sum,prod,max,logsumexp,scan_sum,scan_prod,scan_max,
 *                     bcast_mul]
 *
 * Bandwidth: the primal's least traffic, its input read once (4n bytes; a
 * scan's and bcast_mul's also its output written, 8n), over its time,
 * beside the copy bandwidth of the same device measured in the same run,
 * timed the same way (dc_tensor_copy of n float32, 8n bytes read and
 * written). Inputs: uniform in [0.999, 1.001], whose products over
 * 10^7 elements stay finite. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"

typedef dc_tensor *(*reduce_fn)(dc_tape *, dc_tensor *, int, const int *, bool);

/* A reduction (fn), a scan with scan_op (fn NULL, not broadcast), or the
 * broadcast product (broadcast). */
typedef struct axis_op {
    const char *name;
    reduce_fn fn;
    dc_reduction scan_op;
    bool broadcast;
} axis_op;

static const axis_op ops[] = {{"sum", dc_op_sum, DC_REDUCE_SUM, false},
                              {"prod", dc_op_prod, DC_REDUCE_SUM, false},
                              {"max", dc_op_max, DC_REDUCE_SUM, false},
                              {"logsumexp", dc_op_logsumexp, DC_REDUCE_SUM, false},
                              {"scan_sum", NULL, DC_REDUCE_SUM, false},
                              {"scan_prod", NULL, DC_REDUCE_PROD, false},
                              {"scan_max", NULL, DC_REDUCE_MAX, false},
                              {"bcast_mul", NULL, DC_REDUCE_SUM, true}};
enum { N_OPS = sizeof ops / sizeof ops[0] };

/* The matrices' column counts (rows: n over them) and the axes reduced. */
static const struct {
    int64_t cols;
    int axis;
} shapes[] = {{4, 0}, {4, 1}, {100, 0}, {100, 1}, {1000, 0}, {1000, 1}, {100000, 0}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_axes: %s: %s\n", what, ctx ? dc_last_error(ctx) : dc_last_error(NULL));
    exit(1);
}

/* One case: bench_step's argument. */
typedef struct axis_case {
    const axis_op *op;
    dc_tensor *x, *ones, *b;
    int axis;
} axis_case;

static dc_tensor *run_case(dc_tape *tape, const void *arg)
{
    const axis_case *k = arg;
    return k->op->fn          ? k->op->fn(tape, k->x, 1, &k->axis, false)
           : k->op->broadcast ? dc_op_mul(tape, k->x, k->b)
                              : dc_op_scan(tape, k->x, k->op->scan_op, k->axis, false);
}

static const dc_tensor *seed_of(const void *arg) { return ((const axis_case *)arg)->ones; }

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_axes [--device cpu|cuda] [--n N (10000000)] [--reps N (15)] [--ops name,...]\nops:");
    for (int o = 0; o < N_OPS; ++o)
        fprintf(f, " %s", ops[o].name);
    fprintf(f, "\n");
}

int main(int argc, char **argv)
{
    const char *device = "cpu", *names = NULL;
    int64_t n = 10000000;
    int reps = 15;
    for (int a = 1; a < argc; ++a) {
        const bool has_value = a + 1 < argc;
        if (strcmp(argv[a], "--device") == 0 && has_value) {
            device = argv[++a];
        } else if (strcmp(argv[a], "--n") == 0 && has_value) {
            n = strtoll(argv[++a], NULL, 10);
        } else if (strcmp(argv[a], "--reps") == 0 && has_value) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--ops") == 0 && has_value) {
            names = argv[++a];
        } else {
            usage(strcmp(argv[a], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[a], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || n < 100000 || (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)) {
        usage(stderr);
        return 2;
    }
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = strcmp(device, "cuda") == 0 ? DC_BACKEND_CUDA : DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    dc_tape *tape = ctx ? dc_tape_new(ctx) : NULL;
    if (!tape)
        die(ctx, "context");
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        die(NULL, "out of host memory");
    bench_fill_uniform(v, n, 0.999f, 1.001f, 5);
    dc_tensor *flat = dc_tensor_from_host(ctx, DC_F32, 1, &n, v);
    if (!flat)
        die(ctx, "inputs");
    const double copy = bench_copy_gbs(ctx, flat, reps);
    printf("device: %s\n", o.backend == DC_BACKEND_CUDA ? dc_ctx_device_name(ctx) : bench_cpu_name());
    printf("| op | shape | axis | primal ms | gradient ms | overhead | primal GB/s | primal %% of copy |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int s = 0; s < N_SHAPES; ++s) {
        const int64_t shape[2] = {n / shapes[s].cols, shapes[s].cols}, out = shape[1 - shapes[s].axis];
        const int64_t used = shape[0] * shape[1];
        /* the matrix's elements: the first n / cols * cols of the input;
         * the all-ones adjoints of a reduction's output and of a scan's */
        dc_tensor *x = dc_tensor_from_host(ctx, DC_F32, 2, shape, v), *ones = dc_tensor_new(ctx, DC_F32, 1, &out);
        dc_tensor *ones_all = dc_tensor_new(ctx, DC_F32, 2, shape);
        /* bcast_mul's vector, along the axis: [1, cols] or [rows, 1] */
        const int64_t b_shape[2] = {shapes[s].axis == 0 ? 1 : shape[0], shapes[s].axis == 0 ? shape[1] : 1};
        dc_tensor *b = dc_tensor_from_host(ctx, DC_F32, 2, b_shape, v);
        if (!x || !ones || !ones_all || !b || dc_tensor_fill(ones, 1) != DC_OK ||
            dc_tensor_fill(ones_all, 1) != DC_OK || dc_tensor_set_requires_grad(x, true) != DC_OK ||
            dc_tensor_set_requires_grad(b, true) != DC_OK)
            die(ctx, "a case's tensors");
        for (int op = 0; op < N_OPS; ++op) {
            if (!bench_list_has(names, ops[op].name))
                continue;
            const axis_case k = {&ops[op], x, ops[op].fn ? ones : ones_all, b, shapes[s].axis};
            const bench_step step = {ctx, tape, run_case, seed_of, &k, {x, ops[op].broadcast ? b : NULL}};
            double primal, gradient;
            bench_step_medians(&step, reps, &primal, &gradient);
            const double gbs = (ops[op].fn ? 4.0 : 8.0) * (double)used / primal / 1e9;
            printf("| %s | [%lld, %lld] | %d | %.3f | %.3f | %.2f | %.1f | %.0f |\n", ops[op].name, (long long)shape[0],
                   (long long)shape[1], shapes[s].axis, primal * 1e3, gradient * 1e3, gradient / primal, gbs,
                   100.0 * gbs / copy);
            fflush(stdout);
        }
        dc_tape_reset(tape);
        dc_tensor_free(x);
        dc_tensor_free(ones);
        dc_tensor_free(ones_all);
        dc_tensor_free(b);
    }
    printf("\ncopy bandwidth (dc_tensor_copy of %lld float32, bytes read + written, median of %d): %.1f GB/s\n",
           (long long)n, reps, copy);
    free(v);
    dc_tensor_free(flat);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
    return 0;
}
