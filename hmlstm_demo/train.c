/* Trains a hierarchical multiscale LSTM character model with dualcast, then
 * times the same training step with the fused mixed-mode cell and with the
 * pure reverse-mode cell. Run with --help for the options. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "corpus.h"
#include "hmlstm.h"

#define DEFAULT_CORPUS "/usr/share/games/fortunes"

typedef struct options {
    const char *corpus[16];
    int n_corpus;
    hm_config model;
    int batch, seq;
    double minutes;
    long steps;
    double lr, clip;
    unsigned long seed;
    hm_cell_kind cell;
    int val_every, val_batches;
    const char *checkpoint, *resume;
    int sample;
    double temperature;
    int compare_steps;
    dc_backend backend;
    int cuda_device;
    double slope_max, slope_rate;
    bool graph;
    int loss_every;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hmlstm_demo [options]\n"
            "  --corpus PATH       text file or directory (repeatable; default " DEFAULT_CORPUS ")\n"
            "  --layers N          HM-LSTM layers (3)\n"
            "  --hidden N          units per layer (128)\n"
            "  --embed N           input embedding width (64)\n"
            "  --out N             output module width (128)\n"
            "  --batch N           parallel streams (32)\n"
            "  --seq N             truncated backpropagation length (64)\n"
            "  --minutes X         training time budget (7)\n"
            "  --steps N           stop after N steps (0: when the time budget is spent)\n"
            "  --lr X              Adam learning rate (0.003)\n"
            "  --clip X            gradient norm clipping (1.0)\n"
            "  --seed N            random seed (1)\n"
            "  --cell mixed|pure   cell used for training (mixed)\n"
            "  --policy store|recompute  partials policy of the mixed cell (recompute)\n"
            "  --val-every N       validate every N steps (250)\n"
            "  --val-batches N     batches per validation (16)\n"
            "  --checkpoint PATH   where to save the parameters (hmlstm_demo.ckpt; '' for none)\n"
            "  --resume PATH       start from a checkpoint\n"
            "  --sample N          characters of text to sample at the end (400)\n"
            "  --temperature X     sampling temperature (0.8)\n"
            "  --compare N         steps timed per cell in the final comparison (10; 0: skip)\n"
            "  --device cpu|cuda|cuda:N|auto  backend, N the CUDA device (auto; DC_DEVICE also works)\n"
            "  --slope-max X       final slope of the boundary detector's hard sigmoid (5)\n"
            "  --slope-rate X      slope increase per 100 steps (0.1)\n"
            "  --graph on|off      on CUDA, capture the training step once and replay it as one CUDA graph (on)\n"
            "  --loss-every N      read the loss back every N steps, for the progress line (10)\n");
}

static int fail(const char *fmt, const char *arg)
{
    fprintf(stderr, "hmlstm_demo: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see hmlstm_demo --help)\n");
    return 2;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->model = (hm_config){3, 128, 64, 128, 0, DC_F32, true, DC_PARTIALS_RECOMPUTE};
    o->batch = 32;
    o->seq = 64;
    o->minutes = 7;
    o->lr = 3e-3;
    o->clip = 1.0;
    o->seed = 1;
    o->cell = HM_CELL_MIXED;
    o->val_every = 250;
    o->val_batches = 16;
    o->checkpoint = "hmlstm_demo.ckpt";
    o->sample = 400;
    o->temperature = 0.8;
    o->compare_steps = 10;
    o->backend = DC_BACKEND_AUTO;
    o->slope_max = 5.0;
    o->slope_rate = 0.1;
    o->graph = true;
    o->loss_every = 10;
    for (int a = 1; a < argc; ++a) {
        const char *k = argv[a];
        if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (a + 1 >= argc)
            return fail("option %s needs a value", k);
        const char *v = argv[++a];
        long n;
        double x;
        if (strcmp(k, "--corpus") == 0) {
            if (o->n_corpus == 16)
                return fail("at most 16 corpus paths (%s)", v);
            o->corpus[o->n_corpus++] = v;
        } else if (strcmp(k, "--layers") == 0 && parse_long(v, 1, HM_MAX_LAYERS, &n)) {
            o->model.layers = (int)n;
        } else if (strcmp(k, "--hidden") == 0 && parse_long(v, 1, 8192, &n)) {
            o->model.hidden = (int)n;
        } else if (strcmp(k, "--embed") == 0 && parse_long(v, 1, 8192, &n)) {
            o->model.embed = (int)n;
        } else if (strcmp(k, "--out") == 0 && parse_long(v, 1, 8192, &n)) {
            o->model.out_embed = (int)n;
        } else if (strcmp(k, "--batch") == 0 && parse_long(v, 1, 4096, &n)) {
            o->batch = (int)n;
        } else if (strcmp(k, "--seq") == 0 && parse_long(v, 1, 4096, &n)) {
            o->seq = (int)n;
        } else if (strcmp(k, "--minutes") == 0 && parse_double(v, 0, 1e6, &x)) {
            o->minutes = x;
        } else if (strcmp(k, "--steps") == 0 && parse_long(v, 0, 100000000, &n)) {
            o->steps = n;
        } else if (strcmp(k, "--lr") == 0 && parse_double(v, 0, 10, &x)) {
            o->lr = x;
        } else if (strcmp(k, "--clip") == 0 && parse_double(v, 1e-9, 1e9, &x)) {
            o->clip = x;
        } else if (strcmp(k, "--seed") == 0 && parse_long(v, 0, 2147483647, &n)) {
            o->seed = (unsigned long)n;
        } else if (strcmp(k, "--cell") == 0 && (!strcmp(v, "mixed") || !strcmp(v, "pure"))) {
            o->cell = strcmp(v, "mixed") == 0 ? HM_CELL_MIXED : HM_CELL_PURE;
        } else if (strcmp(k, "--policy") == 0 && (!strcmp(v, "store") || !strcmp(v, "recompute"))) {
            o->model.policy = strcmp(v, "store") == 0 ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE;
        } else if (strcmp(k, "--val-every") == 0 && parse_long(v, 1, 100000000, &n)) {
            o->val_every = (int)n;
        } else if (strcmp(k, "--val-batches") == 0 && parse_long(v, 1, 100000, &n)) {
            o->val_batches = (int)n;
        } else if (strcmp(k, "--checkpoint") == 0) {
            o->checkpoint = v;
        } else if (strcmp(k, "--resume") == 0) {
            o->resume = v;
        } else if (strcmp(k, "--sample") == 0 && parse_long(v, 0, 1000000, &n)) {
            o->sample = (int)n;
        } else if (strcmp(k, "--temperature") == 0 && parse_double(v, 1e-3, 100, &x)) {
            o->temperature = x;
        } else if (strcmp(k, "--compare") == 0 && parse_long(v, 0, 100000, &n)) {
            o->compare_steps = (int)n;
        } else if (strcmp(k, "--device") == 0 && (!strcmp(v, "cpu") || !strcmp(v, "cuda") || !strcmp(v, "auto"))) {
            o->backend = !strcmp(v, "cpu") ? DC_BACKEND_CPU : !strcmp(v, "cuda") ? DC_BACKEND_CUDA : DC_BACKEND_AUTO;
            o->cuda_device = 0;
        } else if (strcmp(k, "--device") == 0 && !strncmp(v, "cuda:", 5) && isdigit((unsigned char)v[5]) &&
                   parse_long(v + 5, 0, INT_MAX, &n)) {
            o->backend = DC_BACKEND_CUDA;
            o->cuda_device = (int)n;
        } else if (strcmp(k, "--slope-max") == 0 && parse_double(v, 1, 100, &x)) {
            o->slope_max = x;
        } else if (strcmp(k, "--slope-rate") == 0 && parse_double(v, 0, 100, &x)) {
            o->slope_rate = x;
        } else if (strcmp(k, "--graph") == 0 && (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)) {
            o->graph = strcmp(v, "on") == 0;
        } else if (strcmp(k, "--loss-every") == 0 && parse_long(v, 1, 1000000, &n)) {
            o->loss_every = (int)n;
        } else {
            fprintf(stderr, "hmlstm_demo: bad option or value: %s %s\n(see hmlstm_demo --help)\n", k, v);
            return 2;
        }
    }
    if (o->n_corpus == 0)
        o->corpus[o->n_corpus++] = DEFAULT_CORPUS;
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Everything a training run holds. */
typedef struct run {
    options opt;
    dc_ctx *ctx;
    hm_corpus corpus;
    hm_model *model;
    hm_state *state, *val_state;
    dc_optimizer *adam;
    dc_tape *tape, *val_tape;
    dc_tensor *ids, *targets;
    float *ids_host, *targets_host;
} run;

/* A training step as a step function (include/dualcast/graph.h): what it
 * queues, on which tape and with which cell, and the loss tensor of its
 * last run or capture (valid until the tape's next reset). */
typedef struct step_job {
    run *r;
    dc_tape *tape;
    hm_cell_kind cell;
    double cell_seconds; /* the cell's forward and backward time, when the tape times */
    dc_tensor *loss;
} step_job;

_Noreturn static void die(run *r, const char *what)
{
    fprintf(stderr, "hmlstm_demo: %s: %s\n", what, dc_last_error(r->ctx));
    exit(1);
}

static double slope_at(const options *o, long step) { return fmin(o->slope_max, 1.0 + o->slope_rate * step / 100.0); }

static void load_batch(run *r, int64_t begin, int64_t end, int64_t k)
{
    if (hm_corpus_batch(&r->corpus, begin, end, r->opt.seq, r->opt.batch, k, r->ids_host, r->targets_host) != 0) {
        fprintf(stderr, "hmlstm_demo: batch %lld of [%lld, %lld) does not exist\n", (long long)k, (long long)begin,
                (long long)end);
        exit(1);
    }
    const size_t bytes = (size_t)r->opt.seq * (size_t)r->opt.batch * sizeof(float);
    if (dc_tensor_from_host_copy(r->ids, r->ids_host, bytes) != DC_OK ||
        dc_tensor_from_host_copy(r->targets, r->targets_host, bytes) != DC_OK)
        die(r, "batch");
}

/* One training step on the loaded batch, with the model's slope: forward,
 * backward, clipping, the Adam update and the carried state. Nothing in it
 * waits for the device, so that it can be captured. */
static dc_status queue_step(void *user)
{
    step_job *job = user;
    run *r = job->r;
    dc_tape_reset(job->tape);
    hm_forward_result res;
    dc_status st = hm_forward(job->tape, r->model, r->state, job->cell, r->ids, r->targets, false, NULL, &res);
    dc_tape_clear_timing(job->tape);
    if (st == DC_OK)
        st = dc_backward(job->tape, res.loss);
    job->cell_seconds = res.cell_forward_seconds + dc_tape_region_seconds(job->tape, HM_REGION_CELL);
    if (st == DC_OK)
        st = dc_clip_grad_norm(r->ctx, r->model->n_params, r->model->params, r->opt.clip, NULL);
    if (st == DC_OK)
        st = dc_optimizer_step(r->adam);
    if (st == DC_OK)
        st = hm_state_update(r->state, &res);
    dc_optimizer_zero_grad(r->adam);
    job->loss = res.loss;
    return st;
}

/* Runs the step: replays its graph where there is one, or queues it. */
static void run_step(run *r, step_job *job, dc_graph *graph)
{
    if ((graph ? dc_graph_replay(graph) : queue_step(job)) != DC_OK)
        die(r, "training step");
}

/* The loss of the step just run, in nats (waits for the device). */
static double step_loss(run *r, const step_job *job)
{
    double loss;
    if (dc_tensor_item(job->loss, &loss) != DC_OK)
        die(r, "loss");
    return loss;
}

/* Mean bits per character over the first val_batches batches of the
 * validation text, from a fresh state. */
static double validate(run *r)
{
    const int64_t begin = r->corpus.train_len, end = r->corpus.len;
    int64_t n = hm_corpus_batches(begin, end, r->opt.seq, r->opt.batch);
    if (n > r->opt.val_batches)
        n = r->opt.val_batches;
    if (n < 1)
        return NAN;
    hm_state_reset(r->val_state);
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
        load_batch(r, begin, end, k);
        dc_tape_reset(r->val_tape);
        hm_forward_result res;
        double loss;
        if (hm_forward(r->val_tape, r->model, r->val_state, HM_CELL_MIXED, r->ids, r->targets, false, NULL, &res) !=
                DC_OK ||
            dc_tensor_item(res.loss, &loss) != DC_OK || hm_state_update(r->val_state, &res) != DC_OK)
            die(r, "validation");
        total += loss;
    }
    return total / (double)n / log(2.0);
}

static void progress(long step, long max_steps, double elapsed, double budget, double loss, double chars_per_s)
{
    const double frac = max_steps > 0 ? (double)step / (double)max_steps : fmin(1.0, elapsed / budget);
    const int width = 24, filled = (int)(frac * width);
    char bar[32];
    for (int i = 0; i < width; ++i)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    const double left = frac > 0 ? elapsed / frac - elapsed : 0;
    printf("\r[%s] step %ld  loss %.3f  bpc %.3f  %.0f chars/s  left %d:%02d ", bar, step, loss, loss / log(2.0),
           chars_per_s, (int)left / 60, (int)left % 60);
    fflush(stdout);
}

/* Softmax with temperature over one row of logits, then a draw. */
static int draw(const float *logits, int v, double temperature, uint64_t *rng)
{
    double m = logits[0], sum = 0;
    for (int k = 1; k < v; ++k)
        m = fmax(m, logits[k]);
    double p[256];
    for (int k = 0; k < v; ++k)
        sum += p[k] = exp((logits[k] - m) / temperature);
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    double u = (double)(*rng >> 11) * 0x1.0p-53 * sum;
    for (int k = 0; k < v; ++k)
        if ((u -= p[k]) <= 0)
            return k;
    return v - 1;
}

/* Runs the model one character at a time (batch 1) from `prompt`. */
static void sample_text(run *r, const char *prompt, int n)
{
    hm_state *s = hm_state_new(r->ctx, &r->model->cfg, 1);
    const int64_t one[2] = {1, 1};
    dc_tensor *id = dc_tensor_new(r->ctx, DC_F32, 2, one), *tgt = dc_tensor_new(r->ctx, DC_F32, 2, one);
    dc_tape *tape = dc_tape_new(r->ctx);
    if (!s || !id || !tgt || !tape)
        die(r, "sampling");
    dc_tape_set_recording(tape, false);
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ r->opt.seed;
    float logits[256];
    const int v = r->corpus.vocab, plen = (int)strlen(prompt);
    int next = 0;
    printf("%s", prompt);
    /* the prompt's characters are fed in, then each drawn one */
    for (int i = 0; i < plen + n; ++i) {
        int sym = next;
        if (i < plen) {
            sym = r->corpus.index[(unsigned char)prompt[i]];
            sym = sym < 0 ? 0 : sym; /* a character the corpus lacks */
        } else {
            putchar(r->corpus.symbol[sym]);
        }
        dc_tape_reset(tape);
        hm_forward_result res;
        if (dc_tensor_set(id, 0, sym) != DC_OK ||
            hm_forward(tape, r->model, s, HM_CELL_MIXED, id, tgt, false, NULL, &res) != DC_OK ||
            dc_tensor_to_host(res.logits, logits, (size_t)v * sizeof(float)) != DC_OK ||
            hm_state_update(s, &res) != DC_OK)
            die(r, "sampling");
        next = draw(logits, v, r->opt.temperature, &rng);
    }
    putchar('\n');
    dc_tape_free(tape);
    dc_tensor_free(id);
    dc_tensor_free(tgt);
    hm_state_free(s);
}

/* Prints a stretch of text with, under it, a mark where each layer's
 * boundary detector fired (z = 1): where the layer ends a segment. */
static void boundary_view(run *r)
{
    /* a line of validation text, starting after a newline */
    int64_t at = r->corpus.train_len;
    while (at < r->corpus.len - 200 && r->corpus.symbol[r->corpus.ids[at]] != '\n')
        ++at;
    ++at;
    int len = 0;
    char line[96];
    while (len < 80 && at + len < r->corpus.len) {
        char ch = (char)r->corpus.symbol[r->corpus.ids[at + len]];
        if (ch == '\n' && len > 30)
            break;
        line[len++] = (ch == '\n' || ch == '\t') ? ' ' : ch;
    }
    line[len] = '\0';
    hm_state *s = hm_state_new(r->ctx, &r->model->cfg, 1);
    const int64_t shape[2] = {len, 1};
    float ids[96], tg[96];
    for (int t = 0; t < len; ++t) {
        ids[t] = (float)r->corpus.ids[at + t];
        tg[t] = (float)r->corpus.ids[at + t + 1];
    }
    dc_tensor *idt = dc_tensor_from_host(r->ctx, DC_F32, 2, shape, ids);
    dc_tensor *tgt = dc_tensor_from_host(r->ctx, DC_F32, 2, shape, tg);
    dc_tape *tape = dc_tape_new(r->ctx);
    const int L = r->model->cfg.layers;
    float *trace[HM_MAX_LAYERS];
    for (int l = 0; l < L; ++l)
        trace[l] = calloc((size_t)len, sizeof(float));
    if (!s || !idt || !tgt || !tape)
        die(r, "boundary view");
    dc_tape_set_recording(tape, false);
    hm_forward_result res;
    if (hm_forward(tape, r->model, s, HM_CELL_MIXED, idt, tgt, false, trace, &res) != DC_OK)
        die(r, "boundary view");
    printf("boundaries (| where layer l's detector fired after that character; top layer first):\n");
    for (int l = L - 1; l >= 0; --l) {
        printf("  layer %d  ", l + 1);
        for (int t = 0; t < len; ++t)
            putchar(trace[l][t] == 1.0f ? '|' : ' ');
        putchar('\n');
    }
    printf("  text     %s\n", line);
    for (int l = 0; l < L; ++l)
        free(trace[l]);
    dc_tape_free(tape);
    dc_tensor_free(idt);
    dc_tensor_free(tgt);
    hm_state_free(s);
}

/* The same training step, timed with each cell, run eagerly and (on CUDA,
 * with --graph on) replayed as a CUDA graph: median of repeated steps from
 * the same parameters and batch, each timed from a device at rest to its
 * loss read back. The variants take turns, step by step, in a rotating
 * order, so that a change in the machine's speed during the comparison
 * falls on all alike. */
enum { VARIANTS = 4 };

static void compare_cells(run *r)
{
    const int reps = r->opt.compare_steps;
    const bool on_cuda = dc_ctx_backend(r->ctx) == DC_BACKEND_CUDA;
    const int n_var = on_cuda && r->opt.graph ? 4 : 2;
    printf("\nmixed mode vs pure reverse mode: one training step (batch %d x %d characters), median of %d\n",
           r->opt.batch, r->opt.seq, reps);
    dc_tensor **snapshot = calloc((size_t)r->model->n_params, sizeof *snapshot);
    if (!snapshot)
        die(r, "snapshot");
    for (int i = 0; i < r->model->n_params; ++i) {
        const dc_tensor *p = r->model->params[i];
        snapshot[i] = dc_tensor_new(r->ctx, dc_tensor_dtype(p), dc_tensor_ndim(p), dc_tensor_shape(p));
        if (!snapshot[i] || dc_tensor_copy(snapshot[i], p) != DC_OK)
            die(r, "snapshot");
    }
    load_batch(r, 0, r->corpus.train_len, 0);
    /* variant k: cell k % 2 (mixed, pure), eagerly (k < 2) or replayed */
    step_job job[VARIANTS];
    dc_graph *graph[VARIANTS] = {NULL};
    double step_med[VARIANTS], cell_med[VARIANTS], peak[VARIANTS], loss[VARIANTS];
    uint64_t launches[VARIANTS] = {0};
    double *ts[VARIANTS], *tc[VARIANTS];
    for (int k = 0; k < n_var; ++k) {
        job[k] = (step_job){r, dc_tape_new(r->ctx), k % 2 == 0 ? HM_CELL_MIXED : HM_CELL_PURE, 0, NULL};
        ts[k] = malloc((size_t)reps * sizeof *ts[k]);
        tc[k] = malloc((size_t)reps * sizeof *tc[k]);
        if (!ts[k] || !tc[k] || !job[k].tape)
            die(r, "comparison");
        dc_tape_set_timing(job[k].tape, k < 2); /* host clocks mean nothing in a replay */
    }
    /* three warm-up rounds: the eager variants alone in the first, since a
     * tape's second step gives back the blocks its first one grew
     * (dc_tape_reset), which would make every graph captured before it
     * capture again (dc_graph_replay); the graphs captured in the second */
    for (int i = -3; i < reps; ++i) {
        for (int turn = 0; turn < n_var; ++turn) {
            const int k = ((turn + i + 2) % n_var + n_var) % n_var;
            if (i == -3 && k >= 2)
                continue;
            for (int p = 0; p < r->model->n_params; ++p)
                if (dc_tensor_copy(r->model->params[p], snapshot[p]) != DC_OK)
                    die(r, "snapshot");
            if (hm_state_reset(r->state) != DC_OK || dc_ctx_synchronize(r->ctx) != DC_OK)
                die(r, "comparison");
            const uint64_t kernels = dc_ctx_device_counters(r->ctx).kernel_launches;
            const double t0 = now();
            if (k >= 2 && !graph[k]) {
                if (!(graph[k] = dc_graph_capture(r->ctx, queue_step, &job[k], NULL)))
                    die(r, "capture");
            } else {
                run_step(r, &job[k], graph[k]);
            }
            loss[k] = step_loss(r, &job[k]);
            const double t1 = now();
            if (i >= 0) {
                ts[k][i] = t1 - t0;
                tc[k][i] = job[k].cell_seconds;
                launches[k] = graph[k] ? (uint64_t)dc_graph_kernels(graph[k])
                                       : dc_ctx_device_counters(r->ctx).kernel_launches - kernels;
            }
        }
    }
    hm_state_reset(r->state);
    for (int k = 0; k < n_var; ++k) {
        step_med[k] = median(ts[k], reps);
        cell_med[k] = median(tc[k], reps);
        peak[k] = (double)dc_tape_peak_bytes(job[k].tape) / (1 << 20);
        if (graph[k] && dc_graph_captures(graph[k]) > 1) /* each capture costs a step run eagerly */
            printf("(%s cell: the step was captured %lld times, replayed %lld times)\n", k % 2 == 0 ? "mixed" : "pure",
                   (long long)dc_graph_captures(graph[k]), (long long)dc_graph_replays(graph[k]));
        if (graph[k] && dc_graph_fallback(graph[k]))
            printf("(%s cell: the graph runs the step eagerly: %s)\n", k % 2 == 0 ? "mixed" : "pure",
                   dc_graph_fallback(graph[k]));
        dc_graph_free(graph[k]);
        dc_tape_free(job[k].tape);
        free(ts[k]);
        free(tc[k]);
    }
    for (int p = 0; p < r->model->n_params; ++p) {
        dc_tensor_copy(r->model->params[p], snapshot[p]);
        dc_tensor_free(snapshot[p]);
    }
    free(snapshot);
    printf("| cell | run | step ms | cell fwd+bwd ms | cell share of step |%s peak tape MiB | loss |\n",
           on_cuda ? " kernels per step |" : "");
    printf("|---|---|---:|---:|---:|%s---:|---:|\n", on_cuda ? "---:|" : "");
    for (int k = 0; k < n_var; ++k) {
        char cell[32] = "-", share[32] = "-", kernels[32] = "";
        if (k < 2) {
            snprintf(cell, sizeof cell, "%.1f", 1e3 * cell_med[k]);
            snprintf(share, sizeof share, "%.0f%%", 100 * cell_med[k] / step_med[k]);
        }
        if (on_cuda)
            snprintf(kernels, sizeof kernels, " %llu |", (unsigned long long)launches[k]);
        printf("| %s | %s | %.2f | %s | %s |%s %.1f | %.6f |\n", k % 2 == 0 ? "mixed (1 node)" : "pure reverse",
               k < 2 ? "eager" : "graph replay", 1e3 * step_med[k], cell, share, on_cuda ? kernels : "", peak[k],
               loss[k]);
    }
    printf("step: mixed mode %.2fx faster eagerly", step_med[1] / step_med[0]);
    if (n_var == 4)
        printf(", %.2fx under graph replay; the mixed step replayed %.2fx as fast as run eagerly",
               step_med[3] / step_med[2], step_med[0] / step_med[2]);
    printf("; cell: %.2fx faster; tape memory: %.2fx less\n", cell_med[1] / cell_med[0], peak[1] / peak[0]);
    printf("(the matmuls are the same in both; the whole eager step can gain at most 1 / (1 - %.0f%%) = %.2fx from "
           "the cell)\n",
           100 * cell_med[1] / step_med[1], 1.0 / (1.0 - cell_med[1] / step_med[1]));
}

int main(int argc, char **argv)
{
    run r;
    memset(&r, 0, sizeof r);
    int rc = parse_args(argc, argv, &r.opt);
    if (rc)
        return rc == 1 ? 0 : rc;
    options *o = &r.opt;

    char err[512];
    if (hm_corpus_load(&r.corpus, o->n_corpus, o->corpus, 0.05, err, sizeof err) != 0) {
        fprintf(stderr, "hmlstm_demo: corpus: %s\n", err);
        if (o->n_corpus == 1 && strcmp(o->corpus[0], DEFAULT_CORPUS) == 0)
            fprintf(stderr, "(install the default corpus with: apt-get install -y fortunes, or give --corpus FILE)\n");
        return 1;
    }
    o->model.vocab = r.corpus.vocab;
    const char *problem = hm_config_problem(&o->model);
    if (problem)
        return fail("%s", problem);
    if (hm_corpus_batches(0, r.corpus.train_len, o->seq, o->batch) < 1)
        return fail("%s", "the corpus is too small for this batch and sequence length");
    if (hm_corpus_batches(r.corpus.train_len, r.corpus.len, o->seq, o->batch) < 1) {
        char why[256];
        snprintf(why, sizeof why,
                 "the corpus's validation part (its last 5%%, %lld bytes) holds no batch of %d streams of %d + 1 "
                 "symbols; give a longer corpus, or a smaller --batch or --seq",
                 (long long)(r.corpus.len - r.corpus.train_len), o->batch, o->seq);
        return fail("%s", why);
    }

    dc_ctx_options co = dc_ctx_options_default();
    co.backend = o->backend;
    co.cuda_device = o->cuda_device;
    co.seed = o->seed;
    r.ctx = dc_ctx_new(&co, NULL);
    if (!r.ctx) {
        fprintf(stderr, "hmlstm_demo: %s\n", dc_last_error(NULL));
        return 1;
    }
    const int64_t bt[2] = {o->seq, o->batch};
    r.model = hm_model_new(r.ctx, &o->model, o->seed);
    r.state = r.model ? hm_state_new(r.ctx, &o->model, o->batch) : NULL;
    r.val_state = r.state ? hm_state_new(r.ctx, &o->model, o->batch) : NULL;
    dc_adam_options ao = dc_adam_options_default();
    ao.lr = o->lr;
    r.adam = r.val_state ? dc_optimizer_adam(r.ctx, r.model->n_params, r.model->params, &ao) : NULL;
    r.tape = r.adam ? dc_tape_new(r.ctx) : NULL;
    r.val_tape = r.tape ? dc_tape_new(r.ctx) : NULL;
    r.ids = r.val_tape ? dc_tensor_new(r.ctx, DC_F32, 2, bt) : NULL;
    r.targets = r.ids ? dc_tensor_new(r.ctx, DC_F32, 2, bt) : NULL;
    r.ids_host = malloc((size_t)o->seq * (size_t)o->batch * sizeof(float));
    r.targets_host = malloc((size_t)o->seq * (size_t)o->batch * sizeof(float));
    if (!r.targets || !r.ids_host || !r.targets_host)
        die(&r, "setup");
    dc_tape_set_recording(r.val_tape, false); /* validation only runs forward */
    const char *names[4 + 3 * HM_MAX_LAYERS];
    for (int i = 0; i < r.model->n_params; ++i)
        names[i] = r.model->names[i];
    if (o->resume && dc_checkpoint_load(r.ctx, o->resume, r.model->n_params, r.model->params, names) != DC_OK)
        die(&r, "resume");

    int64_t n_params = 0;
    for (int i = 0; i < r.model->n_params; ++i)
        n_params += dc_tensor_numel(r.model->params[i]);
    printf("dualcast HM-LSTM demo on %s\n", dc_ctx_device_name(r.ctx));
    if (dc_ctx_backend(r.ctx) == DC_BACKEND_CPU) {
        dc_blas_info blas;
        dc_blas_info_get(&blas);
        printf("matrix products: %s (kernels: %s)\n", blas.library, blas.core[0] ? blas.core : "not said");
        if (blas.warning[0])
            fprintf(stderr, "hmlstm_demo: WARNING: %s\n", blas.warning);
    }
    printf("corpus: %lld characters (%d symbols), %lld for training; unigram entropy %.3f bits/char\n",
           (long long)r.corpus.len, r.corpus.vocab, (long long)r.corpus.train_len, r.corpus.unigram_bits);
    printf("model: %d layers x %d units, %lld parameters; %s cell; batch %d x %d characters\n", o->model.layers,
           o->model.hidden, (long long)n_params, o->cell == HM_CELL_MIXED ? "mixed-mode" : "pure reverse-mode",
           o->batch, o->seq);

    const double t_start = now(), budget = o->minutes * 60.0;
    const int64_t per_epoch = hm_corpus_batches(0, r.corpus.train_len, o->seq, o->batch);
    double loss = NAN, last_print = 0, val_bpc = NAN;
    long step = 0;
    step_job job = {&r, r.tape, o->cell, 0, NULL};
    dc_graph *graph = NULL;
    const bool on_cuda = dc_ctx_backend(r.ctx) == DC_BACKEND_CUDA;
    while ((o->steps == 0 || step < o->steps) && (o->steps > 0 || now() - t_start < budget)) {
        if (step % per_epoch == 0 && hm_state_reset(r.state) != DC_OK)
            die(&r, "state");
        load_batch(&r, 0, r.corpus.train_len, step);
        if (hm_model_set_slope(r.model, slope_at(o, step)) != DC_OK)
            die(&r, "slope");
        const uint64_t kernels = dc_ctx_device_counters(r.ctx).kernel_launches;
        if (step == 1 && o->graph && on_cuda) {
            /* the first step warmed the tape: the second is captured */
            if (!(graph = dc_graph_capture(r.ctx, queue_step, &job, NULL)))
                die(&r, "capture");
        } else {
            run_step(&r, &job, graph);
        }
        if (step == 1 && on_cuda) {
            if (graph && !dc_graph_fallback(graph))
                printf("CUDA: the training step captured as one graph of %lld kernels, replayed from now on\n",
                       (long long)dc_graph_kernels(graph));
            else
                printf("CUDA: %llu kernel launches per step%s%s\n",
                       (unsigned long long)(dc_ctx_device_counters(r.ctx).kernel_launches - kernels),
                       graph ? "; no graph: " : "", graph ? dc_graph_fallback(graph) : "");
        }
        ++step;
        /* the loss every loss_every steps and before a validation: each read
         * waits for the device */
        if (step % o->loss_every == 0 || step % o->val_every == 0 || step == o->steps) {
            const double l = step_loss(&r, &job);
            loss = isnan(loss) ? l : 0.8 * loss + 0.2 * l;
        }
        const double elapsed = now() - t_start;
        if (!isnan(loss) && (elapsed - last_print > 0.5 || step == o->steps)) {
            progress(step, o->steps, elapsed, budget, loss, (double)step * o->seq * o->batch / elapsed);
            last_print = elapsed;
        }
        if (step % o->val_every == 0) {
            val_bpc = validate(&r);
            printf("\n  step %ld: validation %.3f bits/char (training %.3f)\n", step, val_bpc, loss / log(2.0));
        }
    }
    if (dc_ctx_synchronize(r.ctx) != DC_OK)
        die(&r, "training");
    const double train_seconds = now() - t_start;
    dc_graph_free(graph);
    if (hm_model_set_slope(r.model, slope_at(o, step)) != DC_OK)
        die(&r, "slope");
    val_bpc = validate(&r);
    printf("\ntrained %ld steps (%lld characters) in %.0f s\n", step, (long long)step * o->seq * o->batch,
           train_seconds);
    printf("validation: %.3f bits per character (unigram entropy of the corpus: %.3f)\n", val_bpc,
           r.corpus.unigram_bits);

    if (o->checkpoint && *o->checkpoint) {
        if (dc_checkpoint_save(r.ctx, o->checkpoint, r.model->n_params, r.model->params, names) != DC_OK)
            die(&r, "checkpoint");
        printf("parameters saved to %s\n", o->checkpoint);
    }
    if (o->sample > 0) {
        printf("\nsample (temperature %.2f):\n", o->temperature);
        sample_text(&r, "The ", o->sample);
    }
    printf("\n");
    boundary_view(&r);
    if (o->compare_steps > 0)
        compare_cells(&r);

    free(r.ids_host);
    free(r.targets_host);
    dc_tensor_free(r.ids);
    dc_tensor_free(r.targets);
    dc_tape_free(r.tape);
    dc_tape_free(r.val_tape);
    dc_optimizer_free(r.adam);
    hm_state_free(r.state);
    hm_state_free(r.val_state);
    hm_model_free(r.model);
    hm_corpus_free(&r.corpus);
    dc_ctx_free(r.ctx);
    return 0;
}
