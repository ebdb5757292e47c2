/* dualcast's side of the comparison with PyTorch and JAX: a worker that the
 * driver (bench/peers/compare.py) starts once per dualcast variant and talks
 * to over its standard input and output, one command per line, one reply
 * line per command ("ok ..." or "error MESSAGE"). The peers' workers
 * (bench/peers/peer_worker.py) answer the same commands, so the driver runs
 * every variant once per round, interleaved.
 *
 *   bench_peer_worker VARIANT [--device cpu|cuda] [--graph] [--corpus PATH]
 *
 * VARIANT: store | recompute | pure. --device: the context's backend (cpu,
 * the default; cuda fails at once without a usable device). --graph: every
 * iteration replays the step captured once as a CUDA graph
 * (include/dualcast/graph.h; on the CPU the graph runs the step eagerly, so
 * the same commands work there). --corpus: the fortunes corpus of the
 * HM-LSTM step (default hmlstm_problem.h's HM_PROBLEM_CORPUS).
 *
 * Commands:
 *   cupdate DIMS row|column DIR W  the paper's c-update on [DIMS, DIMS]; with
 *                                  W = 1, writes its inputs (z, zb, c, f, i, g)
 *                                  to DIR/NAME.npy
 *   prim add|mul|matmul|sum N DIR W  one primitive op on [N, N] inputs a, b
 *   hmlstm DIR W                   one HM-LSTM training step (hmlstm_problem.h)
 *   run                            one forward and backward: "ok TOTAL FWD BWD"
 *                                  in seconds. On the CPU without --graph,
 *                                  timed around the calls (the HM-LSTM's
 *                                  loss read back); on CUDA or with --graph,
 *                                  one iteration from a synchronized device
 *                                  to the device synchronized after it, and
 *                                  FWD and BWD are -1 (unknown: the passes
 *                                  run asynchronously, or as one graph)
 *   burst N                        N iterations queued back to back, the
 *                                  device synchronized once before and once
 *                                  after them: "ok SECONDS" per iteration
 *   grads DIR                      runs once more and writes the outputs and
 *                                  gradients to DIR/NAME.npy
 *   memstart                       (peers: starts the memory measurement;
 *                                  here it starts at the problem's setup)
 *   mem                            "ok RSS TAPE": peak resident bytes above
 *                                  the setup's, and the tape's peak bytes
 *   graph                          "ok CAPTURES REPLAYS KERNELS" of --graph's
 *                                  graph (include/dualcast/graph.h; zeros
 *                                  without one, or where it runs eagerly)
 *   device                         "ok NAME": the context's device
 *                                  (dc_ctx_device_name)
 *   limits                         "ok STREAM COPY GEMM": streaming bandwidth
 *                                  (GB/s, 4 arrays in and 5 out; a copy) and
 *                                  the rate of one 4096^2 sgemm (GFLOP/s)
 *   quit
 *
 * The variant picks the c-update's and the HM-LSTM cell's form: mixed mode
 * storing or recomputing the partials, or pure reverse mode (primitive ops
 * and select). A primitive op is the same in every variant.
 *
 * An iteration (an "iterate" below) is the tape reset, the inputs'
 * gradients zeroed, the forward pass and the backward pass into the inputs'
 * (the HM-LSTM's parameters') gradients, and nothing that waits for the
 * device: no clipping or optimizer step (bench_hmlstm_step times those), so
 * that every iteration computes the gradients of the same inputs, which the
 * driver compares across frameworks. */
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
    bool on_cuda, use_graph;
    const char *corpus; /* NULL: HM_PROBLEM_CORPUS */
    /* with --graph: the problem's iteration, captured at its setup */
    dc_graph *graph;
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
    dc_tensor *hm_loss; /* the loss tensor of the last iteration, on the tape */
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
    /* the graph points at the tape's and the tensors' memory: freed first */
    dc_graph_free(w->graph);
    w->graph = NULL;
    dc_tape_free(w->tape);
    w->tape = NULL;
    dc_tensor_free(w->z);
    dc_tensor_free(w->zb);
    for (int k = 0; k < 4; ++k)
        dc_tensor_free(w->x[k]);
    dc_tensor_free(w->a);
    dc_tensor_free(w->b);
    dc_tensor_free(w->adjoint);
    w->z = w->zb = w->a = w->b = w->adjoint = w->out = w->hm_loss = NULL;
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
    if (hm_problem_init(&w->hm, w->ctx, w->corpus, err, sizeof err) != 0) {
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

/* The c-update's and a primitive op's iteration in three parts, so that
 * run_once can time the passes: the tape reset and the inputs' gradients
 * zeroed, the forward pass (its output in w->out), the backward pass. */
static void prepare_iteration(worker *w)
{
    dc_tape_reset(w->tape);
    dc_tensor *leaves[4] = {w->a, w->b, NULL, NULL};
    if (w->kind == K_CUPDATE)
        memcpy(leaves, w->x, sizeof leaves);
    for (int k = 0; k < 4; ++k)
        dc_tensor_zero_grad(leaves[k]);
}

static void queue_forward(worker *w)
{
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
}

static dc_status queue_backward(worker *w)
{
    return w->out ? dc_backward_with(w->tape, w->out, w->adjoint) : dc_last_status(w->ctx);
}

static hm_cell_kind hm_cell(const worker *w)
{
    return w->variant == V_PURE ? HM_CELL_PURE : HM_CELL_MIXED;
}

static dc_partials_policy hm_policy(const worker *w)
{
    return w->variant == V_RECOMPUTE ? DC_PARTIALS_RECOMPUTE : DC_PARTIALS_STORE;
}

/* One forward and backward pass timed around the calls (the CPU's "run");
 * seconds through t. */
static dc_status run_once(worker *w, double *t_fwd, double *t_bwd)
{
    if (w->kind == K_HMLSTM)
        return hm_problem_step(&w->hm, w->tape, hm_cell(w), hm_policy(w), &w->loss, t_fwd, t_bwd);
    prepare_iteration(w);
    const double t0 = bench_now();
    queue_forward(w);
    const double t1 = bench_now();
    const dc_status st = queue_backward(w);
    const double t2 = bench_now();
    *t_fwd = t1 - t0;
    *t_bwd = t2 - t1;
    return st;
}

/* One iteration queued, as a dc_step_fn (so that it can be captured): the
 * work of run_once without its clocks and without reading anything back. */
static dc_status queue_iteration(void *user)
{
    worker *w = user;
    if (w->kind == K_HMLSTM) {
        const dc_status st = hm_problem_forward(&w->hm, w->tape, hm_cell(w), hm_policy(w), &w->hm_loss);
        return st == DC_OK ? dc_backward(w->tape, w->hm_loss) : st;
    }
    prepare_iteration(w);
    queue_forward(w);
    return queue_backward(w);
}

/* One iteration: the captured graph replayed, or the iteration queued. */
static dc_status iterate(worker *w)
{
    return w->graph ? dc_graph_replay(w->graph) : queue_iteration(w);
}

/* The iterations timed from a device at rest to the device at rest again,
 * as every variant is timed on CUDA (and on the CPU with --graph): "run"
 * with count 1, "burst" with more. Seconds per iteration through *seconds. */
static dc_status time_iterations(worker *w, int count, double *seconds)
{
    dc_status st = dc_ctx_synchronize(w->ctx);
    if (st != DC_OK)
        return st;
    const double t0 = bench_now();
    for (int i = 0; i < count && st == DC_OK; ++i)
        st = iterate(w);
    if (st == DC_OK)
        st = dc_ctx_synchronize(w->ctx);
    *seconds = (bench_now() - t0) / count;
    return st;
}

/* "run": on the CPU without a graph, the forward and backward times as
 * before; else one synchronized iteration (FWD and BWD unknown: -1). */
static dc_status run_timed(worker *w, double *total, double *t_fwd, double *t_bwd)
{
    if (!w->on_cuda && !w->use_graph) {
        const dc_status st = run_once(w, t_fwd, t_bwd);
        *total = *t_fwd + *t_bwd;
        return st;
    }
    *t_fwd = *t_bwd = -1;
    return time_iterations(w, 1, total);
}

/* The graph of the problem just set up: one eager iteration first (the
 * tape's memory grows in it), then the capture, which runs the iteration
 * once more and records it. On CUDA a step that could not be captured is an
 * error (the variant would not be what its name says); the CPU backend
 * always runs it eagerly. */
static int capture_graph(worker *w)
{
    if (queue_iteration(w) != DC_OK) {
        reply_error(w, "graph warm-up");
        return -1;
    }
    dc_status st = DC_OK;
    w->graph = dc_graph_capture(w->ctx, queue_iteration, w, &st);
    if (!w->graph) {
        reply_error(w, "graph capture");
        return -1;
    }
    /* a capture refused because the step wanted new device memory is tried
     * again at the next replays (each runs the step eagerly first) */
    for (int retry = 0; retry < 4 && w->on_cuda && dc_graph_fallback(w->graph); ++retry)
        if (dc_graph_replay(w->graph) != DC_OK) {
            reply_error(w, "graph replay");
            return -1;
        }
    if (w->on_cuda && dc_graph_fallback(w->graph)) {
        printf("error graph capture: the step runs eagerly: %s\n", dc_graph_fallback(w->graph));
        return -1;
    }
    return 0;
}

static dc_status write_grads(worker *w, const char *dir)
{
    double f, b, total;
    dc_status st = run_timed(w, &total, &f, &b);
    if (st != DC_OK)
        return st;
    if (w->kind == K_HMLSTM && (w->on_cuda || w->use_graph))
        st = dc_tensor_item(w->hm_loss, &w->loss); /* run_once reads it itself */
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
    if (w->use_graph && capture_graph(w) != 0) {
        free_problem(w);
        fflush(stdout);
        return;
    }
    /* the memory a step needs is measured from here: the inputs exist, the
     * tape is empty */
    proc_reset_peak_rss();
    w->rss_base = proc_rss_bytes();
    printf("ok\n");
    fflush(stdout);
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s store|recompute|pure [--device cpu|cuda] [--graph] [--corpus PATH]"
            "   (then commands on standard input)\n",
            argv0);
    return 2;
}

int main(int argc, char **argv)
{
    worker w;
    memset(&w, 0, sizeof w);
    if (argc < 2 || (strcmp(argv[1], "store") && strcmp(argv[1], "recompute") && strcmp(argv[1], "pure")))
        return usage(argv[0]);
    w.variant = !strcmp(argv[1], "store") ? V_STORE : !strcmp(argv[1], "recompute") ? V_RECOMPUTE : V_PURE;
    for (int a = 2; a < argc; ++a) {
        if (!strcmp(argv[a], "--device") && a + 1 < argc &&
            (!strcmp(argv[a + 1], "cpu") || !strcmp(argv[a + 1], "cuda")))
            w.on_cuda = !strcmp(argv[++a], "cuda");
        else if (!strcmp(argv[a], "--graph"))
            w.use_graph = true;
        else if (!strcmp(argv[a], "--corpus") && a + 1 < argc)
            w.corpus = argv[++a];
        else
            return usage(argv[0]);
    }
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = w.on_cuda ? DC_BACKEND_CUDA : DC_BACKEND_CPU; /* cuda_tf32 stays off: float32 products */
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
            double total = 0, f = 0, b = 0;
            if (w.kind == K_NONE || run_timed(&w, &total, &f, &b) != DC_OK)
                reply_error(&w, "run");
            else
                printf("ok %.9g %.9g %.9g\n", total, f, b);
        } else if (!strcmp(cmd, "burst")) {
            const char *n = strtok(NULL, " \n");
            const int count = n ? atoi(n) : 0;
            double per_iteration = 0;
            if (count < 1 || count > 1000000)
                printf("error usage: burst N (1 to 1000000)\n");
            else if (w.kind == K_NONE || time_iterations(&w, count, &per_iteration) != DC_OK)
                reply_error(&w, "burst");
            else
                printf("ok %.9g\n", per_iteration);
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
        } else if (!strcmp(cmd, "graph")) {
            printf("ok %lld %lld %lld\n", (long long)dc_graph_captures(w.graph), (long long)dc_graph_replays(w.graph),
                   (long long)dc_graph_kernels(w.graph));
        } else if (!strcmp(cmd, "device")) {
            printf("ok %s\n", dc_ctx_device_name(w.ctx));
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
