/* Sparse matrices (include/dualcast/sparse.h): the forward time (the op
 * alone, nothing recorded) and the gradient time (the op recorded, then its
 * adjoint from an all-ones output adjoint), each the median wall time of one
 * iteration from the device at rest to the device at rest
 * (dc_ctx_synchronize), forward and gradient iterations alternating
 * (bench_step_medians), the way bench/peers/sparse_peers.py times SciPy,
 * PyTorch and JAX on the same inputs. float32.
 *
 *   bench_sparse [--device cpu|cuda] [--reps N] [--reps-small N]
 *                [--ops dot,spmv,spmm] [--dump DIR]
 *
 * Cases (the first two are NiLang's sparse benchmark, real rather than
 * complex):
 *   dot   sum_k a_k b_k: the Frobenius product of two 1000 x 1000 matrices
 *         of density 5% with the same pattern, as the values' product then
 *         their sum (dc_op_mul, dc_op_sum); gradients: both values.
 *   spmv  y = A v, A as above, v: [1000]; gradients: A's values and v.
 *   spmm  Y = A X, A: 100,000 x 100,000 with 10 entries per row, X:
 *         [100000, 64]; gradients: A's values and X.
 * Patterns: each entry of the small matrix is present with probability
 * 0.05; each row of the large one has 10 distinct uniform columns. Values
 * and dense operands uniform in [-1, 1], from fixed seeds.
 * --reps N: iterations timed for spmm (15); --reps-small: for the others (200).
 * --dump DIR writes the patterns (<p>_row_ptr.npy, <p>_col_idx.npy, int64;
 * p = small, large), the values and operands (small_a, small_b, small_v,
 * large_a, large_x) and each case's output and gradients (<case>_out,
 * <case>_grad_a and <case>_grad_b / _grad_v / _grad_x). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"
#include "peer_io.h"

enum { SMALL = 1000, LARGE = 100000, LARGE_PER_ROW = 10, LARGE_COLS = 64 };
#define SMALL_DENSITY 0.05

typedef enum kind { K_DOT, K_SPMV, K_SPMM } kind;

typedef struct bench_case {
    const char *name;
    kind kind;
    const char *second; /* the other gradient's name in the dump */
} bench_case;

static const bench_case cases[] = {{"dot", K_DOT, "grad_b"}, {"spmv", K_SPMV, "grad_v"}, {"spmm", K_SPMM, "grad_x"}};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_sparse: %s: %s\n", what, ctx ? dc_last_error(ctx) : dc_last_error(NULL));
    exit(1);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A matrix with its pattern kept on the host for the dump. */
typedef struct matrix {
    dc_csr *a;
    int64_t rows, nnz;
    int64_t *row_ptr, *col_idx;
} matrix;

static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        die(NULL, "out of host memory");
    return p;
}

static dc_tensor *uniform(dc_ctx *ctx, int ndim, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    float *v = host_alloc((size_t)n * sizeof *v);
    bench_fill_uniform(v, n, -1.0f, 1.0f, seed);
    dc_tensor *t = dc_tensor_from_host(ctx, DC_F32, ndim, shape, v);
    free(v);
    if (!t || dc_tensor_set_requires_grad(t, true) != DC_OK)
        die(ctx, "a dense operand");
    return t;
}

/* rows x rows: per_row > 0 distinct uniform columns in each row, else each
 * entry present with probability SMALL_DENSITY. */
static void make_matrix(dc_ctx *ctx, int64_t rows, int per_row, uint64_t seed, matrix *m)
{
    uint64_t s = seed;
    const int64_t cap = per_row > 0 ? rows * per_row : rows * rows;
    m->rows = rows;
    m->row_ptr = host_alloc((size_t)(rows + 1) * sizeof *m->row_ptr);
    m->col_idx = host_alloc((size_t)cap * sizeof *m->col_idx);
    int64_t nnz = 0;
    m->row_ptr[0] = 0;
    for (int64_t i = 0; i < rows; ++i) {
        if (per_row > 0) {
            int64_t *c = m->col_idx + nnz;
            for (int k = 0; k < per_row; ++k) { /* insertion, redrawing a repeat */
                int64_t j, at;
                do {
                    j = (int64_t)(next(&s) % (uint64_t)rows);
                    for (at = k; at > 0 && c[at - 1] > j; --at)
                        ;
                } while (at > 0 && c[at - 1] == j);
                memmove(c + at + 1, c + at, (size_t)(k - at) * sizeof *c);
                c[at] = j;
            }
            nnz += per_row;
        } else {
            for (int64_t j = 0; j < rows; ++j)
                if ((double)(next(&s) >> 11) * 0x1p-53 < SMALL_DENSITY)
                    m->col_idx[nnz++] = j;
        }
        m->row_ptr[i + 1] = nnz;
    }
    m->nnz = nnz;
    float *vf = host_alloc((size_t)nnz * sizeof *vf);
    double *v = host_alloc((size_t)nnz * sizeof *v);
    bench_fill_uniform(vf, nnz, -1.0f, 1.0f, seed + 1);
    for (int64_t k = 0; k < nnz; ++k)
        v[k] = vf[k];
    m->a = dc_csr_from_csr(ctx, DC_F32, rows, rows, nnz, m->row_ptr, m->col_idx, v);
    free(vf);
    free(v);
    if (!m->a || dc_tensor_set_requires_grad(dc_csr_values(m->a), true) != DC_OK)
        die(ctx, "a matrix");
}

static void free_matrix(matrix *m)
{
    dc_csr_free(m->a);
    free(m->row_ptr);
    free(m->col_idx);
}

typedef struct inputs {
    matrix small, large;
    dc_tensor *b, *v, *x;             /* B's values, v, X */
    dc_tensor *one, *ones_v, *ones_x; /* the outputs' adjoints */
} inputs;

static dc_tensor *ones(dc_ctx *ctx, int ndim, const int64_t *shape)
{
    dc_tensor *t = dc_tensor_new(ctx, DC_F32, ndim, shape);
    if (!t || dc_tensor_fill(t, 1) != DC_OK)
        die(ctx, "ones");
    return t;
}

static void make_inputs(dc_ctx *ctx, inputs *in)
{
    make_matrix(ctx, SMALL, 0, 11, &in->small);
    make_matrix(ctx, LARGE, LARGE_PER_ROW, 21, &in->large);
    const int64_t nnz = in->small.nnz, n = SMALL, xs[2] = {LARGE, LARGE_COLS};
    in->b = uniform(ctx, 1, &nnz, 13);
    in->v = uniform(ctx, 1, &n, 15);
    in->x = uniform(ctx, 2, xs, 23);
    in->one = ones(ctx, 0, NULL);
    in->ones_v = ones(ctx, 1, &n);
    in->ones_x = ones(ctx, 2, xs);
}

static void free_inputs(inputs *in)
{
    free_matrix(&in->small);
    free_matrix(&in->large);
    dc_tensor_free(in->b);
    dc_tensor_free(in->v);
    dc_tensor_free(in->x);
    dc_tensor_free(in->one);
    dc_tensor_free(in->ones_v);
    dc_tensor_free(in->ones_x);
}

static const matrix *matrix_of(const inputs *in, const bench_case *c)
{
    return c->kind == K_SPMM ? &in->large : &in->small;
}

/* The case's other differentiated input: B's values, v or X. */
static dc_tensor *second_of(const inputs *in, const bench_case *c)
{
    return c->kind == K_DOT ? in->b : c->kind == K_SPMV ? in->v : in->x;
}

/* A case on the inputs: bench_step's argument. */
typedef struct case_on {
    const bench_case *c;
    const inputs *in;
} case_on;

static dc_tensor *run_case(dc_tape *tape, const void *arg)
{
    const case_on *k = arg;
    const inputs *in = k->in;
    dc_tensor *a = dc_csr_values(matrix_of(in, k->c)->a);
    switch (k->c->kind) {
    case K_DOT: {
        dc_tensor *ab = dc_op_mul(tape, a, in->b);
        return ab ? dc_op_sum(tape, ab, 0, NULL, false) : NULL;
    }
    case K_SPMV:
        return dc_op_spmv(tape, in->small.a, a, in->v, false);
    case K_SPMM:
        return dc_op_spmm(tape, in->large.a, a, in->x, false);
    }
    return NULL;
}

static const dc_tensor *seed_of(const void *arg)
{
    const case_on *k = arg;
    return k->c->kind == K_DOT ? k->in->one : k->c->kind == K_SPMV ? k->in->ones_v : k->in->ones_x;
}

static bench_step step_of(dc_ctx *ctx, dc_tape *tape, const case_on *k)
{
    const bench_step s = {ctx,     tape, run_case,
                          seed_of, k,    {dc_csr_values(matrix_of(k->in, k->c)->a), second_of(k->in, k->c)}};
    return s;
}

static void dump_tensor(dc_ctx *ctx, const char *dir, const char *name, const dc_tensor *t)
{
    if (npy_write_tensor(dir, name, t) != DC_OK)
        die(ctx, name);
}

static void dump_pattern(const char *dir, const char *p, const matrix *m)
{
    char path[4096];
    const int64_t np = m->rows + 1;
    snprintf(path, sizeof path, "%s/%s_row_ptr.npy", dir, p);
    if (npy_write_i64(path, 1, &np, m->row_ptr) != 0)
        die(NULL, path);
    snprintf(path, sizeof path, "%s/%s_col_idx.npy", dir, p);
    if (npy_write_i64(path, 1, &m->nnz, m->col_idx) != 0)
        die(NULL, path);
}

static void dump_inputs(dc_ctx *ctx, const inputs *in, const char *dir)
{
    dump_pattern(dir, "small", &in->small);
    dump_pattern(dir, "large", &in->large);
    dump_tensor(ctx, dir, "small_a", dc_csr_values(in->small.a));
    dump_tensor(ctx, dir, "small_b", in->b);
    dump_tensor(ctx, dir, "small_v", in->v);
    dump_tensor(ctx, dir, "large_a", dc_csr_values(in->large.a));
    dump_tensor(ctx, dir, "large_x", in->x);
}

static void dump_case(dc_ctx *ctx, dc_tape *tape, const bench_case *c, const inputs *in, const char *dir)
{
    dc_tensor *y;
    const case_on k = {c, in};
    const bench_step step = step_of(ctx, tape, &k);
    bench_step_once(&step, true, &y);
    char name[64];
    snprintf(name, sizeof name, "%s_out", c->name);
    dump_tensor(ctx, dir, name, y);
    snprintf(name, sizeof name, "%s_grad_a", c->name);
    dump_tensor(ctx, dir, name, dc_tensor_grad(dc_csr_values(matrix_of(in, c)->a)));
    snprintf(name, sizeof name, "%s_%s", c->name, c->second);
    dump_tensor(ctx, dir, name, dc_tensor_grad(second_of(in, c)));
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_sparse [--device cpu|cuda] [--reps N (15)] [--reps-small N (200)] "
               "[--ops dot,spmv,spmm] [--dump DIR]\n");
}

int main(int argc, char **argv)
{
    const char *device = "cpu", *ops = NULL, *dump = NULL;
    int reps = 15, reps_small = 200;
    for (int a = 1; a < argc; ++a) {
        const bool has_value = a + 1 < argc;
        if (strcmp(argv[a], "--device") == 0 && has_value) {
            device = argv[++a];
        } else if (strcmp(argv[a], "--reps") == 0 && has_value) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--reps-small") == 0 && has_value) {
            reps_small = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--ops") == 0 && has_value) {
            ops = argv[++a];
        } else if (strcmp(argv[a], "--dump") == 0 && has_value) {
            dump = argv[++a];
        } else {
            usage(strcmp(argv[a], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[a], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || reps_small < 1 || (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)) {
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
    inputs in;
    make_inputs(ctx, &in);
    if (dump)
        dump_inputs(ctx, &in, dump);
    printf("device: %s\n", o.backend == DC_BACKEND_CUDA ? dc_ctx_device_name(ctx) : bench_cpu_name());
    printf("| case | rows | nnz | forward us | gradient us | gradient / forward |\n|---|---:|---:|---:|---:|---:|\n");
    for (int c = 0; c < N_CASES; ++c) {
        if (!bench_list_has(ops, cases[c].name))
            continue;
        const matrix *m = matrix_of(&in, &cases[c]);
        const int r = cases[c].kind == K_SPMM ? reps : reps_small;
        const case_on k = {&cases[c], &in};
        const bench_step step = step_of(ctx, tape, &k);
        double fwd, grad;
        bench_step_medians(&step, r, &fwd, &grad);
        printf("| %s | %lld | %lld | %.1f | %.1f | %.2f |\n", cases[c].name, (long long)m->rows, (long long)m->nnz,
               fwd * 1e6, grad * 1e6, grad / fwd);
        fflush(stdout);
        if (dump)
            dump_case(ctx, tape, &cases[c], &in, dump);
    }
    dc_tape_reset(tape);
    free_inputs(&in);
    dc_tape_free(tape);
    dc_ctx_free(ctx);
    return 0;
}
