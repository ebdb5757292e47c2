/* The HM-LSTM model: gradients against central differences through several
 * timesteps, the mixed-mode cell against the pure reverse-mode one, the
 * checkpoint round trip, and reproducible training. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"

#include "corpus.h"
#include "hmlstm.h"

typedef struct fixture {
    dc_ctx *ctx;
    hm_model *m;
    hm_state *s;
    dc_tensor *ids, *targets;
    hm_cell_kind cell;
} fixture;

/* A model, state and batch on a CPU context of `threads` threads (0: the
 * default). */
static void make_fixture_threads(fixture *f, int threads, dc_dtype dtype, bool straight_through, int layers,
                                 int hidden, int batch, int steps, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->ctx = threads ? test_cpu_ctx_threads(threads, 1) : test_cpu_ctx();
    hm_config cfg = {layers, hidden, 3, 5, 7, dtype, straight_through, DC_PARTIALS_STORE};
    f->m = hm_model_new(f->ctx, &cfg, seed);
    TEST_NONNULL(f->ctx, f->m);
    TEST_OK(f->ctx, hm_model_set_slope(f->m, 1.7));
    f->s = hm_state_new(f->ctx, &cfg, batch);
    TEST_NONNULL(f->ctx, f->s);
    /* a state that is not all zeros, with some boundaries already set */
    for (int l = 0; l < layers; ++l) {
        TEST_OK(f->ctx, dc_tensor_fill_uniform(f->s->h[l], -0.5, 0.5));
        TEST_OK(f->ctx, dc_tensor_fill_uniform(f->s->c[l], -0.5, 0.5));
        for (int b = 0; b < batch; ++b)
            TEST_OK(f->ctx, dc_tensor_set(f->s->z[l], b, (b + l) % 2));
    }
    /* boundary units: biases spread so that detectors fire and stay quiet */
    for (int l = 0; l < layers; ++l)
        TEST_OK(f->ctx, dc_tensor_set(f->m->b[l], 4 * hidden, l % 2 ? 0.3 : -0.2));
    const int64_t shape[2] = {steps, batch};
    double *ids = malloc((size_t)(steps * batch) * sizeof *ids), *tg = malloc((size_t)(steps * batch) * sizeof *tg);
    for (int i = 0; i < steps * batch; ++i) {
        ids[i] = (i * 5 + 3) % 7;
        tg[i] = (i * 3 + 1) % 7;
    }
    f->ids = test_tensor(f->ctx, dtype, 2, shape, ids);
    f->targets = test_tensor(f->ctx, dtype, 2, shape, tg);
    free(ids);
    free(tg);
    f->cell = HM_CELL_MIXED;
}

static void make_fixture(fixture *f, dc_dtype dtype, bool straight_through, int layers, int hidden, int batch, int steps,
                         uint64_t seed)
{
    make_fixture_threads(f, 0, dtype, straight_through, layers, hidden, batch, steps, seed);
}

static void free_fixture(fixture *f)
{
    dc_tensor_free(f->ids);
    dc_tensor_free(f->targets);
    hm_state_free(f->s);
    hm_model_free(f->m);
    dc_ctx_free(f->ctx);
}

static dc_tensor *model_loss(dc_tape *tape, dc_tensor *const *params, void *user)
{
    (void)params; /* the model holds them */
    fixture *f = user;
    hm_forward_result r;
    return hm_forward(tape, f->m, f->s, f->cell, f->ids, f->targets, false, NULL, &r) == DC_OK ? r.loss
                                                                                                        : NULL;
}

/* The fixture's sequence runs every cell operation and both boundary states. */
static void assert_all_operations(fixture *f)
{
    dc_tape *tape = dc_tape_new(f->ctx);
    hm_forward_result r;
    TEST_OK(f->ctx, hm_forward(tape, f->m, f->s, f->cell, f->ids, f->targets, true, NULL, &r));
    int64_t total[3] = {0, 0, 0};
    for (int l = 0; l < f->m->cfg.layers; ++l)
        for (int k = 0; k < 3; ++k)
            total[k] += r.ops[l][k];
    if (!total[HM_FLUSH] || !total[HM_COPY] || !total[HM_UPDATE])
        fail_msg("the sequence ran FLUSH %lld, COPY %lld, UPDATE %lld times; every one is needed",
                 (long long)total[HM_FLUSH], (long long)total[HM_COPY], (long long)total[HM_UPDATE]);
    dc_tape_free(tape);
}

/* Central differences need z held fixed (the step function's derivative is
 * zero; straight-through is an estimator), so z carries no gradient here;
 * everything else, the cell's branches included, is checked. */
static void test_model_gradcheck_f64(void **state)
{
    (void)state;
    for (int cell = 0; cell < 2; ++cell) {
        fixture f;
        make_fixture(&f, DC_F64, false, 3, 4, 3, 6, 11);
        f.cell = cell == 0 ? HM_CELL_MIXED : HM_CELL_PURE;
        assert_all_operations(&f);
        dc_gradcheck_options o = dc_gradcheck_options_default();
        o.rtol = 1e-5;
        o.atol = 1e-7;
        dc_gradcheck_report rep;
        TEST_OK(f.ctx, dc_gradcheck(f.ctx, model_loss, &f, f.m->n_params, f.m->params, &o, &rep));
        assert_true(rep.checked > 300);
        free_fixture(&f);
    }
}

static double *all_grads(fixture *f, int64_t *n)
{
    int64_t total = 0;
    for (int i = 0; i < f->m->n_params; ++i)
        total += dc_tensor_numel(f->m->params[i]);
    double *g = calloc((size_t)total, sizeof *g);
    int64_t at = 0;
    for (int i = 0; i < f->m->n_params; ++i) {
        const dc_tensor *gi = dc_tensor_grad(f->m->params[i]);
        const int64_t ni = dc_tensor_numel(f->m->params[i]);
        if (gi) {
            double *v = test_values(gi);
            memcpy(g + at, v, (size_t)ni * sizeof *v);
            free(v);
        }
        at += ni;
    }
    *n = total;
    return g;
}

static double loss_and_grads(fixture *f, hm_cell_kind cell, double **grads, int64_t *n)
{
    dc_tape *tape = dc_tape_new(f->ctx);
    for (int i = 0; i < f->m->n_params; ++i)
        dc_tensor_zero_grad(f->m->params[i]);
    hm_forward_result r;
    TEST_OK(f->ctx, hm_forward(tape, f->m, f->s, cell, f->ids, f->targets, false, NULL, &r));
    TEST_OK(f->ctx, dc_backward(tape, r.loss));
    double loss;
    TEST_OK(f->ctx, dc_tensor_item(r.loss, &loss));
    *grads = all_grads(f, n);
    dc_tape_free(tape);
    return loss;
}

/* Same inputs, same loss and gradients, the straight-through path included. */
static void test_mixed_equals_pure_f32(void **state)
{
    (void)state;
    for (int policy = 0; policy < 2; ++policy) {
        fixture f;
        make_fixture(&f, DC_F32, true, 3, 16, 4, 12, 5);
        f.m->cfg.policy = (dc_partials_policy)policy;
        assert_all_operations(&f);
        double *gm, *gp;
        int64_t n;
        const double lm = loss_and_grads(&f, HM_CELL_MIXED, &gm, &n);
        const double lp = loss_and_grads(&f, HM_CELL_PURE, &gp, &n);
        test_assert_close(&lm, &lp, 1, 0, 1e-6, "loss");
        /* relative to the largest gradient: float32 sums in different orders */
        double scale = 0;
        for (int64_t i = 0; i < n; ++i)
            scale = fmax(scale, fabs(gp[i]));
        test_assert_close(gm, gp, n, 1e-5 * scale, 1e-5, "gradients, mixed vs pure");
        free(gm);
        free(gp);
        free_fixture(&f);
    }
}

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/dc_hmlstm_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    fixture a, b;
    make_fixture(&a, DC_F32, true, 2, 8, 2, 5, 1);
    make_fixture(&b, DC_F32, true, 2, 8, 2, 5, 2); /* other seed, other values */
    const char *names[4 + 3 * HM_MAX_LAYERS];
    for (int i = 0; i < a.m->n_params; ++i)
        names[i] = a.m->names[i];
    TEST_OK(a.ctx, dc_checkpoint_save(a.ctx, path, a.m->n_params, a.m->params, names));

    /* a corrupt copy is refused and leaves b's parameters alone */
    char bad[80];
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
    FILE *in = fopen(path, "rb"), *out = fopen(bad, "wb");
    assert_non_null(in);
    assert_non_null(out);
    int ch, at = 0;
    while ((ch = fgetc(in)) != EOF)
        fputc(at++ == 100 ? ch ^ 0x40 : ch, out);
    fclose(in);
    fclose(out);
    double before, after;
    TEST_OK(b.ctx, dc_tensor_get(b.m->params[1], 0, &before));
    assert_int_equal(dc_checkpoint_load(b.ctx, bad, b.m->n_params, b.m->params, names), DC_ERR_FORMAT);
    TEST_OK(b.ctx, dc_tensor_get(b.m->params[1], 0, &after));
    assert_true(before == after);

    TEST_OK(b.ctx, dc_checkpoint_load(b.ctx, path, b.m->n_params, b.m->params, names));
    for (int i = 0; i < a.m->n_params; ++i) {
        double *va = test_values(a.m->params[i]), *vb = test_values(b.m->params[i]);
        test_assert_close(vb, va, dc_tensor_numel(a.m->params[i]), 0, 0, names[i]);
        free(va);
        free(vb);
    }
    double *g;
    int64_t n;
    const double la = loss_and_grads(&a, HM_CELL_MIXED, &g, &n);
    free(g);
    /* b's state differs (its own seed); give it a's */
    for (int l = 0; l < 2; ++l) {
        TEST_OK(b.ctx, dc_tensor_copy(b.s->h[l], a.s->h[l]));
        TEST_OK(b.ctx, dc_tensor_copy(b.s->c[l], a.s->c[l]));
        TEST_OK(b.ctx, dc_tensor_copy(b.s->z[l], a.s->z[l]));
    }
    const double lb = loss_and_grads(&b, HM_CELL_MIXED, &g, &n);
    free(g);
    assert_true(la == lb);
    remove(path);
    remove(bad);
    rmdir(dir);
    free_fixture(&a);
    free_fixture(&b);
}

/* One training step as the demo takes it: forward with the mixed cell,
 * backward, clipping, Adam; the loss in *loss when loss is not NULL, and the
 * state carried to the next step when carry is set. */
static void train_step(fixture *f, dc_tape *tape, dc_optimizer *adam, bool carry, double *loss)
{
    dc_tape_reset(tape);
    hm_forward_result r;
    TEST_OK(f->ctx, hm_forward(tape, f->m, f->s, HM_CELL_MIXED, f->ids, f->targets, false, NULL, &r));
    TEST_OK(f->ctx, dc_backward(tape, r.loss));
    TEST_OK(f->ctx, dc_clip_grad_norm(f->ctx, f->m->n_params, f->m->params, 1.0, NULL));
    TEST_OK(f->ctx, dc_optimizer_step(adam));
    dc_optimizer_zero_grad(adam);
    if (loss)
        TEST_OK(f->ctx, dc_tensor_item(r.loss, loss));
    if (carry)
        TEST_OK(f->ctx, hm_state_update(f->s, &r));
}

/* Adam steps from the same seed give the same losses, bit for bit. With
 * carry, the state flows from one step to the next as in training. */
static void train_steps(uint64_t seed, int steps, bool carry, double lr, double *losses)
{
    fixture f;
    make_fixture(&f, DC_F32, true, 3, 16, 4, 8, seed);
    dc_adam_options o = dc_adam_options_default();
    o.lr = lr;
    dc_optimizer *adam = dc_optimizer_adam(f.ctx, f.m->n_params, f.m->params, &o);
    TEST_NONNULL(f.ctx, adam);
    dc_tape *tape = dc_tape_new(f.ctx);
    for (int step = 0; step < steps; ++step)
        train_step(&f, tape, adam, carry, &losses[step]);
    dc_tape_free(tape);
    dc_optimizer_free(adam);
    free_fixture(&f);
}

static void test_same_seed_same_loss(void **state)
{
    (void)state;
    double a[4], b[4], c[4], fit[30];
    train_steps(3, 4, true, 1e-3, a);
    train_steps(3, 4, true, 1e-3, b);
    train_steps(4, 4, true, 1e-3, c);
    for (int i = 0; i < 4; ++i)
        if (a[i] != b[i])
            fail_msg("step %d: %.17g then %.17g from the same seed", i, a[i], b[i]);
    assert_true(a[0] != c[0]);
    /* and it learns: one batch, fitted */
    train_steps(3, 30, false, 1e-2, fit);
    if (!(fit[29] < 0.8 * fit[0]))
        fail_msg("30 steps on one batch took the loss from %g to %g", fit[0], fit[29]);
}

/* Training steps allocate nothing once the tape's arenas have settled (by
 * the fifth step: the two header arenas take turns, and each puts the
 * blocks of a step that needed several into one at its next reset): then
 * the reserved bytes stay the same from step to step. */
static void test_training_step_reuses_memory(void **state)
{
    (void)state;
    fixture f;
    make_fixture(&f, DC_F32, true, 3, 16, 4, 12, 9);
    dc_optimizer *adam = dc_optimizer_adam(f.ctx, f.m->n_params, f.m->params, NULL);
    TEST_NONNULL(f.ctx, adam);
    dc_tape *tape = dc_tape_new(f.ctx);
    size_t reserved = 0, peak = 0;
    for (int step = 0; step < 8; ++step) {
        train_step(&f, tape, adam, true, NULL);
        if (step == 4) {
            reserved = dc_tape_reserved_bytes(tape);
            peak = dc_tape_peak_bytes(tape);
        } else if (step > 4) {
            if (dc_tape_reserved_bytes(tape) != reserved || dc_tape_peak_bytes(tape) != peak)
                fail_msg("step %d: reserved %zu bytes (was %zu), peak %zu (was %zu)", step,
                         dc_tape_reserved_bytes(tape), reserved, dc_tape_peak_bytes(tape), peak);
        }
    }
    assert_true(peak > 0);
    dc_tape_free(tape);
    dc_optimizer_free(adam);
    free_fixture(&f);
}

/* The thread ids of this process, sorted; their count through *n. NULL
 * where /proc/self/task cannot be read. */
static long *thread_ids(int *n)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return NULL;
    long *ids = NULL;
    int cap = 0;
    *n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ids = realloc(ids, (size_t)cap * sizeof *ids);
            assert_non_null(ids);
        }
        ids[(*n)++] = atol(e->d_name);
    }
    closedir(d);
    for (int i = 1; i < *n; ++i) /* insertion sort: a few dozen ids */
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
            const long t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return ids;
}

/* Steady-state training steps start no threads: every parallel region of
 * the context, the matrix products' included, runs on the same team, so the
 * OpenMP pool's threads stay the same ones. A region on fewer threads made
 * libgomp end the others and the next larger region start them again
 * (thousands of thread creations per step, the step ten times slower with
 * more threads than cores). Four threads whatever the machine: the cell
 * (32 x 128, two chunks) once ran on two of them. */
static void test_steps_keep_their_threads(void **state)
{
    (void)state;
    int n0 = 0, n1 = 0;
    long *probe = thread_ids(&n0);
    if (!probe) {
        print_message("skipped: /proc/self/task cannot be read here, so the threads cannot be listed\n");
        skip();
    }
    free(probe);
    fixture f;
    make_fixture_threads(&f, 4, DC_F32, true, 2, 128, 32, 4, 5);
    dc_optimizer *adam = dc_optimizer_adam(f.ctx, f.m->n_params, f.m->params, NULL);
    TEST_NONNULL(f.ctx, adam);
    dc_tape *tape = dc_tape_new(f.ctx);
    for (int step = 0; step < 2; ++step) /* warm-up: the pool starts */
        train_step(&f, tape, adam, true, NULL);
    long *before = thread_ids(&n0);
    for (int step = 0; step < 3; ++step)
        train_step(&f, tape, adam, true, NULL);
    long *after = thread_ids(&n1);
    assert_non_null(before);
    assert_non_null(after);
    if (n0 < 4)
        fail_msg("%d threads after two steps on a context of 4", n0);
    if (n1 != n0 || memcmp(before, after, (size_t)n0 * sizeof *before) != 0)
        fail_msg("three steps changed the process's threads: %d before, %d after, the newest ids %ld and %ld", n0, n1,
                 before[n0 - 1], after[n1 - 1]);
    free(before);
    free(after);
    dc_tape_free(tape);
    dc_optimizer_free(adam);
    free_fixture(&f);
}

/* Configurations the model cannot run are refused by hm_config_problem
 * and hm_state_new, and a state that does not fit the model by hm_forward
 * (DC_ERR_SHAPE, nothing recorded), with hm_state_problem saying why. */
static void test_refuses_what_does_not_fit(void **state)
{
    (void)state;
    const hm_config good = {2, 4, 3, 5, 7, DC_F32, true, DC_PARTIALS_STORE};
    assert_null(hm_config_problem(&good));
    hm_config bad[6] = {good, good, good, good, good, good};
    bad[0].layers = HM_MAX_LAYERS + 1;
    bad[1].hidden = HM_MAX_WIDTH + 1;
    bad[2].embed = 600000000;
    bad[3].out_embed = 0;
    bad[4].policy = (dc_partials_policy)77;
    bad[5].dtype = (dc_dtype)9;
    fixture f;
    make_fixture(&f, DC_F32, true, 2, 4, 3, 2, 5);
    for (int i = 0; i < 6; ++i) {
        if (!hm_config_problem(&bad[i]))
            fail_msg("configuration %d was accepted", i);
        assert_null(hm_state_new(f.ctx, &bad[i], 3));
    }
    assert_null(hm_state_new(f.ctx, &good, 0));
    /* states of three layers, of another width, of another batch */
    hm_config three = good, wide = good;
    three.layers = 3;
    wide.hidden = 5;
    hm_state *misfit[2] = {hm_state_new(f.ctx, &three, 3), hm_state_new(f.ctx, &wide, 3)};
    dc_tape *tape = dc_tape_new(f.ctx);
    for (int i = 0; i < 2; ++i) {
        TEST_NONNULL(f.ctx, misfit[i]);
        assert_non_null(hm_state_problem(f.m, misfit[i]));
        hm_forward_result r;
        assert_int_equal(hm_forward(tape, f.m, misfit[i], HM_CELL_MIXED, f.ids, f.targets, false, NULL, &r),
                         DC_ERR_SHAPE);
        assert_int_equal(dc_tape_node_count(tape), 0);
        hm_state_free(misfit[i]);
    }
    assert_null(hm_state_problem(f.m, f.s));
    hm_state *other_batch = hm_state_new(f.ctx, &good, 4);
    hm_forward_result r;
    assert_int_equal(hm_forward(tape, f.m, other_batch, HM_CELL_MIXED, f.ids, f.targets, false, NULL, &r),
                     DC_ERR_SHAPE);
    hm_state_free(other_batch);
    dc_tape_free(tape);
    free_fixture(&f);
}

static void test_corpus(void **state)
{
    (void)state;
    char path[] = "/tmp/dc_corpus_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 5000; ++i)
        fputs(i % 2 ? "ab" : "aa", f);
    fclose(f);
    hm_corpus c;
    char err[256];
    const char *paths[1] = {path};
    assert_int_equal(hm_corpus_load(&c, 1, paths, 0.1, err, sizeof err), 0);
    assert_int_equal(c.vocab, 2);
    assert_int_equal(c.len, 10000);
    assert_int_equal(c.train_len, 9000);
    /* p(a) = 3/4, p(b) = 1/4 */
    assert_true(fabs(c.unigram_bits - (-0.75 * log2(0.75) - 0.25 * log2(0.25))) < 1e-12);
    float ids[6], tg[6];
    assert_int_equal(hm_corpus_batch(&c, 0, c.train_len, 3, 2, 0, ids, tg), 0);
    for (int i = 0; i < 6; ++i)
        assert_true(ids[i] >= 0 && ids[i] < 2 && tg[i] >= 0 && tg[i] < 2);
    /* batch k of the validation part wraps round: k and k + batches agree,
     * and the last target read is the corpus's last symbol at most */
    const int64_t n = hm_corpus_batches(c.train_len, c.len, 3, 2);
    assert_int_equal(n, (500 - 1) / 3);
    float ids2[6], tg2[6];
    assert_int_equal(hm_corpus_batch(&c, c.train_len, c.len, 3, 2, n - 1, ids, tg), 0);
    assert_int_equal(hm_corpus_batch(&c, c.train_len, c.len, 3, 2, 2 * n - 1, ids2, tg2), 0);
    assert_memory_equal(ids, ids2, sizeof ids);
    assert_memory_equal(tg, tg2, sizeof tg);
    /* refused: ranges past the corpus, empty or shorter than a batch, a
     * negative k, no steps or no streams */
    const int64_t bad[][5] = {{0, c.len + 1, 3, 2, 0}, {c.len, c.len, 3, 2, 0}, {c.len - 7, c.len, 3, 2, 0},
                              {0, c.len, 3, 2, -1},    {0, c.len, 0, 2, 0},     {0, c.len, 3, 0, 0},
                              {-1, c.len, 3, 2, 0},    {0, c.len, 3, -1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        assert_int_equal(hm_corpus_batch(&c, bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], ids, tg), -1);
    assert_int_equal(hm_corpus_batches(0, c.len, 0, 2), 0);
    assert_int_equal(hm_corpus_batches(0, c.len, 3, 0), 0);
    assert_int_equal(hm_corpus_batches(5, 5, 3, 2), 0);
    hm_corpus_free(&c);
    const char *missing[1] = {"/nonexistent/corpus.txt"};
    assert_int_equal(hm_corpus_load(&c, 1, missing, 0.1, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/corpus.txt"));
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_gradcheck_f64), cmocka_unit_test(test_mixed_equals_pure_f32),
        cmocka_unit_test(test_checkpoint_round_trip), cmocka_unit_test(test_same_seed_same_loss),
        cmocka_unit_test(test_training_step_reuses_memory), cmocka_unit_test(test_steps_keep_their_threads),
        cmocka_unit_test(test_corpus), cmocka_unit_test(test_refuses_what_does_not_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
