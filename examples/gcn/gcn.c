/* A two-layer graph convolutional network (Kipf and Welling 2017) trained
 * on a synthetic graph with planted communities, with dualcast's sparse
 * ops: Z = Â relu(Â X W1) W2, Â = D^-1/2 (A + I) D^-1/2 the normalized
 * adjacency, a cross entropy on a few labelled nodes, Adam.
 *
 * The graph is a stochastic block model: nodes in K communities, edges
 * likelier within one than between two. Each node's features are its
 * community's mean vector plus noise of twice its spread; one node in ten
 * is labelled, and the accuracy on the others is reported.
 *
 *   gcn_demo [--backend cpu|cuda] [--nodes N] [--communities K] [--steps N]
 *            [--lr X] [--seed S] [--check] [--no-graph]
 *
 * --no-graph trains the same network without its graph products
 * (Z = relu(X W1) W2), for comparison.
 *
 * --check exits 1 unless the loss falls to half its first value or less
 * and the unlabelled nodes are classified better than chance (0.6 at
 * least); a build's smoke test runs it. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

DC_BFN_DECLARE(gcn_norm);

/* the most nodes --nodes takes: the graph is drawn pair by pair (make_graph),
 * 2 10^8 draws at this size */
enum { MAX_NODES = 20000 };

typedef struct options {
    dc_backend backend;
    int nodes, communities, features, hidden, steps;
    double lr;
    uint64_t seed;
    int check;
    int no_graph; /* the same network without its two graph products */
} options;

/* The graph's and the features' random numbers: the same on every backend. */
static uint64_t rng_state;
static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double normal(void)
{
    const double u = uniform(), v = uniform();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--backend cpu|cuda] [--nodes N] [--communities K] [--steps N] [--lr X] [--seed S] "
            "[--check] [--no-graph]\n",
            prog);
    return 2;
}

/* v as a whole number in [lo, hi], nothing after it. */
static bool parse_int(const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return false;
    *out = (int)x;
    return true;
}

/* v as a learning rate in (0, 10], nothing after it. */
static bool parse_rate(const char *v, double *out)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || end == v || *end || !(x > 0 && x <= 10))
        return false;
    *out = x;
    return true;
}

/* v as an unsigned 64-bit number, digits only. */
static bool parse_seed(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] < '0' || v[0] > '9')
        return false;
    *out = (uint64_t)x;
    return true;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){DC_BACKEND_CPU, 400, 4, 16, 16, 100, 0.02, 1, 0, 0};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--check") == 0) {
            o->check = 1;
            continue;
        }
        if (strcmp(a, "--no-graph") == 0) {
            o->no_graph = 1;
            continue;
        }
        if (!v)
            return usage(argv[0]);
        ++i;
        bool ok = true;
        if (strcmp(a, "--backend") == 0 && strcmp(v, "cpu") == 0)
            o->backend = DC_BACKEND_CPU;
        else if (strcmp(a, "--backend") == 0 && strcmp(v, "cuda") == 0)
            o->backend = DC_BACKEND_CUDA;
        else if (strcmp(a, "--nodes") == 0)
            ok = parse_int(v, 4, MAX_NODES, &o->nodes);
        else if (strcmp(a, "--communities") == 0)
            ok = parse_int(v, 2, MAX_NODES / 2, &o->communities);
        else if (strcmp(a, "--steps") == 0)
            ok = parse_int(v, 1, 10000000, &o->steps);
        else if (strcmp(a, "--lr") == 0)
            ok = parse_rate(v, &o->lr);
        else if (strcmp(a, "--seed") == 0)
            ok = parse_seed(v, &o->seed);
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "%s: bad option or value: %s %s\n", argv[0], a, v);
            return usage(argv[0]);
        }
    }
    if (o->nodes < 2 * o->communities || o->communities < 2 || o->steps < 1 || !(o->lr > 0))
        return usage(argv[0]);
    return 0;
}

/* The adjacency with self-loops, as triplets: each pair of nodes joined
 * with probability p_in within a community (about 8 neighbours there) and
 * p_out between two (about 2 elsewhere). */
static dc_csr *make_graph(dc_ctx *ctx, const options *o, int64_t *edges)
{
    const int n = o->nodes, k = o->communities;
    const double p_in = 8.0 / (n / k), p_out = 2.0 / (n - n / k);
    int64_t cap = 2 * (int64_t)n * 16 + n, nnz = 0;
    int64_t *row = malloc((size_t)cap * sizeof *row), *col = malloc((size_t)cap * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        return NULL;
    }
    for (int i = 0; i < n; ++i) {
        row[nnz] = col[nnz] = i, ++nnz;
        for (int j = i + 1; j < n; ++j) {
            if (uniform() >= (i % k == j % k ? p_in : p_out))
                continue;
            if (nnz + 2 > cap) {
                cap *= 2;
                int64_t *r2 = realloc(row, (size_t)cap * sizeof *row),
                        *c2 = r2 ? realloc(col, (size_t)cap * sizeof *col) : NULL;
                if (!r2 || !c2) {
                    free(r2 ? r2 : row);
                    free(col);
                    return NULL;
                }
                row = r2;
                col = c2;
            }
            row[nnz] = i, col[nnz++] = j;
            row[nnz] = j, col[nnz++] = i;
        }
    }
    *edges = (nnz - n) / 2;
    dc_csr *a = dc_csr_from_coo(ctx, DC_F32, n, n, nnz, row, col, NULL, DC_COO_REFUSE);
    free(row);
    free(col);
    return a;
}

/* Â's values: each entry scaled by 1/sqrt of its row's and its column's
 * degree, one broadcast over the entries. */
static dc_tensor *normalized_values(dc_ctx *ctx, dc_csr *a)
{
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *ones = dc_csr_values(a);
    dc_tensor *deg = dc_op_csr_row_sum(tape, a, ones); /* symmetric: row sums are column sums */
    dc_tensor *inv_sqrt = dc_op_pow(tape, deg, dc_tape_scalar(tape, DC_F32, -0.5));
    dc_tensor *in[3] = {ones, inv_sqrt, inv_sqrt}, *w = NULL;
    const dc_csr_operand kinds[3] = {DC_CSR_ENTRY, DC_CSR_ROW, DC_CSR_COL};
    const int64_t shape[1] = {dc_csr_nnz(a)};
    dc_tensor *out = dc_tensor_new(ctx, DC_F32, 1, shape);
    if (!out || dc_op_csr_broadcast(tape, DC_BFN_REF(gcn_norm), a, 3, in, kinds, 1, &w) != DC_OK ||
        dc_tensor_copy(out, w) != DC_OK) {
        dc_tensor_free(out);
        out = NULL;
    }
    dc_tape_free(tape);
    return out;
}

/* The share of `ids` (count of them) whose largest logit is their class. */
static double accuracy(const float *z, int k, const float *ids, const float *labels, int count)
{
    int right = 0;
    for (int t = 0; t < count; ++t) {
        const float *r = z + (int64_t)ids[t] * k;
        int best = 0;
        for (int c = 1; c < k; ++c)
            if (r[c] > r[best])
                best = c;
        right += best == (int)labels[t];
    }
    return count ? (double)right / count : 0.0;
}

int main(int argc, char **argv)
{
    options o;
    const int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    rng_state = o.seed * 0x9e3779b97f4a7c15ull + 1;
    dc_ctx_options co = dc_ctx_options_default();
    co.backend = o.backend;
    co.seed = o.seed;
    dc_ctx *ctx = dc_ctx_new(&co, NULL);
    if (!ctx) {
        fprintf(stderr, "gcn_demo: %s\n", dc_last_error(NULL));
        return o.backend == DC_BACKEND_CUDA ? 77 : 1; /* 77: no device, the smoke test skips */
    }
    const int n = o.nodes, k = o.communities, f = o.features, h = o.hidden;
    int64_t edges = 0;
    dc_csr *a = make_graph(ctx, &o, &edges);
    dc_tensor *ahat = a ? normalized_values(ctx, a) : NULL;

    /* features: the community's mean plus noise of twice its spread */
    float *xs = malloc((size_t)n * (size_t)f * sizeof *xs), *mu = malloc((size_t)k * (size_t)f * sizeof *mu);
    int n_train = 0, n_test = 0;
    float *train_ids = malloc((size_t)n * sizeof(float)), *train_y = malloc((size_t)n * sizeof(float));
    float *test_ids = malloc((size_t)n * sizeof(float)), *test_y = malloc((size_t)n * sizeof(float));
    float *z_host = malloc((size_t)n * (size_t)k * sizeof(float));
    if (!ahat || !xs || !mu || !train_ids || !train_y || !test_ids || !test_y || !z_host) {
        fprintf(stderr, "gcn_demo: setup: %s\n", ahat ? "out of host memory" : dc_last_error(ctx));
        return 1;
    }
    for (int i = 0; i < k * f; ++i)
        mu[i] = (float)normal();
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < f; ++j)
            xs[i * f + j] = mu[(i % k) * f + j] + 2.0f * (float)normal();
        /* one node in ten is labelled, every community alike */
        if ((i / k) % 10 == 0)
            train_ids[n_train] = (float)i, train_y[n_train++] = (float)(i % k);
        else
            test_ids[n_test] = (float)i, test_y[n_test++] = (float)(i % k);
    }
    const int64_t sx[2] = {n, f}, s1[2] = {f, h}, s2[2] = {h, k}, st[1] = {n_train};
    dc_tensor *x = dc_tensor_from_host(ctx, DC_F32, 2, sx, xs);
    dc_tensor *ids = dc_tensor_from_host(ctx, DC_F32, 1, st, train_ids);
    dc_tensor *labels = dc_tensor_from_host(ctx, DC_F32, 1, st, train_y);
    dc_tensor *w1 = dc_tensor_new(ctx, DC_F32, 2, s1), *w2 = dc_tensor_new(ctx, DC_F32, 2, s2);
    dc_tensor *params[2] = {w1, w2};
    dc_adam_options ao = dc_adam_options_default();
    ao.lr = o.lr;
    dc_optimizer *adam = NULL;
    if (x && ids && labels && w1 && w2 &&
        dc_tensor_fill_uniform(w1, -sqrt(6.0 / (f + h)), sqrt(6.0 / (f + h))) == DC_OK &&
        dc_tensor_fill_uniform(w2, -sqrt(6.0 / (h + k)), sqrt(6.0 / (h + k))) == DC_OK &&
        dc_tensor_set_requires_grad(w1, true) == DC_OK && dc_tensor_set_requires_grad(w2, true) == DC_OK)
        adam = dc_optimizer_adam(ctx, 2, params, &ao);
    dc_tape *tape = adam ? dc_tape_new(ctx) : NULL;
    if (!tape) {
        fprintf(stderr, "gcn_demo: setup: %s\n", dc_last_error(ctx));
        return 1;
    }
    printf("gcn_demo on %s: %d nodes in %d communities, %lld edges (%lld stored entries with self-loops, int%d "
           "indices), %d labelled\n",
           dc_ctx_device_name(ctx), n, k, (long long)edges, (long long)dc_csr_nnz(a), dc_csr_index_bits(a), n_train);
    printf("%6s %10s %10s %10s\n", "step", "loss", "train acc", "test acc");

    double first = NAN, loss_v = NAN, test_acc = 0;
    for (int step = 0; step <= o.steps; ++step) {
        dc_tape_reset(tape);
        dc_tensor *xw = dc_op_matmul(tape, x, w1);
        dc_tensor *h1 = dc_op_relu(tape, o.no_graph ? xw : dc_op_spmm(tape, a, ahat, xw, false));
        dc_tensor *hw = dc_op_matmul(tape, h1, w2);
        dc_tensor *z = o.no_graph ? hw : dc_op_spmm(tape, a, ahat, hw, false);
        dc_tensor *loss = dc_op_cross_entropy(tape, dc_op_embedding(tape, z, ids), labels);
        if (!loss || dc_tensor_item(loss, &loss_v) != DC_OK) {
            fprintf(stderr, "gcn_demo: step %d: %s\n", step, dc_last_error(ctx));
            return 1;
        }
        if (step == 0)
            first = loss_v;
        if (step % 10 == 0 || step == o.steps) {
            if (dc_tensor_to_host(z, z_host, (size_t)n * (size_t)k * sizeof(float)) != DC_OK) {
                fprintf(stderr, "gcn_demo: %s\n", dc_last_error(ctx));
                return 1;
            }
            test_acc = accuracy(z_host, k, test_ids, test_y, n_test);
            printf("%6d %10.4f %10.3f %10.3f\n", step, loss_v, accuracy(z_host, k, train_ids, train_y, n_train),
                   test_acc);
        }
        if (step == o.steps)
            break; /* the last line measures the trained model */
        if (dc_backward(tape, loss) != DC_OK || dc_optimizer_step(adam) != DC_OK) {
            fprintf(stderr, "gcn_demo: step %d: %s\n", step, dc_last_error(ctx));
            return 1;
        }
        dc_optimizer_zero_grad(adam);
    }
    const int ok = loss_v <= 0.5 * first && test_acc >= 0.6;
    printf("loss %.4f -> %.4f; unlabelled nodes classified %.1f%% right (chance %.1f%%)\n", first, loss_v,
           100 * test_acc, 100.0 / k);
    if (o.check)
        printf("check: %s\n", ok ? "passed" : "FAILED (the loss must halve and the accuracy reach 60%)");

    dc_tape_free(tape);
    dc_optimizer_free(adam);
    dc_tensor_free(x);
    dc_tensor_free(ids);
    dc_tensor_free(labels);
    dc_tensor_free(w1);
    dc_tensor_free(w2);
    dc_tensor_free(ahat);
    dc_csr_free(a);
    dc_ctx_free(ctx);
    free(xs);
    free(mu);
    free(train_ids);
    free(train_y);
    free(test_ids);
    free(test_y);
    free(z_host);
    return o.check && !ok ? 1 : 0;
}
