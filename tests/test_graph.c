/* Captured steps (include/dualcast/graph.h). On the CPU backend a graph runs
 * its step as it is. On CUDA: a captured and replayed HM-LSTM training step
 * (forward, backward, clipping, Adam, state carried, a new batch and slope
 * written into tensors before each replay) gives bit for bit the losses
 * and parameters of the same steps run eagerly, launching one graph and no
 * kernel from the host; a step that waits for the device runs eagerly and
 * says which call waited; released device memory makes the next replay
 * capture again; dc_graph_verify finds a step whose host logic chose other
 * ops; a capture refused for new device memory is tried again at the next
 * replays.
 * The CUDA tests need a device (DC_DEVICE=cuda:N picks one); without one
 * they are skipped, saying why, or fail with DC_REQUIRE_CUDA=1.
 * tests/cuda_emulation runs them on the CPU as well. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

#include "hmlstm.h"

static dc_ctx *gpu, *cpu;
static char no_gpu_reason[512];

static void need_gpu(void)
{
    if (!gpu) {
        print_message("skipped: no usable CUDA device: %s\n", no_gpu_reason);
        skip();
    }
}

/* ---- a small step: y = x op w, loss = sum(y * y), then SGD ---- */

typedef struct small_step {
    dc_ctx *ctx;
    dc_tape *tape;
    dc_tensor *x, *w;
    dc_optimizer *sgd;
    bool use_add;       /* host logic: y = x + w, else x * w */
    int runs;           /* times the step function ran (eagerly or captured) */
    dc_tensor *loss;    /* of the last run or capture */
    /* a wait inside the step, by kind (0: none) */
    int wait;
    /* a tensor made and freed inside the step */
    bool make_and_free;
    /* tensors made by run_growing_step: once, or at every run */
    bool grow_once;
    int growing_calls;
    dc_tensor *made[16];
} small_step;

enum { WAIT_NONE, WAIT_ITEM, WAIT_FROM_HOST, WAIT_SYNC, WAIT_NORM };

static dc_status run_small_step(void *user)
{
    small_step *s = user;
    s->runs++;
    dc_tape_reset(s->tape);
    dc_tensor *y = s->use_add ? dc_op_add(s->tape, s->x, s->w) : dc_op_mul(s->tape, s->x, s->w);
    s->loss = dc_op_sum(s->tape, dc_op_mul(s->tape, y, y), 0, NULL, false);
    if (!s->loss)
        return dc_last_status(s->ctx);
    dc_status st = dc_backward(s->tape, s->loss);
    double v = 0.0, norm = 0.0;
    const float one = 1.0f;
    if (st == DC_OK && s->wait == WAIT_ITEM)
        st = dc_tensor_item(s->loss, &v);
    if (st == DC_OK && s->wait == WAIT_FROM_HOST)
        st = dc_tensor_from_host_copy(s->x, &one, sizeof one);
    if (st == DC_OK && s->wait == WAIT_SYNC)
        st = dc_ctx_synchronize(s->ctx);
    if (st == DC_OK)
        st = dc_clip_grad_norm(s->ctx, 1, &s->w, 100.0, s->wait == WAIT_NORM ? &norm : NULL);
    if (st == DC_OK && s->make_and_free) {
        const int64_t n = 1000;
        dc_tensor *t = dc_tensor_new(s->ctx, DC_F32, 1, &n);
        if (!t)
            return DC_ERR_MEMORY;
        dc_tensor_free(t);
    }
    if (st == DC_OK)
        st = dc_optimizer_step(s->sgd);
    dc_optimizer_zero_grad(s->sgd);
    return st;
}

static void small_step_init(small_step *s, dc_ctx *ctx, double w0)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    const int64_t one = 1;
    const double x0 = 1.0;
    s->x = test_tensor(ctx, DC_F32, 1, &one, &x0);
    s->w = test_tensor(ctx, DC_F32, 1, &one, &w0);
    TEST_OK(ctx, dc_tensor_set_requires_grad(s->w, true));
    s->tape = dc_tape_new(ctx);
    s->sgd = dc_optimizer_sgd(ctx, 1, &s->w, 0.125, 0.0);
    TEST_NONNULL(ctx, s->tape);
    TEST_NONNULL(ctx, s->sgd);
}

static void small_step_free(small_step *s)
{
    dc_optimizer_free(s->sgd);
    dc_tape_free(s->tape);
    dc_tensor_free(s->x);
    dc_tensor_free(s->w);
}

static double item(dc_ctx *ctx, const dc_tensor *t)
{
    double v = NAN;
    TEST_OK(ctx, dc_tensor_item(t, &v));
    return v;
}

/* w after k steps of w -= 0.125 * d/dw (x op w)^2 with x = 1, in float. */
static float w_after(bool add, float w, int k)
{
    for (int i = 0; i < k; ++i)
        w -= 0.125f * (add ? 2.0f * (1.0f + w) : 2.0f * w);
    return w;
}

/* On the CPU backend a graph is the step, run at every replay. */
static void test_cpu_backend_runs_the_step(void **state)
{
    (void)state;
    small_step s;
    small_step_init(&s, cpu, 0.5);
    dc_status st = DC_ERR_ARG;
    dc_graph *g = dc_graph_capture(cpu, run_small_step, &s, &st);
    TEST_NONNULL(cpu, g);
    assert_int_equal(st, DC_OK);
    assert_non_null(dc_graph_fallback(g));
    assert_non_null(strstr(dc_graph_fallback(g), "CPU backend"));
    for (int i = 0; i < 3; ++i)
        TEST_OK(cpu, dc_graph_replay(g));
    assert_int_equal(s.runs, 4);
    assert_int_equal(dc_graph_captures(g), 0);
    assert_int_equal(dc_graph_replays(g), 0);
    assert_true(item(cpu, s.w) == (double)w_after(false, 0.5f, 4));
    dc_graph_free(g);
    small_step_free(&s);
}

/* A step that fails is reported by dc_graph_capture; NULL arguments and
 * graph calls inside a graph's step are refused. */
static dc_status capture_inside(void *user)
{
    small_step *s = user;
    dc_status st = DC_OK;
    dc_graph *g = dc_graph_capture(s->ctx, run_small_step, s, &st);
    dc_graph_free(g);
    return st;
}

/* replays (verify: verifies) the graph in *user's second field */
typedef struct graph_inside {
    dc_graph *g;
    bool verify;
} graph_inside;

static dc_status replay_inside(void *user)
{
    const graph_inside *k = user;
    return k->verify ? dc_graph_verify(k->g, NULL) : dc_graph_replay(k->g);
}

/* On ctx: a capture, a replay and a verify inside a graph's step are
 * refused at the step's first (eager) run, on every backend; the step's
 * status is the outer capture's. */
static void expect_graph_calls_refused_inside(dc_ctx *ctx)
{
    small_step s;
    small_step_init(&s, ctx, 0.5);
    dc_status st = DC_OK;
    assert_null(dc_graph_capture(ctx, capture_inside, &s, &st));
    assert_int_equal(st, DC_ERR_STATE);
    if (!strstr(dc_last_error(ctx), "dc_graph_capture: called inside a graph's step"))
        fail_msg("a capture inside a step: \"%s\"", dc_last_error(ctx));
    assert_int_equal(s.runs, 0);
    dc_graph *inner = dc_graph_capture(ctx, run_small_step, &s, &st);
    TEST_NONNULL(ctx, inner);
    for (int v = 0; v < 2; ++v) {
        graph_inside k = {inner, v == 1};
        assert_null(dc_graph_capture(ctx, replay_inside, &k, &st));
        assert_int_equal(st, DC_ERR_STATE);
        if (!strstr(dc_last_error(ctx), v ? "dc_graph_verify" : "dc_graph_replay"))
            fail_msg("a %s inside a step: \"%s\"", v ? "verify" : "replay", dc_last_error(ctx));
    }
    /* and the graph works outside */
    TEST_OK(ctx, dc_graph_replay(inner));
    dc_graph_free(inner);
    small_step_free(&s);
}

static void test_bad_calls_refused(void **state)
{
    (void)state;
    small_step s;
    small_step_init(&s, cpu, 0.5);
    dc_status st = DC_OK;
    assert_null(dc_graph_capture(cpu, NULL, &s, &st));
    assert_int_equal(st, DC_ERR_ARG);
    assert_non_null(strstr(dc_last_error(cpu), "step function is NULL"));
    assert_null(dc_graph_capture(NULL, run_small_step, &s, &st));
    assert_int_equal(st, DC_ERR_ARG);
    assert_int_equal(dc_graph_replay(NULL), DC_ERR_ARG);
    assert_int_equal(dc_graph_verify(NULL, NULL), DC_ERR_ARG);
    assert_null(dc_graph_fallback(NULL));
    dc_graph_free(NULL);
    /* a step whose op fails: the capture returns NULL with its status */
    dc_tensor *x = s.x;
    const int64_t two = 2;
    s.x = dc_tensor_new(cpu, DC_F32, 1, &two);
    s.x = s.x ? s.x : x;
    dc_tensor *w3 = NULL;
    const int64_t three = 3;
    w3 = dc_tensor_new(cpu, DC_F32, 1, &three);
    dc_tensor *w = s.w;
    s.w = w3;
    assert_null(dc_graph_capture(cpu, run_small_step, &s, &st));
    assert_int_equal(st, DC_ERR_SHAPE);
    s.w = w;
    dc_tensor_free(s.x);
    dc_tensor_free(w3);
    s.x = x;
    small_step_free(&s);
    expect_graph_calls_refused_inside(cpu);
    if (gpu)
        expect_graph_calls_refused_inside(gpu);
}

/* ---- CUDA ---- */

/* Replays of a small step: its results, one graph launch and no kernel
 * launched from the host per replay, no host wait. */
static void test_replays_launch_one_graph(void **state)
{
    (void)state;
    need_gpu();
    small_step s;
    small_step_init(&s, gpu, 0.5);
    dc_status st = DC_ERR_ARG;
    dc_graph *g = dc_graph_capture(gpu, run_small_step, &s, &st);
    TEST_NONNULL(gpu, g);
    if (dc_graph_fallback(g))
        fail_msg("the step runs eagerly: %s", dc_graph_fallback(g));
    assert_int_equal(dc_graph_captures(g), 1);
    assert_true(dc_graph_kernels(g) > 0);
    assert_int_equal(s.runs, 2); /* once eagerly, once captured */
    const dc_device_counters before = dc_ctx_device_counters(gpu);
    for (int i = 0; i < 5; ++i)
        TEST_OK(gpu, dc_graph_replay(g));
    const dc_device_counters after = dc_ctx_device_counters(gpu);
    assert_int_equal(s.runs, 2);
    assert_int_equal(dc_graph_replays(g), 5);
    assert_int_equal(after.graph_launches - before.graph_launches, 5);
    assert_int_equal(after.kernel_launches - before.kernel_launches, 0);
    assert_int_equal(after.host_waits - before.host_waits, 0);
    assert_int_equal(after.malloc_calls - before.malloc_calls, 0);
    /* 1 eager step and 5 replays */
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 6));
    /* the loss on the step's tape is the last replay's: (w after 5)^2 */
    const float w5 = w_after(false, 0.5f, 5);
    assert_true(item(gpu, s.loss) == (double)(w5 * w5));
    /* a learning rate set between replays is the next replay's, set
     * without a host wait */
    const uint64_t waits = dc_ctx_device_counters(gpu).host_waits;
    dc_optimizer_set_lr(s.sgd, 0.0);
    TEST_OK(gpu, dc_graph_replay(g));
    assert_int_equal(dc_ctx_device_counters(gpu).host_waits, waits);
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 6));
    dc_optimizer_set_lr(s.sgd, 0.125);
    TEST_OK(gpu, dc_graph_replay(g));
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 7));
    dc_graph_free(g);
    small_step_free(&s);
}

/* A call that waits for the device, or copies from the host, inside the
 * step: the capture fails naming it, and the graph runs the step eagerly
 * from then on, with the right results. */
static void test_waiting_step_runs_eagerly(void **state)
{
    (void)state;
    need_gpu();
    static const struct {
        int wait;
        const char *named;
    } cases[] = {
        {WAIT_ITEM, "dc_tensor_item"},
        {WAIT_FROM_HOST, "dc_tensor_from_host_copy"},
        {WAIT_SYNC, "dc_ctx_synchronize"},
        {WAIT_NORM, "dc_clip_grad_norm"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        small_step s;
        small_step_init(&s, gpu, 0.5);
        s.wait = cases[c].wait;
        dc_status st = DC_ERR_ARG;
        dc_graph *g = dc_graph_capture(gpu, run_small_step, &s, &st);
        TEST_NONNULL(gpu, g);
        const char *why = dc_graph_fallback(g);
        if (!why || !strstr(why, cases[c].named) || !strstr(why, "captured"))
            fail_msg("case %zu: the fallback is \"%s\", not a message naming %s", c, why ? why : "(none)",
                     cases[c].named);
        assert_int_equal(dc_graph_captures(g), 0);
        const uint64_t graphs = dc_ctx_device_counters(gpu).graph_launches;
        for (int i = 0; i < 3; ++i)
            TEST_OK(gpu, dc_graph_replay(g));
        assert_int_equal(dc_ctx_device_counters(gpu).graph_launches, graphs);
        assert_int_equal(s.runs, 5); /* the eager run, the failed capture, 3 eager replays */
        assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 4));
        dc_graph_free(g);
        small_step_free(&s);
    }
}

/* Device memory handed out before the capture and released after it: the
 * next replay runs the step as it is and captures again. Memory taken and
 * given back after the capture (an eager op's temporaries, another step run
 * eagerly in between) is in no graph: the replays go on. A tensor made and
 * freed inside the step is captured, its block the graph's alone. */
static void test_released_memory_recaptures(void **state)
{
    (void)state;
    need_gpu();
    small_step s;
    small_step_init(&s, gpu, 0.5);
    const int64_t n = 64;
    dc_tensor *before = dc_tensor_new(gpu, DC_F32, 1, &n);
    TEST_NONNULL(gpu, before);
    dc_graph *g = dc_graph_capture(gpu, run_small_step, &s, NULL);
    TEST_NONNULL(gpu, g);
    assert_int_equal(dc_graph_captures(g), 1);
    TEST_OK(gpu, dc_graph_replay(g));
    dc_tensor_free(before);
    TEST_OK(gpu, dc_graph_replay(g)); /* eagerly, then captured again */
    assert_int_equal(dc_graph_captures(g), 2);
    assert_int_equal(dc_graph_replays(g), 1);
    assert_int_equal(s.runs, 4);
    TEST_OK(gpu, dc_graph_replay(g));
    assert_int_equal(dc_graph_replays(g), 2);
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 4));

    /* made and freed after the capture, and another step run eagerly
     * between replays (its tape grows, its ops take temporaries) */
    small_step e;
    small_step_init(&e, gpu, 0.25);
    for (int i = 0; i < 3; ++i) {
        dc_tensor_free(dc_tensor_new(gpu, DC_F32, 1, &n));
        TEST_OK(gpu, run_small_step(&e));
        TEST_OK(gpu, dc_graph_replay(g));
    }
    assert_int_equal(dc_graph_captures(g), 2);
    assert_int_equal(dc_graph_replays(g), 5);
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 7));
    assert_true(item(gpu, e.w) == (double)w_after(false, 0.25f, 3));
    small_step_free(&e);
    dc_graph_free(g);
    small_step_free(&s);

    /* a tensor made and freed inside the step: the graph keeps its block */
    small_step f;
    small_step_init(&f, gpu, 0.5);
    f.make_and_free = true;
    g = dc_graph_capture(gpu, run_small_step, &f, NULL);
    TEST_NONNULL(gpu, g);
    const int64_t m = 1000;
    dc_tensor *other = dc_tensor_new(gpu, DC_F32, 1, &m); /* may not take the graph's block */
    TEST_NONNULL(gpu, other);
    TEST_OK(gpu, dc_tensor_fill(other, 3.0));
    for (int i = 0; i < 5; ++i)
        TEST_OK(gpu, dc_graph_replay(g));
    if (dc_graph_fallback(g))
        fail_msg("the step runs eagerly: %s", dc_graph_fallback(g));
    assert_int_equal(dc_graph_captures(g), 1);
    assert_int_equal(dc_graph_replays(g), 5);
    assert_true(item(gpu, f.w) == (double)w_after(false, 0.5f, 6));
    double v = 0.0;
    TEST_OK(gpu, dc_tensor_get(other, m - 1, &v));
    assert_true(v == 3.0);
    dc_tensor_free(other);
    dc_graph_free(g);
    small_step_free(&f);
}

/* A replay runs what was captured even where the step's host logic would
 * now choose other ops; dc_graph_verify finds them and captures again. */
static void test_verify_finds_other_ops(void **state)
{
    (void)state;
    need_gpu();
    small_step s;
    small_step_init(&s, gpu, 0.5);
    dc_graph *g = dc_graph_capture(gpu, run_small_step, &s, NULL);
    TEST_NONNULL(gpu, g);
    bool changed = true;
    TEST_OK(gpu, dc_graph_verify(g, &changed));
    assert_false(changed);
    assert_int_equal(dc_graph_captures(g), 1);
    s.use_add = true;
    TEST_OK(gpu, dc_graph_replay(g)); /* still x * w */
    const float w2 = w_after(false, 0.5f, 2);
    assert_true(item(gpu, s.w) == (double)w2);
    TEST_OK(gpu, dc_graph_verify(g, &changed));
    assert_true(changed);
    assert_int_equal(dc_graph_captures(g), 2);
    TEST_OK(gpu, dc_graph_replay(g)); /* x + w now */
    assert_true(item(gpu, s.w) == (double)w_after(true, w2, 1));
    dc_graph_free(g);
    small_step_free(&s);
}

/* A step that needs new device memory while captured: a cudaMalloc is
 * refused there, so the step runs eagerly and the capture is tried again at
 * the next replay. Memory needed once (a tensor made on the step's second
 * run, kept): the second capture succeeds. Memory needed at every run: after
 * a few tries the graph runs the step eagerly for good. */
static dc_status run_growing_step(void *user)
{
    small_step *s = user;
    const int run = ++s->growing_calls;
    if (s->grow_once && run >= 2 && !s->made[0]) {
        const int64_t n = (int64_t)3 << 18; /* 3 MiB: a size no other test's block has */
        if (!(s->made[0] = dc_tensor_new(s->ctx, DC_F32, 1, &n)))
            return dc_last_status(s->ctx);
    }
    if (!s->grow_once && run < (int)(sizeof s->made / sizeof s->made[0])) {
        const int64_t n = (int64_t)(run + 4) << 18; /* 1 MiB more at every run */
        if (!(s->made[run] = dc_tensor_new(s->ctx, DC_F32, 1, &n)))
            return dc_last_status(s->ctx);
    }
    return run_small_step(user);
}

static void test_capture_tried_again_after_new_memory(void **state)
{
    (void)state;
    need_gpu();
    small_step s;
    small_step_init(&s, gpu, 0.5);
    s.grow_once = true;
    dc_graph *g = dc_graph_capture(gpu, run_growing_step, &s, NULL);
    TEST_NONNULL(gpu, g);
    const char *why = dc_graph_fallback(g);
    if (!why || !strstr(why, "needs new device memory"))
        fail_msg("the fallback after the first capture is \"%s\"", why ? why : "(none)");
    assert_int_equal(dc_graph_captures(g), 0);
    TEST_OK(gpu, dc_graph_replay(g)); /* eagerly (making the tensor), then captured */
    assert_null(dc_graph_fallback(g));
    assert_int_equal(dc_graph_captures(g), 1);
    TEST_OK(gpu, dc_graph_replay(g));
    assert_int_equal(dc_graph_replays(g), 1);
    assert_true(item(gpu, s.w) == (double)w_after(false, 0.5f, 3));
    dc_graph_free(g);
    dc_tensor_free(s.made[0]);
    small_step_free(&s);

    small_step e;
    small_step_init(&e, gpu, 0.5);
    g = dc_graph_capture(gpu, run_growing_step, &e, NULL);
    TEST_NONNULL(gpu, g);
    for (int i = 0; i < 6; ++i)
        TEST_OK(gpu, dc_graph_replay(g));
    why = dc_graph_fallback(g);
    if (!why || !strstr(why, "needs new device memory"))
        fail_msg("the fallback after 6 replays is \"%s\"", why ? why : "(none)");
    assert_int_equal(dc_graph_captures(g), 0);
    /* 1 + 6 eager runs, and 4 refused captures (the first and 3 tries) */
    assert_int_equal(e.growing_calls, 11);
    assert_int_equal(e.runs, 7);
    assert_true(item(gpu, e.w) == (double)w_after(false, 0.5f, 7));
    dc_graph_free(g);
    for (size_t i = 0; i < sizeof e.made / sizeof e.made[0]; ++i)
        dc_tensor_free(e.made[i]);
    small_step_free(&e);
}

/* ---- the HM-LSTM training step, eager against captured ---- */

enum { T = 6, B = 4, V = 11 };

typedef struct hm_run {
    hm_model *model;
    hm_state *state;
    dc_tensor *ids, *targets;
    dc_optimizer *adam;
    dc_tape *tape;
    dc_tensor *loss;
} hm_run;

static dc_status hm_train_step(void *user)
{
    hm_run *r = user;
    dc_tape_reset(r->tape);
    hm_forward_result res;
    dc_status st = hm_forward(r->tape, r->model, r->state, HM_CELL_MIXED, r->ids, r->targets, false, NULL, &res);
    if (st == DC_OK)
        st = dc_backward(r->tape, res.loss);
    if (st == DC_OK)
        st = dc_clip_grad_norm(dc_tape_ctx(r->tape), r->model->n_params, r->model->params, 1.0, NULL);
    if (st == DC_OK)
        st = dc_optimizer_step(r->adam);
    dc_optimizer_zero_grad(r->adam);
    if (st == DC_OK)
        st = hm_state_update(r->state, &res);
    r->loss = res.loss;
    return st;
}

static void hm_run_init(hm_run *r, const hm_config *cfg)
{
    r->model = hm_model_new(gpu, cfg, 5);
    TEST_NONNULL(gpu, r->model);
    TEST_OK(gpu, hm_model_set_slope(r->model, 1.7));
    r->state = hm_state_new(gpu, cfg, B);
    TEST_NONNULL(gpu, r->state);
    const int64_t shape[2] = {T, B};
    r->ids = dc_tensor_new(gpu, DC_F32, 2, shape);
    r->targets = dc_tensor_new(gpu, DC_F32, 2, shape);
    r->adam = dc_optimizer_adam(gpu, r->model->n_params, r->model->params, NULL);
    r->tape = dc_tape_new(gpu);
    TEST_NONNULL(gpu, r->ids);
    TEST_NONNULL(gpu, r->targets);
    TEST_NONNULL(gpu, r->adam);
    TEST_NONNULL(gpu, r->tape);
}

static void hm_run_free(hm_run *r)
{
    dc_tape_free(r->tape);
    dc_optimizer_free(r->adam);
    dc_tensor_free(r->ids);
    dc_tensor_free(r->targets);
    hm_state_free(r->state);
    hm_model_free(r->model);
}

/* Batch k: ids and targets of T x B symbols, and the slope of step k. */
static void load_batch(hm_run *r, int k)
{
    float ids[T * B], targets[T * B];
    for (int i = 0; i < T * B; ++i) {
        ids[i] = (float)((i * 7 + 3 * k + 1) % V);
        targets[i] = (float)((i * 5 + 2 * k + 3) % V);
    }
    TEST_OK(gpu, dc_tensor_from_host_copy(r->ids, ids, sizeof ids));
    TEST_OK(gpu, dc_tensor_from_host_copy(r->targets, targets, sizeof targets));
    /* the boundary's slope anneals, as in the demo */
    TEST_OK(gpu, hm_model_set_slope(r->model, 1.0 + 0.5 * k));
}

static void test_hmlstm_step_replayed_as_eager(void **state)
{
    (void)state;
    need_gpu();
    const hm_config cfg = {2, 16, 5, 8, V, DC_F32, true, DC_PARTIALS_RECOMPUTE};
    hm_run eager, captured;
    hm_run_init(&eager, &cfg);
    hm_run_init(&captured, &cfg);
    enum { STEPS = 6 };
    double eager_loss[STEPS], captured_loss[STEPS];
    uint64_t eager_launches = 0;
    for (int k = 0; k < STEPS; ++k) {
        load_batch(&eager, k);
        const uint64_t at = dc_ctx_device_counters(gpu).kernel_launches;
        TEST_OK(gpu, hm_train_step(&eager));
        eager_launches = dc_ctx_device_counters(gpu).kernel_launches - at;
        eager_loss[k] = item(gpu, eager.loss);
    }
    dc_graph *g = NULL;
    for (int k = 0; k < STEPS; ++k) {
        load_batch(&captured, k);
        const dc_device_counters at = dc_ctx_device_counters(gpu);
        if (k == 0) {
            g = dc_graph_capture(gpu, hm_train_step, &captured, NULL);
            TEST_NONNULL(gpu, g);
        } else {
            TEST_OK(gpu, dc_graph_replay(g));
        }
        const dc_device_counters c = dc_ctx_device_counters(gpu);
        if (k >= 2 && (c.kernel_launches != at.kernel_launches || c.host_waits != at.host_waits ||
                       c.malloc_calls != at.malloc_calls || c.graph_launches != at.graph_launches + 1))
            fail_msg("replay %d: %llu kernels launched from the host, %llu host waits, %llu cudaMalloc calls, "
                     "%llu graphs launched",
                     k, (unsigned long long)(c.kernel_launches - at.kernel_launches),
                     (unsigned long long)(c.host_waits - at.host_waits),
                     (unsigned long long)(c.malloc_calls - at.malloc_calls),
                     (unsigned long long)(c.graph_launches - at.graph_launches));
        captured_loss[k] = item(gpu, captured.loss);
    }
    if (dc_graph_fallback(g))
        fail_msg("the HM-LSTM step runs eagerly: %s", dc_graph_fallback(g));
    print_message("an HM-LSTM training step (2 x 16, batch %d x %d) captured: %lld kernels in one graph, "
                  "%lld captures, %lld replays\n",
                  B, T, (long long)dc_graph_kernels(g), (long long)dc_graph_captures(g),
                  (long long)dc_graph_replays(g));
    assert_int_equal(dc_graph_kernels(g), (int64_t)eager_launches);
    for (int k = 0; k < STEPS; ++k)
        if (memcmp(&eager_loss[k], &captured_loss[k], sizeof(double)) != 0)
            fail_msg("step %d: loss %.9g eagerly, %.9g replayed", k, eager_loss[k], captured_loss[k]);
    for (int i = 0; i < eager.model->n_params; ++i) {
        double *a = test_values(eager.model->params[i]), *b = test_values(captured.model->params[i]);
        const int64_t n = dc_tensor_numel(eager.model->params[i]);
        if (memcmp(a, b, (size_t)n * sizeof *a) != 0)
            fail_msg("parameter %s differs after %d steps", eager.model->names[i], STEPS);
        free(a);
        free(b);
    }
    dc_graph_free(g);
    hm_run_free(&eager);
    hm_run_free(&captured);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.seed = 1;
    o.backend = DC_BACKEND_CPU;
    cpu = dc_ctx_new(&o, NULL);
    if (!cpu) {
        printf("test_graph: failed: no CPU context: %s\n", dc_last_error(NULL));
        return 1;
    }
    const char *device = getenv("DC_DEVICE");
    o.backend = device && strncmp(device, "cuda", 4) == 0 ? DC_BACKEND_AUTO : DC_BACKEND_CUDA;
    dc_status st = DC_OK;
    gpu = dc_ctx_new(&o, &st);
    if (!gpu) {
        snprintf(no_gpu_reason, sizeof no_gpu_reason, "%s", dc_last_error(NULL));
        const char *require = getenv("DC_REQUIRE_CUDA");
        if (st == DC_ERR_ARG || (require && strcmp(require, "1") == 0)) {
            printf("test_graph: failed: no usable CUDA device: %s\n", no_gpu_reason);
            dc_ctx_free(cpu);
            return 1;
        }
        printf("test_graph: the CUDA tests are skipped: no usable CUDA device: %s\n", no_gpu_reason);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_backend_runs_the_step),
        cmocka_unit_test(test_bad_calls_refused),
        cmocka_unit_test(test_replays_launch_one_graph),
        cmocka_unit_test(test_waiting_step_runs_eagerly),
        cmocka_unit_test(test_released_memory_recaptures),
        cmocka_unit_test(test_verify_finds_other_ops),
        cmocka_unit_test(test_capture_tried_again_after_new_memory),
        cmocka_unit_test(test_hmlstm_step_replayed_as_eager),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(cpu);
    dc_ctx_free(gpu);
    return failed;
}
