/* The GPU benchmark: the paper's c-update and its arity sweep on a CUDA
 * device, forward plus backward with an all-ones output adjoint, mixed mode
 * (store and recompute policies) against pure reverse mode (one tape node per
 * primitive) against a hand-fused CUDA kernel; the paper's own measure (the
 * dual forward kernel alone against pure reverse mode's forward and
 * backward); achieved bandwidth beside the device's measured copy bandwidth;
 * the targets at 2048^2, met or missed.
 *
 *   bench_cuda [--dims 512,1024,2048] [--layout row,column] [--reps 50] [--warmup 3]
 *              [--parts cupdate,arity] [--arity-dims 2048] [--max-arity 10]
 *              [--copy-mib 1024] [--no-hold] [--no-flush]
 *
 * c-update inputs are those of bench_cupdate.c: c, f, i, g uniform in
 * [-2, 2); control z, zb with shape [dims, 1] ("row": one value per row, so
 * every warp takes one branch) or [1, dims] ("column": neighbouring threads
 * diverge), random, the first three rows or columns forced to FLUSH, COPY and
 * UPDATE. Arity sweep: y = prod_j (x_j > 0.5 ? x_j : -x_j) over k inputs
 * uniform in [0, 1), k = 1 .. 10.
 *
 * Gradients of every variant are compared with the hand-fused kernel's, and
 * the hand-fused kernel's with a CPU reference; the program exits with 1 when
 * a mixed-mode variant differs from the hand-fused kernel by more than 1e-5
 * (relative), or that kernel from the CPU by more than 1e-4, so that the times
 * are those of correct code. Without a usable CUDA device it says why and
 * exits with 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "cupdate_problem.h"
#include "cupdate_fused.h"
#include "cupdate_fused_cuda.h"
#include "gpu_timing.h"
#include "kernels/prod_sign_fns.h"
#include "prod_sign_fused_cuda.h"

DC_BFN_DECLARE(hmlstm_update_c);
_Static_assert((int)PROD_SIGN_FN_MAX_ARITY == (int)PROD_SIGN_MAX_ARITY, "one arity sweep");
static const dc_bfn *const prod_sign_fns[PROD_SIGN_MAX_ARITY + 1] = PROD_SIGN_FNS;

enum { V_STORE, V_RECOMPUTE, V_PURE, V_FUSED, V_COUNT };
static const char *const variant_names[V_COUNT] = {"mixed, store", "mixed, recompute", "pure reverse", "hand-fused"};

/* Mixed-mode and hand-fused results must agree this closely (relative). */
static const double kGradTolerance = 1e-5;
/* The hand-fused kernel against the CPU reference: the device's tanhf and
 * expf differ from the CPU's in the last bits, so this only catches bugs. */
static const double kReferenceTolerance = 1e-4;

enum { MAX_WRT = PROD_SIGN_MAX_ARITY, MAX_DIMS_LIST = 8 };

typedef struct options {
    int64_t dims[MAX_DIMS_LIST];
    int n_dims;
    bool layout_row, layout_column;
    bool cupdate, arity;
    int64_t arity_dims;
    int max_arity;
    int reps, warmup;
    int64_t copy_mib;
    bool hold, flush;
} options;

/* One benchmark problem: the c-update at one size and control layout, or the
 * arity sweep's function at one arity. Its device tensors, and the gradients
 * of the CPU reference in host memory. */
typedef struct problem {
    bool is_cupdate;
    int64_t rows, cols;
    bool per_row; /* c-update: control per row, else per column */
    int arity;    /* arity sweep: inputs of the function */
    int n_wrt;    /* differentiable inputs: 4 for the c-update, else arity */
    dc_tensor *z, *zb;
    dc_tensor *wrt[MAX_WRT];
    dc_tensor *ones;
    dc_tensor *fused_out, *fused_grad[MAX_WRT];
    float *host_ref_grad[MAX_WRT]; /* CPU reference gradients */
    /* bytes per element each pass must move at the least (see byte_counts) */
    double fwd_bytes[V_COUNT], bwd_bytes[V_COUNT], job_bytes;
} problem;

typedef struct result {
    double fwd, bwd, total; /* medians, milliseconds */
    double peak_mib;        /* tape memory */
    double grad_diff;       /* mixed and pure: against the hand-fused gradients; hand-fused: against the CPU */
} result;

typedef struct bench {
    options opt;
    dc_ctx *ctx;
    void *stream;
    gpu_timer *timer;
    double copy_gbs;
    int hold_timeouts;
    bool failed;
} bench;

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, ctx ? dc_last_error(ctx) : "");
    exit(1);
}

static void *checked_malloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "bench_cuda: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- the variants ---------------------------------------------------------- */

/* prod_j (x_j > 0.5 ? x_j : -x_j) from primitive ops, as a reverse-mode
 * system without a fused node runs it: both sides of each select exist. */
static dc_tensor *prod_sign_pure(dc_tape *tape, int arity, dc_tensor *const *x)
{
    dc_tensor *y = NULL;
    for (int j = 0; j < arity; ++j) {
        /* the comparison has no derivative: it is computed off the tape */
        const bool recording = dc_tape_set_recording(tape, false);
        dc_tensor *above = dc_op_step_st(tape, x[j], 0.5);
        dc_tape_set_recording(tape, recording);
        dc_tensor *factor = dc_op_select(tape, above, x[j], dc_op_neg(tape, x[j]));
        y = y ? dc_op_mul(tape, y, factor) : factor;
    }
    return y;
}

/* The forward pass of a mixed or pure variant; NULL on error. */
static dc_tensor *forward(problem *p, dc_tape *tape, int variant)
{
    if (variant == V_PURE)
        return p->is_cupdate ? cupdate_pure(tape, p->z, p->zb, p->wrt) : prod_sign_pure(tape, p->arity, p->wrt);
    const dc_partials_policy policy = variant == V_STORE ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE;
    dc_tensor *out = NULL;
    dc_status st;
    if (p->is_cupdate) {
        dc_tensor *in[6] = {p->z, p->zb, p->wrt[0], p->wrt[1], p->wrt[2], p->wrt[3]};
        st = dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &out, policy);
    } else {
        st = dc_broadcast_policy(tape, prod_sign_fns[p->arity], p->arity, p->wrt, 1, &out, policy);
    }
    return st == DC_OK ? out : NULL;
}

static void queue_fused(bench *b, problem *p)
{
    float *grad[MAX_WRT], *out = dc_tensor_data(p->fused_out);
    const float *adj = dc_tensor_data(p->ones);
    for (int k = 0; k < p->n_wrt; ++k)
        grad[k] = dc_tensor_data(p->fused_grad[k]);
    int err;
    if (p->is_cupdate) {
        err = cupdate_fused_cuda(p->rows, p->cols, p->per_row, dc_tensor_data(p->z), dc_tensor_data(p->zb),
                                 dc_tensor_data(p->wrt[0]), dc_tensor_data(p->wrt[1]), dc_tensor_data(p->wrt[2]),
                                 dc_tensor_data(p->wrt[3]), adj, out, grad[0], grad[1], grad[2], grad[3], b->stream);
    } else {
        const float *x[MAX_WRT];
        for (int k = 0; k < p->arity; ++k)
            x[k] = dc_tensor_data(p->wrt[k]);
        err = prod_sign_fused_cuda(p->arity, p->rows * p->cols, x, adj, out, grad, b->stream);
    }
    if (err) {
        fprintf(stderr, "bench_cuda: hand-fused kernel: %s\n", gpu_error_string(err));
        exit(1);
    }
}

/* One timed forward and backward of a variant, in milliseconds. */
static void run_once(bench *b, problem *p, dc_tape *tape, int variant, double *t_fwd, double *t_bwd)
{
    double ms[2] = {0, 0};
    if (variant == V_FUSED) {
        gpu_timer_start(b->timer);
        queue_fused(b, p);
        gpu_timer_mark(b->timer);
        gpu_timer_stop(b->timer, ms);
        *t_fwd = ms[0];
        *t_bwd = 0;
        return;
    }
    dc_tape_reset(tape);
    for (int k = 0; k < p->n_wrt; ++k)
        dc_tensor_zero_grad(p->wrt[k]);
    gpu_timer_start(b->timer);
    dc_tensor *out = forward(p, tape, variant);
    if (!out)
        die(b->ctx, "forward");
    gpu_timer_mark(b->timer);
    if (dc_backward_with(tape, out, p->ones) != DC_OK)
        die(b->ctx, "backward");
    gpu_timer_mark(b->timer);
    gpu_timer_stop(b->timer, ms);
    *t_fwd = ms[0];
    *t_bwd = ms[1];
}

/* ---- gradient checks -------------------------------------------------------- */

static double rel_diff(double a, double b) { return fabs(a - b) / fmax(1e-6, fabs(b)); }

/* Copies a device tensor's elements (NULL: zeros) into host memory. */
static void fetch(bench *b, const dc_tensor *t, float *host, int64_t n)
{
    if (!t) {
        memset(host, 0, (size_t)n * sizeof *host);
        return;
    }
    if (dc_tensor_to_host(t, host, (size_t)n * sizeof *host) != DC_OK)
        die(b->ctx, "copy to host");
}

/* Largest relative difference between the gradients the variant just left
 * in the inputs and the hand-fused kernel's. */
static double grad_diff_vs_fused(bench *b, problem *p, float *mine, float *theirs)
{
    const int64_t n = p->rows * p->cols;
    double worst = 0;
    for (int k = 0; k < p->n_wrt; ++k) {
        fetch(b, dc_tensor_grad(p->wrt[k]), mine, n);
        fetch(b, p->fused_grad[k], theirs, n);
        for (int64_t e = 0; e < n; ++e)
            worst = fmax(worst, rel_diff(mine[e], theirs[e]));
    }
    return worst;
}

/* The hand-fused kernel's gradients against the CPU reference. */
static double fused_diff_vs_cpu(bench *b, problem *p, float *scratch)
{
    const int64_t n = p->rows * p->cols;
    double worst = 0;
    for (int k = 0; k < p->n_wrt; ++k) {
        fetch(b, p->fused_grad[k], scratch, n);
        for (int64_t e = 0; e < n; ++e)
            worst = fmax(worst, rel_diff(scratch[e], p->host_ref_grad[k][e]));
    }
    return worst;
}

/* ---- problems -------------------------------------------------------------- */

/* Bytes per element each pass must move at the least, float32, control
 * vectors negligible; every input counted as read. The c-update (4
 * differentiable inputs) is k = 4 of the general count:
 *   mixed, store:     forward  k in, output and k partials out  (2k + 1) * 4
 *                     backward adjoint and k partials in, k out (2k + 1) * 4
 *   mixed, recompute: forward  k in, output out                 (k + 1) * 4
 *                     backward k inputs and adjoint in, k out   (2k + 1) * 4
 *   hand-fused:       one pass k inputs and adjoint in, output
 *                     and k gradients out                       (2k + 2) * 4
 * The whole job (forward and backward) needs at least the hand-fused count;
 * the "job GB/s" column divides that by each variant's total time. Pure
 * reverse mode's own passes move intermediates whose count is not a property
 * of the problem, so they get only the job figure. */
static void byte_counts(problem *p)
{
    const double k = p->n_wrt, f = sizeof(float);
    p->fwd_bytes[V_STORE] = (2 * k + 1) * f;
    p->bwd_bytes[V_STORE] = (2 * k + 1) * f;
    p->fwd_bytes[V_RECOMPUTE] = (k + 1) * f;
    p->bwd_bytes[V_RECOMPUTE] = (2 * k + 1) * f;
    p->fwd_bytes[V_PURE] = p->bwd_bytes[V_PURE] = 0;
    p->fwd_bytes[V_FUSED] = (2 * k + 2) * f;
    p->bwd_bytes[V_FUSED] = 0;
    p->job_bytes = (2 * k + 2) * f;
}

static dc_tensor *device_tensor(bench *b, int64_t rows, int64_t cols, const float *host)
{
    const int64_t shape[2] = {rows, cols};
    dc_tensor *t = host ? dc_tensor_from_host(b->ctx, DC_F32, 2, shape, host) : dc_tensor_new(b->ctx, DC_F32, 2, shape);
    if (!t)
        die(b->ctx, "device tensor");
    return t;
}

/* Tensors shared by both kinds of problem: the adjoint and the hand-fused
 * kernel's outputs. */
static void make_common(bench *b, problem *p, float *ones_host)
{
    const int64_t n = p->rows * p->cols;
    for (int64_t e = 0; e < n; ++e)
        ones_host[e] = 1.0f;
    p->ones = device_tensor(b, p->rows, p->cols, ones_host);
    p->fused_out = device_tensor(b, p->rows, p->cols, NULL);
    for (int k = 0; k < p->n_wrt; ++k) {
        p->fused_grad[k] = device_tensor(b, p->rows, p->cols, NULL);
        p->host_ref_grad[k] = checked_malloc((size_t)n * sizeof(float));
    }
    byte_counts(p);
}

/* The c-update at dims x dims, with the inputs and control of bench_cupdate.c
 * and the CPU hand-fused loop (cupdate_fused.c) as the reference. */
static void make_cupdate(bench *b, problem *p, int64_t dims, bool per_row)
{
    memset(p, 0, sizeof *p);
    p->is_cupdate = true;
    p->rows = p->cols = dims;
    p->per_row = per_row;
    p->n_wrt = 4;
    const int64_t n = dims * dims;
    float *vz = checked_malloc((size_t)dims * sizeof *vz), *vzb = checked_malloc((size_t)dims * sizeof *vzb);
    cupdate_control_values(dims, vz, vzb);
    p->z = device_tensor(b, per_row ? dims : 1, per_row ? 1 : dims, vz);
    p->zb = device_tensor(b, per_row ? dims : 1, per_row ? 1 : dims, vzb);
    float *x[4];
    for (int k = 0; k < 4; ++k) {
        x[k] = checked_malloc((size_t)n * sizeof(float));
        bench_fill_uniform(x[k], n, -2.0f, 2.0f, 11 + (uint64_t)k);
        p->wrt[k] = device_tensor(b, dims, dims, x[k]);
        dc_tensor_set_requires_grad(p->wrt[k], true);
    }
    float *ones_host = checked_malloc((size_t)n * sizeof(float));
    float *out_host = checked_malloc((size_t)n * sizeof(float));
    make_common(b, p, ones_host);
    cupdate_fused(dims, dims, per_row, vz, vzb, x[0], x[1], x[2], x[3], ones_host, out_host, p->host_ref_grad[0],
                  p->host_ref_grad[1], p->host_ref_grad[2], p->host_ref_grad[3]);
    for (int k = 0; k < 4; ++k)
        free(x[k]);
    free(ones_host);
    free(out_host);
    free(vz);
    free(vzb);
}

/* The arity sweep's function with `arity` inputs uniform in [0, 1) at
 * dims x dims; the reference is computed here on the CPU in double. */
static void make_prod_sign(bench *b, problem *p, int64_t dims, int arity)
{
    memset(p, 0, sizeof *p);
    p->rows = p->cols = dims;
    p->arity = p->n_wrt = arity;
    const int64_t n = dims * dims;
    float *x[MAX_WRT];
    for (int k = 0; k < arity; ++k) {
        x[k] = checked_malloc((size_t)n * sizeof(float));
        bench_fill_uniform(x[k], n, 0.0f, 1.0f, 101 + (uint64_t)k);
        p->wrt[k] = device_tensor(b, dims, dims, x[k]);
        dc_tensor_set_requires_grad(p->wrt[k], true);
    }
    float *ones_host = checked_malloc((size_t)n * sizeof(float));
    make_common(b, p, ones_host);
    for (int64_t e = 0; e < n; ++e)
        for (int k = 0; k < arity; ++k) {
            double others = 1;
            for (int j = 0; j < arity; ++j)
                if (j != k)
                    others *= x[j][e] > 0.5f ? x[j][e] : -x[j][e];
            p->host_ref_grad[k][e] = (float)(x[k][e] > 0.5f ? others : -others);
        }
    for (int k = 0; k < arity; ++k)
        free(x[k]);
    free(ones_host);
}

static void free_problem(problem *p)
{
    dc_tensor_free(p->z);
    dc_tensor_free(p->zb);
    dc_tensor_free(p->ones);
    dc_tensor_free(p->fused_out);
    for (int k = 0; k < p->n_wrt; ++k) {
        dc_tensor_free(p->wrt[k]);
        dc_tensor_free(p->fused_grad[k]);
        free(p->host_ref_grad[k]);
    }
}

/* ---- measurement ------------------------------------------------------------ */

/* Every variant once per round, warm-up rounds first; the hand-fused kernel
 * runs first in each round, so that in the last round the others' gradients
 * are compared with its. Medians per variant. */
static void measure(bench *b, problem *p, result *res)
{
    const int order[V_COUNT] = {V_FUSED, V_STORE, V_RECOMPUTE, V_PURE};
    const int reps = b->opt.reps;
    const int64_t n = p->rows * p->cols;
    float *mine = checked_malloc((size_t)n * sizeof(float)), *theirs = checked_malloc((size_t)n * sizeof(float));
    dc_tape *tapes[V_COUNT];
    bench_samples t[V_COUNT];
    for (int v = 0; v < V_COUNT; ++v) {
        tapes[v] = dc_tape_new(b->ctx);
        if (!tapes[v])
            die(b->ctx, "tape");
        bench_samples_init(&t[v], reps);
        res[v].grad_diff = 0;
    }
    for (int r = -b->opt.warmup; r < reps; ++r) {
        if (r == 0) /* holds that timed out while kernels were first loaded do not count */
            gpu_timer_take_hold_timeouts(b->timer);
        for (int oi = 0; oi < V_COUNT; ++oi) {
            const int v = order[oi];
            double f, bw;
            run_once(b, p, tapes[v], v, &f, &bw);
            if (r < 0)
                continue;
            bench_samples_add(&t[v], f, bw);
            if (r == reps - 1)
                res[v].grad_diff =
                    v == V_FUSED ? fused_diff_vs_cpu(b, p, mine) : grad_diff_vs_fused(b, p, mine, theirs);
        }
    }
    b->hold_timeouts += gpu_timer_take_hold_timeouts(b->timer);
    for (int v = 0; v < V_COUNT; ++v) {
        res[v].peak_mib = v == V_FUSED ? 0.0 : (double)dc_tape_peak_bytes(tapes[v]) / (1 << 20);
        bench_samples_medians(&t[v], &res[v].fwd, &res[v].bwd, &res[v].total);
        dc_tape_free(tapes[v]);
        bench_samples_free(&t[v]);
    }
    free(mine);
    free(theirs);
    for (int v = 0; v < V_COUNT; ++v) {
        const bool mixed = v == V_STORE || v == V_RECOMPUTE;
        const double tolerance = v == V_FUSED ? kReferenceTolerance : kGradTolerance;
        if ((mixed || v == V_FUSED) && !(res[v].grad_diff <= tolerance)) {
            fprintf(stderr, "bench_cuda: %s gradients differ by %.1e (more than %.0e) from the %s\n", variant_names[v],
                    res[v].grad_diff, tolerance, v == V_FUSED ? "CPU reference" : "hand-fused kernel's");
            b->failed = true;
        }
    }
}

/* ---- printing -------------------------------------------------------------- */

static double gbs(double bytes_per_element, int64_t n, double ms)
{
    return bytes_per_element > 0 && ms > 0 ? bytes_per_element * (double)n / (ms * 1e-3) / 1e9 : 0;
}

/* "123.4 | 56%", or two empty cells when nothing is counted. */
static const char *gbs_cells(char *buf, size_t size, double g, double copy)
{
    if (g <= 0)
        snprintf(buf, size, " | ");
    else
        snprintf(buf, size, "%.0f | %.0f%%", g, 100 * g / copy);
    return buf;
}

static void print_table_header(const char *first_columns, const char *first_align)
{
    static const char *const columns[] = {
        "forward ms", "backward ms",   "total ms", "fwd GB/s", "fwd % of copy", "bwd GB/s",         "bwd % of copy",
        "job GB/s",   "job % of copy", "vs pure",  "vs fused", "peak tape MiB", "max grad rel diff"};
    const int n = (int)(sizeof columns / sizeof columns[0]);
    printf("| %s | variant |", first_columns);
    for (int c = 0; c < n; ++c)
        printf(" %s |", columns[c]);
    printf("\n|%s---|", first_align);
    for (int c = 0; c < n; ++c)
        printf("---:|");
    printf("\n");
}

static void print_rows(const bench *b, const problem *p, const result *res, const char *first_cells)
{
    const int64_t n = p->rows * p->cols;
    for (int v = 0; v < V_COUNT; ++v) {
        char fwd[48], bwd[48], job[48];
        const double fwd_ms = v == V_FUSED ? res[v].total : res[v].fwd;
        gbs_cells(fwd, sizeof fwd, gbs(p->fwd_bytes[v], n, fwd_ms), b->copy_gbs);
        gbs_cells(bwd, sizeof bwd, gbs(p->bwd_bytes[v], n, res[v].bwd), b->copy_gbs);
        gbs_cells(job, sizeof job, gbs(p->job_bytes, n, res[v].total), b->copy_gbs);
        char bwd_ms[32] = "";
        if (v != V_FUSED)
            snprintf(bwd_ms, sizeof bwd_ms, "%.4f", res[v].bwd);
        printf("| %s | %s | %.4f | %s | %.4f | %s | %s | %s | %.2fx | %.2fx | %.0f | %.1e |\n", first_cells,
               variant_names[v], res[v].fwd, bwd_ms, res[v].total, fwd, bwd, job, res[V_PURE].total / res[v].total,
               res[v].total / res[V_FUSED].total, res[v].peak_mib, res[v].grad_diff);
    }
    fflush(stdout);
}

/* The slowest mixed-mode pass of a problem as a fraction of copy bandwidth,
 * and its name. */
static double worst_mixed_kernel(const bench *b, const problem *p, const result *res, char *name, size_t size)
{
    const int64_t n = p->rows * p->cols;
    double worst = INFINITY;
    for (int v = V_STORE; v <= V_RECOMPUTE; ++v)
        for (int pass = 0; pass < 2; ++pass) {
            const double share =
                gbs(pass ? p->bwd_bytes[v] : p->fwd_bytes[v], n, pass ? res[v].bwd : res[v].fwd) / b->copy_gbs;
            if (share < worst) {
                worst = share;
                snprintf(name, size, "%s %s", variant_names[v], pass ? "backward" : "forward");
            }
        }
    return worst;
}

/* ---- the c-update and the arity sweep --------------------------------------- */

/* A measured problem: its sizes and byte counts (its tensors are freed by
 * then) and every variant's results. */
typedef struct measured {
    problem p;
    result res[V_COUNT];
} measured;

typedef struct all_results {
    int n_cupdate, n_arity;
    measured cupdate[2 * MAX_DIMS_LIST];
    measured arity[PROD_SIGN_MAX_ARITY]; /* arity k at k - 1 */
} all_results;

static void run_cupdate(bench *b, all_results *all)
{
    printf("## c-update, forward + backward with an all-ones adjoint, float32\n\n");
    print_table_header("dims | control", "---:|---|");
    fflush(stdout);
    for (int di = 0; di < b->opt.n_dims; ++di)
        for (int layout = 0; layout < 2; ++layout) {
            const bool per_row = layout == 0;
            if (per_row ? !b->opt.layout_row : !b->opt.layout_column)
                continue;
            measured *m = &all->cupdate[all->n_cupdate++];
            make_cupdate(b, &m->p, b->opt.dims[di], per_row);
            measure(b, &m->p, m->res);
            char first[64];
            snprintf(first, sizeof first, "%lld | per %s", (long long)m->p.rows, per_row ? "row" : "column");
            print_rows(b, &m->p, m->res, first);
            free_problem(&m->p);
        }
    printf("\n");
}

/* Least-squares slope of y[1..n] over 1 .. n (the cost of one more input). */
static double slope_per_arity(const double *y, int n)
{
    if (n < 2)
        return NAN;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int k = 1; k <= n; ++k) {
        sx += k;
        sy += y[k];
        sxx += (double)k * k;
        sxy += k * y[k];
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

static void run_arity(bench *b, all_results *all)
{
    const int64_t dims = b->opt.arity_dims;
    printf("## Arity sweep: prod_j (x_j > 0.5 ? x_j : -x_j), %lld x %lld, forward + backward with an all-ones "
           "adjoint, float32\n\n",
           (long long)dims, (long long)dims);
    print_table_header("arity", "---:|");
    fflush(stdout);
    for (int k = 1; k <= b->opt.max_arity; ++k) {
        measured *m = &all->arity[all->n_arity++];
        make_prod_sign(b, &m->p, dims, k);
        measure(b, &m->p, m->res);
        char first[16];
        snprintf(first, sizeof first, "%d", k);
        print_rows(b, &m->p, m->res, first);
        free_problem(&m->p);
    }
    const int n = all->n_arity;
    double y[PROD_SIGN_MAX_ARITY + 1];
    printf("\nCost of one more differentiated input (least-squares slope of the total over arities 1 to %d, us):", n);
    for (int v = 0; v < V_COUNT; ++v) {
        for (int k = 1; k <= n; ++k)
            y[k] = 1e3 * all->arity[k - 1].res[v].total;
        printf(" %s %.1f;", variant_names[v], slope_per_arity(y, n));
    }
    for (int k = 1; k <= n; ++k)
        y[k] = 1e3 * all->arity[k - 1].res[V_STORE].fwd;
    printf(" the dual forward kernel alone %.1f.\n\n", slope_per_arity(y, n));
}

/* The paper's measure: the dual forward kernel (mixed store, forward only;
 * with an all-ones adjoint its partials are the gradients) against pure
 * reverse mode computing the same gradients (its forward and backward). */
static void print_paper_measure(const all_results *all)
{
    printf("## The paper's measure: the dual forward kernel alone against pure reverse mode\n\n");
    printf("| problem | dual forward ms (mixed store, forward only) | pure reverse ms (forward + backward) "
           "| speed-up |\n");
    printf("|---|---:|---:|---:|\n");
    for (int i = 0; i < all->n_cupdate + all->n_arity; ++i) {
        const bool cupdate = i < all->n_cupdate;
        const measured *m = cupdate ? &all->cupdate[i] : &all->arity[i - all->n_cupdate];
        char name[64];
        if (cupdate)
            snprintf(name, sizeof name, "c-update %lld, control per %s", (long long)m->p.rows,
                     m->p.per_row ? "row" : "column");
        else
            snprintf(name, sizeof name, "arity %d, %lld^2", m->p.arity, (long long)m->p.rows);
        printf("| %s | %.4f | %.4f | %.2fx |\n", name, m->res[V_STORE].fwd, m->res[V_PURE].total,
               m->res[V_PURE].total / m->res[V_STORE].fwd);
    }
    printf("\n");
}

static const char *verdict(bool met) { return met ? "met" : "missed"; }

enum { T_PAPER, T_TOTAL, T_BANDWIDTH, T_FUSED, T_COUNT };
static const char *const target_names[T_COUNT] = {
    "paper's measure (dual forward alone vs pure forward + backward) >= 4x faster",
    "forward + backward, better mixed policy, >= 3x faster than pure",
    "every mixed-mode kernel >= 80% of copy bandwidth",
    "better mixed policy within 1.6x of hand-fused",
};

/* The targets apply at this size. */
static const int64_t kTargetDims = 2048;

static const measured *find_cupdate(const all_results *all, bool per_row)
{
    for (int i = 0; i < all->n_cupdate; ++i)
        if (all->cupdate[i].p.rows == kTargetDims && all->cupdate[i].p.per_row == per_row)
            return &all->cupdate[i];
    return NULL;
}

/* One cell of the targets table: the figure, and whether it meets the target. */
static void target_cell(const bench *b, const measured *m, int target, char *buf, size_t size)
{
    if (!m) {
        snprintf(buf, size, "not measured");
        return;
    }
    const result *r = m->res;
    const int better = r[V_STORE].total <= r[V_RECOMPUTE].total ? V_STORE : V_RECOMPUTE;
    double x;
    char name[64];
    switch (target) {
    case T_PAPER:
        x = r[V_PURE].total / r[V_STORE].fwd;
        snprintf(buf, size, "%.2fx: %s", x, verdict(x >= 4));
        break;
    case T_TOTAL:
        x = r[V_PURE].total / r[better].total;
        snprintf(buf, size, "%.2fx (%s): %s", x, variant_names[better], verdict(x >= 3));
        break;
    case T_BANDWIDTH:
        x = worst_mixed_kernel(b, &m->p, r, name, sizeof name);
        snprintf(buf, size, "slowest %s, %.0f%%: %s", name, 100 * x, verdict(x >= 0.8));
        break;
    default:
        x = r[better].total / r[V_FUSED].total;
        snprintf(buf, size, "%.2fx (%s): %s", x, variant_names[better], verdict(x <= 1.6));
        break;
    }
}

static void print_targets(const bench *b, const all_results *all)
{
    printf("## Against the targets (%lld^2)\n\n", (long long)kTargetDims);
    printf("| target | c-update, control per row | c-update, control per column |\n|---|---|---|\n");
    for (int t = 0; t < T_COUNT; ++t) {
        char row[160], column[160];
        target_cell(b, find_cupdate(all, true), t, row, sizeof row);
        target_cell(b, find_cupdate(all, false), t, column, sizeof column);
        printf("| %s | %s | %s |\n", target_names[t], row, column);
    }
    printf("\n");
    if (all->n_arity > 0 && all->arity[0].p.rows == kTargetDims) {
        double worst = INFINITY;
        int worst_k = 0;
        char worst_name[64] = "", name[64];
        for (int i = 0; i < all->n_arity; ++i) {
            const double share = worst_mixed_kernel(b, &all->arity[i].p, all->arity[i].res, name, sizeof name);
            if (share < worst) {
                worst = share;
                worst_k = i + 1;
                snprintf(worst_name, sizeof worst_name, "%s", name);
            }
        }
        printf("Arity sweep (%lld^2), every mixed-mode kernel >= 80%% of copy bandwidth: slowest %s at arity %d, "
               "%.0f%%: %s\n\n",
               (long long)kTargetDims, worst_name, worst_k, 100 * worst, verdict(worst >= 0.8));
    }
}

/* ---- main ------------------------------------------------------------------- */

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--dims 512,1024,2048] [--layout row,column] [--reps 50] [--warmup 3]\n"
            "          [--parts cupdate,arity] [--arity-dims 2048] [--max-arity 10] [--copy-mib 1024]\n"
            "          [--no-hold] [--no-flush]\n",
            prog);
    exit(2);
}

static options parse_options(int argc, char **argv)
{
    options o = {.dims = {512, 1024, 2048},
                 .n_dims = 3,
                 .layout_row = true,
                 .layout_column = true,
                 .cupdate = true,
                 .arity = true,
                 .arity_dims = 2048,
                 .max_arity = PROD_SIGN_MAX_ARITY,
                 .reps = 50,
                 .warmup = 3,
                 .copy_mib = 1024,
                 .hold = true,
                 .flush = true};
    for (int a = 1; a < argc; ++a) {
        const bool has_value = a + 1 < argc;
        if (strcmp(argv[a], "--dims") == 0 && has_value) {
            o.n_dims = 0;
            for (char *tok = strtok(argv[++a], ","); tok && o.n_dims < MAX_DIMS_LIST; tok = strtok(NULL, ","))
                o.dims[o.n_dims++] = atoll(tok);
        } else if (strcmp(argv[a], "--layout") == 0 && has_value) {
            const char *l = argv[++a];
            o.layout_row = strstr(l, "row") != NULL;
            o.layout_column = strstr(l, "column") != NULL;
        } else if (strcmp(argv[a], "--parts") == 0 && has_value) {
            const char *s = argv[++a];
            o.cupdate = strstr(s, "cupdate") != NULL;
            o.arity = strstr(s, "arity") != NULL;
        } else if (strcmp(argv[a], "--reps") == 0 && has_value) {
            o.reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--warmup") == 0 && has_value) {
            o.warmup = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--arity-dims") == 0 && has_value) {
            o.arity_dims = atoll(argv[++a]);
        } else if (strcmp(argv[a], "--max-arity") == 0 && has_value) {
            o.max_arity = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--copy-mib") == 0 && has_value) {
            o.copy_mib = atoll(argv[++a]);
        } else if (strcmp(argv[a], "--no-hold") == 0) {
            o.hold = false;
        } else if (strcmp(argv[a], "--no-flush") == 0) {
            o.flush = false;
        } else {
            usage(argv[0]);
        }
    }
    for (int d = 0; d < o.n_dims; ++d)
        if (o.dims[d] < 4 || o.dims[d] > 16384) {
            fprintf(stderr, "bench_cuda: dims %lld outside 4..16384\n", (long long)o.dims[d]);
            exit(2);
        }
    if (o.reps < 1 || o.warmup < 1 || o.arity_dims < 1 || o.arity_dims > 16384 || o.max_arity < 1 ||
        o.max_arity > PROD_SIGN_MAX_ARITY || o.copy_mib < 1 || (!o.layout_row && !o.layout_column) ||
        (!o.cupdate && !o.arity))
        usage(argv[0]);
    return o;
}

static void print_preamble(const bench *b)
{
    const options *o = &b->opt;
    printf("# dualcast on the GPU: the c-update and the arity sweep\n\n");
    printf("device: %s\n", dc_ctx_device_name(b->ctx));
    printf("copy bandwidth (cudaMemcpyAsync device to device, %lld MiB, bytes read + written): %.0f GB/s\n\n",
           (long long)o->copy_mib, b->copy_gbs);
    printf("What is timed, with CUDA events on the context's stream; medians of %d repetitions after %d warm-up "
           "round%s, each round running every variant once:\n",
           o->reps, o->warmup, o->warmup == 1 ? "" : "s");
    printf("- forward: the dc_broadcast_policy call (mixed) or the chain of primitive ops (pure reverse);\n");
    printf("- backward: dc_backward_with(tape, output, all-ones adjoint);\n");
    printf("- hand-fused: its one kernel, output and gradients together (listed as forward).\n");
    if (o->flush)
        printf("Not timed: dc_tape_reset, dc_tensor_zero_grad, an L2 flush before every repetition (%.0f MiB "
               "overwritten), the gradient checks.\n",
               (double)gpu_timer_flush_bytes(b->timer) / (1 << 20));
    else
        printf("Not timed: dc_tape_reset, dc_tensor_zero_grad, the gradient checks. L2 is not flushed between "
               "repetitions (--no-flush).\n");
    if (o->hold)
        printf("A waiting kernel holds the stream while the host queues each repetition, so the times are the "
               "GPU's running the queued kernels back to back, without the host's launch gaps (--no-hold "
               "includes them).\n");
    else
        printf("The host's launch gaps are included (--no-hold).\n");
    printf("GB/s counts the least bytes each pass must move, per element (float32, every input counted as read, "
           "control vectors negligible; k differentiable inputs, 4 for the c-update): mixed store forward and "
           "backward (2k+1)*4; recompute forward (k+1)*4, backward (2k+1)*4; hand-fused (2k+2)*4 in one pass. "
           "\"job\" divides the hand-fused count, the least the whole forward + backward must move, by each "
           "variant's total. The last column compares gradients with the hand-fused kernel's (the hand-fused "
           "row: with a CPU reference).\n\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    b.opt = parse_options(argc, argv);

    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    o.quiet = true;
    b.ctx = dc_ctx_new(&o, NULL);
    if (!b.ctx) {
        printf("bench_cuda: no usable CUDA device, nothing measured (%s)\n", dc_last_error(NULL));
        return 0;
    }
    b.stream = dc_ctx_cuda_stream(b.ctx);
    if (!b.stream) {
        printf("bench_cuda: the context has no CUDA stream, nothing measured\n");
        dc_ctx_free(b.ctx);
        return 0;
    }
    b.timer = gpu_timer_new(b.stream, b.opt.hold, b.opt.flush);
    b.copy_gbs = gpu_copy_gbs(b.timer, (size_t)b.opt.copy_mib << 20, 20);
    gpu_timer_take_hold_timeouts(b.timer);
    print_preamble(&b);

    all_results *all = checked_malloc(sizeof *all);
    memset(all, 0, sizeof *all);
    if (b.opt.cupdate)
        run_cupdate(&b, all);
    if (b.opt.arity)
        run_arity(&b, all);
    print_paper_measure(all);
    print_targets(&b, all);
    if (b.hold_timeouts > 0)
        printf("Note: in %d timed repetitions the host waited for the GPU while the stream was held; those "
               "times include the wait and the host's launch gaps.\n\n",
               b.hold_timeouts);

    free(all);
    gpu_timer_free(b.timer);
    dc_ctx_free(b.ctx);
    if (b.failed) {
        fprintf(stderr, "bench_cuda: gradients disagree (see above); the times are not of correct code\n");
        return 1;
    }
    return 0;
}
