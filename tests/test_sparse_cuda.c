/* The sparse ops on CUDA against the CPU: patterns built on the device,
 * every op's result and its gradients (values and dense operands) for
 * matrices with empty rows and columns, no entries, one entry, duplicates
 * and rectangular shapes, int32 and int64 indices, float32 and float64, on
 * both paths: with cuSPARSE taking the products it has deterministic
 * algorithms for, and with the library's kernels only (DC_CUSPARSE=0); the
 * same bits on every run, and in a captured graph. Exits 77 (skipped) when no CUDA device can be
 * used, or fails then if DC_REQUIRE_CUDA=1; tests/cuda_emulation runs it on
 * the CPU as test_sparse_emulated. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/sparse_cases.h"
#include "support/test_support.h"

DC_BFN_DECLARE(csr_edge);

static dc_ctx *gpu, *cpu;
static dc_ctx *own; /* CUDA without cuSPARSE: the library's kernels only */

static uint64_t cusparse_calls(const dc_ctx *ctx) { return dc_ctx_device_counters(ctx).cusparse_calls; }

/* The emulation's cuSPARSE refusing every layout (tests/cuda_emulation/
 * cusparse.h): no product goes there, the kernels run them all. */
static bool cusparse_refuses(void)
{
    const char *refuse = getenv("DC_EMU_CUSPARSE_REFUSE");
    return refuse && strcmp(refuse, "1") == 0;
}

/* Whether an op runs a product through cuSPARSE when it has one (and the
 * pattern has entries): A x and A X, forward or as an adjoint (of A^T X
 * with respect to X, of an SDDMM with respect to U), and the sampled
 * product (forward, or the values' adjoint of A X and A^T X). The
 * transposed view of X in spmm(view) has strided rows: the kernels take
 * its forward and every adjoint. */
static const bool via_cusparse[OP_COUNT] = {
    [OP_SPMV] = true, [OP_SPMV_T] = true, [OP_SPMM] = true, [OP_SPMM_T] = true, [OP_SDDMM] = true};

/* The op applied twice (so every adjoint writes and then adds), its
 * outputs weighted and summed; backward; the output and the operands'
 * gradients as doubles, in `got` (malloc'd each). */
static void run_op(dc_ctx *ctx, dc_dtype dtype, const coo_case *c, op_kind op, const double *const *data, double **got,
                   int64_t *sizes, int *n_got)
{
    dc_csr *a = dc_csr_from_coo(ctx, dtype, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
    TEST_NONNULL(ctx, a);
    int ndim[3];
    int64_t shape[3][2];
    bool is_values[3];
    const int n = sparse_op_operands(a, op, ndim, shape, is_values);
    dc_tensor *in[3];
    for (int m = 0; m < n; ++m) {
        in[m] = is_values[m] ? dc_csr_values(a) : test_tensor(ctx, dtype, ndim[m], shape[m], data[m]);
        TEST_NONNULL(ctx, in[m]);
        TEST_OK(ctx, dc_tensor_set_requires_grad(in[m], true));
    }
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y1 = sparse_op_apply(tape, a, op, in), *y2 = sparse_op_apply(tape, a, op, in);
    if (!y1 || !y2)
        fail_msg("%s on %s: %s", sparse_op_names[op], dc_ctx_device_name(ctx), dc_last_error(ctx));
    const int64_t ny = dc_tensor_numel(y1);
    double *w = malloc((size_t)(ny + 1) * sizeof *w);
    for (int64_t k = 0; k < ny; ++k)
        w[k] = 0.5 + sin(1.7 * (double)k);
    dc_tensor *wt = dc_tape_tensor_new(tape, dtype, dc_tensor_ndim(y1), dc_tensor_shape(y1), w);
    dc_tensor *loss = dc_op_add(tape, dc_op_sum(tape, dc_op_mul(tape, y1, wt), 0, NULL, false),
                                dc_op_sum(tape, dc_op_mul(tape, dc_op_mul(tape, y2, y2), wt), 0, NULL, false));
    TEST_NONNULL(ctx, loss);
    TEST_OK(ctx, dc_backward(tape, loss));
    got[0] = test_values(y1);
    sizes[0] = ny;
    for (int m = 0; m < n; ++m) {
        got[m + 1] = test_values(dc_tensor_grad(in[m]));
        sizes[m + 1] = dc_tensor_numel(in[m]);
    }
    *n_got = n + 1;
    free(w);
    dc_tape_free(tape);
    for (int m = 0; m < n; ++m)
        if (!is_values[m])
            dc_tensor_free(in[m]);
    dc_csr_free(a);
}

static void test_ops_match_cpu(void **state)
{
    (void)state;
    for (int wide = 0; wide < 2; ++wide) {
        sparse_set_index64(wide);
        for (int dt = 0; dt < 2; ++dt)
            for (int ci = 0; ci < sparse_n_cases; ++ci)
                for (int op = 0; op < OP_COUNT; ++op) {
                    if (!sparse_cases[ci].on_device)
                        continue;
                    /* the same operand values on both devices */
                    double *data[3];
                    for (int m = 0; m < 3; ++m) {
                        data[m] = malloc(64 * sizeof(double));
                        for (int k = 0; k < 64; ++k)
                            data[m][k] = cos(0.9 * k + m) * 0.8;
                    }
                    double *g[4];
                    int64_t sg[4];
                    int ng;
                    run_op(cpu, (dc_dtype)dt, &sparse_cases[ci], (op_kind)op, (const double *const *)data, g, sg, &ng);
                    for (int path = 0; path < 2; ++path) {
                        dc_ctx *dev = path == 0 ? gpu : own;
                        double *h[4];
                        int64_t sh[4];
                        int nh;
                        const uint64_t calls = cusparse_calls(dev);
                        run_op(dev, (dc_dtype)dt, &sparse_cases[ci], (op_kind)op, (const double *const *)data, h, sh,
                               &nh);
                        const bool expected =
                            path == 0 && via_cusparse[op] && sparse_cases[ci].nnz > 0 && !cusparse_refuses();
                        if ((cusparse_calls(dev) > calls) != expected)
                            fail_msg("%s, %s on the %s path: %llu cuSPARSE calls", sparse_cases[ci].name,
                                     sparse_op_names[op], path == 0 ? "cuSPARSE" : "kernel",
                                     (unsigned long long)(cusparse_calls(dev) - calls));
                        assert_int_equal(ng, nh);
                        for (int k = 0; k < ng; ++k) {
                            char what[160];
                            snprintf(what, sizeof what, "%s, %s, %s, int%d, %s path: %s", sparse_cases[ci].name,
                                     dc_dtype_name((dc_dtype)dt), sparse_op_names[op], wide ? 64 : 32,
                                     path == 0 ? "cuSPARSE" : "kernel", k == 0 ? "output" : "gradient");
                            assert_int_equal(sg[k], sh[k]);
                            const double tol = dt == DC_F32 ? 1e-5 : 1e-12;
                            test_assert_close(h[k], g[k], sg[k], tol, tol, what);
                            free(h[k]);
                        }
                    }
                    for (int k = 0; k < ng; ++k)
                        free(g[k]);
                    for (int m = 0; m < 3; ++m)
                        free(data[m]);
                }
    }
    sparse_set_index64(false);
}

/* Patterns built on the device read back as on the CPU; the transpose too. */
static void test_patterns_on_the_device(void **state)
{
    (void)state;
    const coo_case *c = &sparse_cases[0];
    dc_csr *a = dc_csr_from_coo(gpu, DC_F64, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
    dc_csr *b = dc_csr_from_coo(cpu, DC_F64, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
    TEST_NONNULL(gpu, a);
    dc_csr *at = dc_csr_transpose(a), *bt = dc_csr_transpose(b);
    TEST_NONNULL(gpu, at);
    int64_t pa[8], pb[8], ca[9], cb[9];
    TEST_OK(gpu, dc_csr_pattern_to_host(at, pa, ca));
    TEST_OK(cpu, dc_csr_pattern_to_host(bt, pb, cb));
    assert_memory_equal(pa, pb, sizeof pa);
    assert_memory_equal(ca, cb, sizeof ca);
    double *va = test_values(dc_csr_values(at)), *vb = test_values(dc_csr_values(bt));
    assert_memory_equal(va, vb, 9 * sizeof *va);
    free(va);
    free(vb);
    /* and from a dense tensor on the device */
    dc_tape *tape = dc_tape_new(gpu);
    dc_csr *d = dc_csr_from_dense(dc_op_csr_to_dense(tape, a, dc_csr_values(a)));
    TEST_NONNULL(gpu, d);
    assert_int_equal(dc_csr_nnz(d), 9);
    dc_tape_free(tape);
    dc_csr_free(d);
    dc_csr_free(at);
    dc_csr_free(bt);
    dc_csr_free(a);
    dc_csr_free(b);
}

/* Two runs of a product's forward and backward give the same bits, on
 * either path. */
static void same_bits_on(dc_ctx *dev)
{
    const coo_case *c = &sparse_cases[0];
    double *runs[2][3];
    for (int run = 0; run < 2; ++run) {
        dc_csr *a = dc_csr_from_coo(dev, DC_F32, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
        const int64_t sx[2] = {7, 33};
        double xs[7 * 33];
        for (int k = 0; k < 7 * 33; ++k)
            xs[k] = sin(0.37 * k);
        dc_tensor *x = test_tensor(dev, DC_F32, 2, sx, xs);
        TEST_OK(dev, dc_tensor_set_requires_grad(x, true));
        TEST_OK(dev, dc_tensor_set_requires_grad(dc_csr_values(a), true));
        dc_tape *tape = dc_tape_new(dev);
        dc_tensor *y = dc_op_spmm(tape, a, dc_csr_values(a), x, false);
        TEST_OK(dev, dc_backward(tape, dc_op_sum(tape, dc_op_mul(tape, y, y), 0, NULL, false)));
        runs[run][0] = test_values(y);
        runs[run][1] = test_values(dc_tensor_grad(x));
        runs[run][2] = test_values(dc_tensor_grad(dc_csr_values(a)));
        dc_tape_free(tape);
        dc_tensor_free(x);
        dc_csr_free(a);
    }
    assert_memory_equal(runs[0][0], runs[1][0], 5 * 33 * sizeof(double));
    assert_memory_equal(runs[0][1], runs[1][1], 7 * 33 * sizeof(double));
    assert_memory_equal(runs[0][2], runs[1][2], 9 * sizeof(double));
    for (int run = 0; run < 2; ++run)
        for (int k = 0; k < 3; ++k)
            free(runs[run][k]);
}

static void test_same_bits_every_run(void **state)
{
    (void)state;
    same_bits_on(gpu);
    same_bits_on(own);
}

/* A training step through every kind of sparse op, on float32
 * parameters: A's values, x [7, 4], u [5], v [7]. */
typedef struct sparse_step {
    dc_csr *a;
    dc_tensor *params[4];
    dc_optimizer *adam;
    dc_tape *tape;
} sparse_step;

static void sparse_step_init(sparse_step *s)
{
    const coo_case *c = &sparse_cases[0];
    s->a = dc_csr_from_coo(gpu, DC_F32, c->rows, c->cols, c->nnz, c->row, c->col, c->val, DC_COO_SUM);
    TEST_NONNULL(gpu, s->a);
    const int64_t shapes[3][2] = {{7, 4}, {5, 0}, {7, 0}};
    double init[28];
    s->params[0] = dc_csr_values(s->a);
    for (int m = 1; m < 4; ++m) {
        for (int k = 0; k < 28; ++k)
            init[k] = sin(0.7 * k + m);
        s->params[m] = test_tensor(gpu, DC_F32, m == 1 ? 2 : 1, shapes[m - 1], init);
    }
    for (int m = 0; m < 4; ++m)
        TEST_OK(gpu, dc_tensor_set_requires_grad(s->params[m], true));
    s->adam = dc_optimizer_adam(gpu, 4, s->params, NULL);
    TEST_NONNULL(gpu, s->adam);
    s->tape = dc_tape_new(gpu);
}

static void sparse_step_free(sparse_step *s)
{
    dc_tape_free(s->tape);
    dc_optimizer_free(s->adam);
    for (int m = 1; m < 4; ++m)
        dc_tensor_free(s->params[m]);
    dc_csr_free(s->a);
}

static dc_status run_sparse_step(void *user)
{
    sparse_step *st = user;
    dc_tape *tape = st->tape;
    const dc_csr *a = st->a;
    dc_tensor *vals = st->params[0], *x = st->params[1];
    dc_tape_reset(tape);
    const dc_csr_operand kinds[3] = {DC_CSR_ENTRY, DC_CSR_ROW, DC_CSR_COL};
    dc_tensor *in[3] = {vals, st->params[2], st->params[3]}, *w = NULL;
    dc_status status = dc_op_csr_broadcast(tape, DC_BFN_REF(csr_edge), a, 3, in, kinds, 1, &w);
    if (status != DC_OK)
        return status;
    dc_tensor *h = dc_op_spmm(tape, a, w, x, false); /* [5, 4] */
    dc_tensor *s = dc_op_sddmm(tape, a, h, x);       /* [9] */
    dc_tensor *t = dc_op_csr_transpose_values(tape, a, s);
    dc_tensor *r = dc_op_add(tape, dc_op_csr_row_sum(tape, a, t), dc_op_csr_row_sum(tape, a, s)); /* [5] */
    dc_tensor *d = dc_op_csr_sample(tape, a, dc_op_csr_to_dense(tape, a, s));
    dc_tensor *y = dc_op_add(tape, dc_op_spmv(tape, a, d, r, true), dc_op_csr_col_sum(tape, a, s)); /* [7] */
    dc_tensor *loss = dc_op_sum(tape, dc_op_mul(tape, y, y), 0, NULL, false);
    if (!loss)
        return dc_last_status(gpu);
    status = dc_backward(tape, loss);
    if (status == DC_OK)
        status = dc_optimizer_step(st->adam);
    dc_optimizer_zero_grad(st->adam);
    return status;
}

/* Once warm, the step makes the host wait for nothing and calls neither
 * cudaMalloc nor cudaFree. */
static void test_training_step_never_waits(void **state)
{
    (void)state;
    sparse_step st;
    sparse_step_init(&st);
    TEST_OK(gpu, dc_ctx_synchronize(gpu));
    dc_device_counters warm = {0, 0, 0, 0, 0, 0};
    for (int step = 0; step < 6; ++step) {
        const dc_device_counters at_start = dc_ctx_device_counters(gpu);
        if (step == 3)
            warm = at_start;
        TEST_OK(gpu, run_sparse_step(&st));
        const dc_device_counters now = dc_ctx_device_counters(gpu);
        if (step >= 3 && (now.host_waits != at_start.host_waits || now.malloc_calls != warm.malloc_calls ||
                          now.free_calls != warm.free_calls))
            fail_msg("step %d: %llu host waits, %llu cudaMalloc and %llu cudaFree calls in a warm step", step,
                     (unsigned long long)(now.host_waits - at_start.host_waits),
                     (unsigned long long)(now.malloc_calls - warm.malloc_calls),
                     (unsigned long long)(now.free_calls - warm.free_calls));
    }
    sparse_step_free(&st);
}

/* The step captured as a CUDA graph and replayed gives the parameters of
 * the same number of eager steps (seven), bit for bit. */
static void test_captured_step_matches_eager(void **state)
{
    (void)state;
    sparse_step eager, graphed;
    sparse_step_init(&eager);
    sparse_step_init(&graphed);
    for (int k = 0; k < 7; ++k)
        TEST_OK(gpu, run_sparse_step(&eager));
    for (int k = 0; k < 2; ++k) /* a warm step is captured: its tape has its memory */
        TEST_OK(gpu, run_sparse_step(&graphed));
    dc_status st = DC_OK;
    const uint64_t calls = cusparse_calls(gpu);
    dc_graph *g = dc_graph_capture(gpu, run_sparse_step, &graphed, &st); /* one step, then the capture */
    TEST_NONNULL(gpu, g);
    TEST_OK(gpu, st);
    if (dc_graph_fallback(g))
        fail_msg("the step was not captured: %s", dc_graph_fallback(g));
    /* the captured step's products went through cuSPARSE: it is in the graph */
    if ((cusparse_calls(gpu) > calls) != !cusparse_refuses())
        fail_msg("%llu cuSPARSE calls in the captured step", (unsigned long long)(cusparse_calls(gpu) - calls));
    for (int k = 0; k < 4; ++k)
        TEST_OK(gpu, dc_graph_replay(g));
    assert_int_equal(dc_graph_replays(g), 4);
    for (int m = 0; m < 4; ++m) {
        const int64_t n = dc_tensor_numel(eager.params[m]);
        double *a = test_values(eager.params[m]), *b = test_values(graphed.params[m]);
        if (memcmp(a, b, (size_t)n * sizeof *a) != 0)
            fail_msg("parameter %d differs between eager and replayed steps", m);
        free(a);
        free(b);
    }
    dc_graph_free(g);
    sparse_step_free(&eager);
    sparse_step_free(&graphed);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    const char *device = getenv("DC_DEVICE");
    o.backend = device && strncmp(device, "cuda", 4) == 0 ? DC_BACKEND_AUTO : DC_BACKEND_CUDA;
    o.seed = 1;
    dc_status st = DC_OK;
    gpu = dc_ctx_new(&o, &st);
    if (!gpu && st == DC_ERR_ARG) {
        printf("test_sparse_cuda: failed: %s\n", dc_last_error(NULL));
        return 1;
    }
    if (!gpu) {
        const char *require = getenv("DC_REQUIRE_CUDA");
        const bool required = require && strcmp(require, "1") == 0;
        printf("test_sparse_cuda: %s: no usable CUDA device: %s\n", required ? "failed (DC_REQUIRE_CUDA=1)" : "skipped",
               dc_last_error(NULL));
        return required ? 1 : 77; /* 77: CTest's skip code */
    }
    setenv("DC_CUSPARSE", "0", 1);
    own = dc_ctx_new(&o, NULL);
    unsetenv("DC_CUSPARSE");
    if (!own) {
        printf("test_sparse_cuda: failed: a second CUDA context: %s\n", dc_last_error(NULL));
        return 1;
    }
    o.backend = DC_BACKEND_CPU;
    cpu = dc_ctx_new(&o, NULL);
    printf("test_sparse_cuda: %s against %s\n", dc_ctx_device_name(gpu), dc_ctx_device_name(cpu));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_match_cpu),
        cmocka_unit_test(test_patterns_on_the_device),
        cmocka_unit_test(test_same_bits_every_run),
        cmocka_unit_test(test_training_step_never_waits),
        cmocka_unit_test(test_captured_step_matches_eager),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(cpu);
    dc_ctx_free(own);
    dc_ctx_free(gpu);
    return failed;
}
