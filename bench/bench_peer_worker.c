/* dualcast's side of the comparison with PyTorch and JAX: a worker that the
 * driver (bench/peers/compare.py) starts once per dualcast variant and talks
 * to over its standard input and output, one command per line, one reply
 * line per command ("ok ..." or "error MESSAGE"). The peers' workers
 * (bench/peers/peer_worker.py) answer the same commands, so the driver runs
 * every variant once per round, interleaved.
 *
 *   bench_peer_worker VARIANT        VARIANT: store | recompute | pure
 *
 * Commands:
 *   cupdate DIMS row|column DIR W  the paper's c-update on [DIMS, DIMS]; with
 *                                  W = 1, writes its inputs (z, zb, c, f, i, g)
 *                                  to DIR/NAME.npy
 *   prim add|mul|matmul|sum N DIR W  one primitive op on [N, N] inputs a, b
 *   hmlstm DIR W                   one HM-LSTM training step (hmlstm_problem.h)
 *   run                            one forward and backward: "ok TOTAL FWD BWD"
 *                                  in seconds
 *   grads DIR                      runs once more and writes the outputs and
 *                                  gradients to DIR/NAME.npy
 *   memstart                       (peers: starts the memory measurement;
 *                                  here it starts at the problem's setup)
 *   mem                            "ok RSS TAPE": peak resident bytes above
 *                                  the setup's, and the tape's peak bytes
 *   limits                         "ok STREAM COPY GEMM": streaming bandwidth
 *                                  (GB/s, 4 arrays in and 5 out; a copy) and
 *                                  the rate of one 4096^2 sgemm (GFLOP/s)
 *   quit
 *
 * The variant picks the c-update's and the HM-LSTM cell's form: mixed mode
 * storing or recomputing the partials, or pure reverse mode (primitive ops
 * and select). A primitive op is the same in every variant. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "cupdate_problem.h"
#include "hmlstm_problem.h"
#include "peer_io.h"

DC_BFN_DECLARE(hmlstm_update_c);

enum { V_STORE, V_RECOMPUTE, V_PURE };
enum { K_NONE, K_CUPDATE, K_PRIM, K_HMLSTM };
enum { OP_ADD, OP_MUL, OP_MATMUL, OP_SUM };

typedef struct worker {
    dc_ctx *ctx;
    dc_tape *tape;
    int variant, kind;
    /* c-update */
    int64_t dims;
    dc_tensor *z, *zb, *x[4];
    /* primitive op */
    int op;
    dc_tensor *a, *b;
    /* both: the all-ones output adjoint and the last output */
    dc_tensor *adjoint, *out;
    /* HM-LSTM */
    hm_problem hm;
    bool hm_ready;
    double loss;
    int64_t rss_base;
} worker;

static const char *const x_names[4] = {"c", "f", "i", "g"};

static void reply_error(const worker *w, const char *what)
{
    printf("error %s: %s\n", what, w->ctx ? dc_last_error(w->ctx) : "");
    fflush(stdout);
}

static void free_problem(worker *w)
{
    dc_tape_free(w->tape);
    w->tape = NULL;
    dc_tensor_free(w->z);
    dc_tensor_free(w->zb);
    for (int k = 0; k < 4; ++k)
        dc_tensor_free(w->x[k]);
    dc_tensor_free(w->a);
    dc_tensor_free(w->b);
    dc_tensor_free(w->adjoint);
    w->z = w->zb = w->a = w->b = w->adjoint = w->out = NULL;
    memset(w->x, 0, sizeof w->x);
    if (w->hm_ready)
        hm_problem_free(&w->hm);
    w->hm_ready = false;
    w->kind = K_NONE;
}

/* A persistent tensor from host values; requires a gradient when asked. */
static dc_tensor *leaf(worker *w, const int64_t *shape, const float *v, bool grad)
{
    dc_tensor *t = dc_tensor_from_host(w->ctx, DC_F32, 2, shape, v);
    if (t && grad)
        dc_tensor_set_requires_grad(t, true);
    return t;
}

static dc_tensor *ones(worker *w, int ndim, const int64_t *shape)
{
    dc_tensor *t = dc_tensor_new(w->ctx, DC_F32, ndim, shape);
    if (t && dc_tensor_fill(t, 1.0) != DC_OK) {
        dc_tensor_free(t);
        return NULL;
    }
    return t;
}

/* The inputs of bench_cupdate: control random per row or per column with the
 * first three forced to FLUSH, COPY and UPDATE; c, f, i, g uniform in
 * [-2, 2). */
static int setup_cupdate(worker *w, int64_t dims, bool per_row, const char *dir, bool write)
{
    w->dims = dims;
    const int64_t shape[2] = {dims, dims}, cshape[2] = {per_row ? dims : 1, per_row ? 1 : dims};
    float *vz = malloc((size_t)dims * sizeof *vz), *vzb = malloc((size_t)dims * sizeof *vzb);
    float *tmp = malloc((size_t)(dims * dims) * sizeof *tmp);
    if (!vz || !vzb || !tmp) {
        free(vz);
        free(vzb);
        free(tmp);
        return -1;
    }
    cupdate_control_values(dims, vz, vzb);
    w->z = leaf(w, cshape, vz, false);
    w->zb = leaf(w, cshape, vzb, false);
    for (int k = 0; k < 4; ++k) {
        bench_fill_uniform(tmp, dims * dims, -2.0f, 2.0f, 11 + (uint64_t)k);
        w->x[k] = leaf(w, shape, tmp, true);
    }
    free(vz);
    free(vzb);
    free(tmp);
    w->adjoint = ones(w, 2, shape);
    if (!w->z || !w->zb || !w->x[0] || !w->x[1] || !w->x[2] || !w->x[3] || !w->adjoint)
        return -1;
    dc_status st = DC_OK;
    if (write) {
        st = npy_write_tensor(dir, "z", w->z);
        if (st == DC_OK)
            st = npy_write_tensor(dir, "zb", w->zb);
        for (int k = 0; k < 4 && st == DC_OK; ++k)
            st = npy_write_tensor(dir, x_names[k], w->x[k]);
    }
    w->kind = K_CUPDATE;
    return st == DC_OK ? 0 : -1;
}

static int setup_prim(worker *w, int op, int64_t n, const char *dir, bool write)
{
    const int64_t shape[2] = {n, n};
    float *tmp = malloc((size_t)(n * n) * sizeof *tmp);
    if (!tmp)
        return -1;
    w->op = op;
    bench_fill_uniform(tmp, n * n, -1.0f, 1.0f, 21);
    w->a = leaf(w, shape, tmp, true);
    bench_fill_uniform(tmp, n * n, -1.0f, 1.0f, 22);
    w->b = op == OP_SUM ? NULL : leaf(w, shape, tmp, true);
    free(tmp);
    w->adjoint = op == OP_SUM ? ones(w, 0, NULL) : ones(w, 2, shape);
    if (!w->a || (op != OP_SUM && !w->b) || !w->adjoint)
        return -1;
    dc_status st = DC_OK;
    if (write) {
        st = npy_write_tensor(dir, "a", w->a);
        if (st == DC_OK && w->b)
            st = npy_write_tensor(dir, "b", w->b);
    }
    w->kind = K_PRIM;
    return st == DC_OK ? 0 : -1;
}

static int setup_hmlstm(worker *w, const char *dir, bool write)
{
    char err[512];
    if (hm_problem_init(&w->hm, w->ctx, NULL, err, sizeof err) != 0) {
        printf("error hmlstm: %s\n", err);
        fflush(stdout);
        return 1; /* already answered */
    }
    w->hm_ready = true;
    w->kind = K_HMLSTM;
    return write && hm_problem_write_inputs(&w->hm, dir) != DC_OK ? -1 : 0;
}

static dc_tensor *prim_forward(worker *w)
{
    switch (w->op) {
    case OP_ADD:
        return dc_op_add(w->tape, w->a, w->b);
    case OP_MUL:
        return dc_op_mul(w->tape, w->a, w->b);
    case OP_MATMUL:
        return dc_op_matmul(w->tape, w->a, w->b);
    default:
        return dc_op_sum(w->tape, w->a, 0, NULL, false);
    }
}

/* One forward and backward pass; seconds through t. */
static dc_status run_once(worker *w, double *t_fwd, double *t_bwd)
{
    if (w->kind == K_HMLSTM)
        return hm_problem_step(&w->hm, w->tape, w->variant == V_PURE ? HM_CELL_PURE : HM_CELL_MIXED,
                               w->variant == V_RECOMPUTE ? DC_PARTIALS_RECOMPUTE : DC_PARTIALS_STORE, &w->loss, t_fwd,
                               t_bwd);
    dc_tape_reset(w->tape);
    dc_tensor *leaves[4] = {w->a, w->b, NULL, NULL};
    if (w->kind == K_CUPDATE)
        memcpy(leaves, w->x, sizeof leaves);
    for (int k = 0; k < 4; ++k)
        dc_tensor_zero_grad(leaves[k]);
    const double t0 = bench_now();
    if (w->kind == K_PRIM) {
        w->out = prim_forward(w);
    } else if (w->variant == V_PURE) {
        w->out = cupdate_pure(w->tape, w->z, w->zb, w->x);
    } else {
        dc_tensor *in[6] = {w->z, w->zb, w->x[0], w->x[1], w->x[2], w->x[3]};
        if (dc_broadcast_policy(w->tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &w->out,
                                w->variant == V_STORE ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE) != DC_OK)
            w->out = NULL;
    }
    const double t1 = bench_now();
    dc_status st = w->out ? dc_backward_with(w->tape, w->out, w->adjoint) : dc_last_status(w->ctx);
    const double t2 = bench_now();
    *t_fwd = t1 - t0;
    *t_bwd = t2 - t1;
    return st;
}

static dc_status write_grads(worker *w, const char *dir)
{
    double f, b;
    dc_status st = run_once(w, &f, &b);
    if (st != DC_OK)
        return st;
    if (w->kind == K_HMLSTM)
        return hm_problem_write_grads(&w->hm, dir, w->loss);
    st = npy_write_tensor(dir, "out", w->out);
    if (w->kind == K_CUPDATE) {
        for (int k = 0; k < 4 && st == DC_OK; ++k)
            st = npy_write_tensor(dir, x_names[k], dc_tensor_grad(w->x[k]));
    } else {
        if (st == DC_OK)
            st = npy_write_tensor(dir, "a", dc_tensor_grad(w->a));
        if (st == DC_OK && w->b)
            st = npy_write_tensor(dir, "b", dc_tensor_grad(w->b));
    }
    return st;
}

/* GFLOP/s of one n x n x n sgemm: the median of three after a warm-up. */
static double gemm_gflops(int64_t n)
{
    float *a = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
    float *b = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
    float *c = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return NAN;
    }
    bench_fill_uniform(a, n * n, -1.0f, 1.0f, 31);
    bench_fill_uniform(b, n * n, -1.0f, 1.0f, 32);
    double t[3];
    for (int r = -1; r < 3; ++r) {
        const double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f,
                    c, (int)n);
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * (double)n * (double)n * (double)n / bench_median(t, 3) / 1e9;
}

static int parse_op(const char *s)
{
    return !s                     ? -1
           : !strcmp(s, "add")    ? OP_ADD
           : !strcmp(s, "mul")    ? OP_MUL
           : !strcmp(s, "matmul") ? OP_MATMUL
           : !strcmp(s, "sum")    ? OP_SUM
                                  : -1;
}

/* Sets up a problem from the rest of the command line; replies. */
static void setup(worker *w, const char *cmd)
{
    free_problem(w);
    w->tape = dc_tape_new(w->ctx);
    if (!w->tape) {
        reply_error(w, "tape");
        return;
    }
    int rc = -1;
    if (!strcmp(cmd, "cupdate")) {
        const char *dims = strtok(NULL, " \n"), *layout = strtok(NULL, " \n");
        const char *dir = strtok(NULL, " \n"), *write = strtok(NULL, " \n");
        const int64_t d = dims ? atoll(dims) : 0;
        if (d < 4 || d > 16384 || !layout || !dir || !write) {
            printf("error usage: cupdate DIMS row|column DIR 0|1\n");
            fflush(stdout);
            return;
        }
        rc = setup_cupdate(w, d, strcmp(layout, "row") == 0, dir, atoi(write) != 0);
    } else if (!strcmp(cmd, "prim")) {
        const int op = parse_op(strtok(NULL, " \n"));
        const char *n = strtok(NULL, " \n"), *dir = strtok(NULL, " \n"), *write = strtok(NULL, " \n");
        const int64_t size = n ? atoll(n) : 0;
        if (op < 0 || size < 1 || size > 16384 || !dir || !write) {
            printf("error usage: prim add|mul|matmul|sum N DIR 0|1\n");
            fflush(stdout);
            return;
        }
        rc = setup_prim(w, op, size, dir, atoi(write) != 0);
    } else {
        const char *dir = strtok(NULL, " \n"), *write = strtok(NULL, " \n");
        if (!dir || !write) {
            printf("error usage: hmlstm DIR 0|1\n");
            fflush(stdout);
            return;
        }
        rc = setup_hmlstm(w, dir, atoi(write) != 0);
        if (rc == 1)
            return;
    }
    if (rc != 0) {
        reply_error(w, cmd);
        return;
    }
    /* the memory a step needs is measured from here: the inputs exist, the
     * tape is empty */
    proc_reset_peak_rss();
    w->rss_base = proc_rss_bytes();
    printf("ok\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    worker w;
    memset(&w, 0, sizeof w);
    if (argc != 2 || (strcmp(argv[1], "store") && strcmp(argv[1], "recompute") && strcmp(argv[1], "pure"))) {
        fprintf(stderr, "usage: %s store|recompute|pure   (then commands on standard input)\n", argv[0]);
        return 2;
    }
    w.variant = !strcmp(argv[1], "store") ? V_STORE : !strcmp(argv[1], "recompute") ? V_RECOMPUTE : V_PURE;
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    w.ctx = dc_ctx_new(&o, NULL);
    if (!w.ctx) {
        printf("error context: %s\n", dc_last_error(NULL));
        return 1;
    }
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        const char *cmd = strtok(line, " \n");
        if (!cmd)
            continue;
        if (!strcmp(cmd, "quit"))
            break;
        if (!strcmp(cmd, "cupdate") || !strcmp(cmd, "prim") || !strcmp(cmd, "hmlstm")) {
            setup(&w, cmd);
        } else if (!strcmp(cmd, "run")) {
            double f = 0, b = 0;
            if (w.kind == K_NONE || run_once(&w, &f, &b) != DC_OK)
                reply_error(&w, "run");
            else
                printf("ok %.9g %.9g %.9g\n", f + b, f, b);
        } else if (!strcmp(cmd, "grads")) {
            const char *dir = strtok(NULL, " \n");
            if (w.kind == K_NONE || !dir || write_grads(&w, dir) != DC_OK)
                reply_error(&w, "grads");
            else
                printf("ok\n");
        } else if (!strcmp(cmd, "memstart")) {
            printf("ok\n");
        } else if (!strcmp(cmd, "mem")) {
            printf("ok %lld %lld\n", (long long)(proc_peak_rss_bytes() - w.rss_base),
                   (long long)dc_tape_peak_bytes(w.tape));
        } else if (!strcmp(cmd, "limits")) {
            const double stream = bench_stream_gbs(4096LL * 4096, 4, 5, 7);
            const double copy = bench_stream_gbs(4096LL * 4096, 1, 1, 7);
            printf("ok %.3f %.3f %.3f\n", stream, copy, gemm_gflops(4096));
        } else {
            printf("error unknown command %s\n", cmd);
        }
        fflush(stdout);
    }
    free_problem(&w);
    dc_ctx_free(w.ctx);
    return 0;
}
