/* Capture and replay of a step (include/dualcast/graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "internal.h"

/* What a capture collects while the step runs. */
struct dc_capture {
    uint64_t signature; /* of the ops queued, their operands' addresses, dtypes and shapes */
};

struct dc_graph {
    dc_ctx *ctx;
    dc_step_fn step;
    void *user;
    dc_cuda_graph *exec; /* the instantiated CUDA graph, or NULL */
    uint64_t signature;
    /* the device blocks released when the capture ended: a block released
     * since may be one the graph reads or writes */
    uint64_t releases;
    char fallback[512];
    int64_t captures, replays, kernels;
    int retries; /* captures in a row that may succeed later but did not */
    bool eager;  /* runs the step eagerly for good */
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

void dc_capture_note_op(dc_ctx *ctx, const char *op, int n, dc_tensor *const *in)
{
    struct dc_capture *c = ctx->capture;
    if (!c)
        return;
    /* the name's characters: an op's name may be built in a buffer */
    uint64_t h = c->signature;
    for (const char *ch = op; *ch; ++ch)
        h = mix(h, (unsigned char)*ch);
    for (int i = 0; i < n; ++i) {
        if (!in[i])
            continue;
        h = mix(h, (uint64_t)(uintptr_t)in[i]->data);
        h = mix(h, (uint64_t)in[i]->dtype);
        for (int d = 0; d < in[i]->ndim; ++d)
            h = mix(h, (uint64_t)in[i]->shape[d]);
    }
    c->signature = h;
}

/* The step, run by the graph: graph calls inside it are refused on every
 * backend (on the CPU nothing is captured, but a step that works there
 * works on CUDA too). */
static dc_status run_step(dc_graph *g)
{
    g->ctx->in_graph_step = true;
    const dc_status st = g->step(g->user);
    g->ctx->in_graph_step = false;
    return st;
}

/* A graph call inside a graph's step: refused. */
static dc_status refuse_inside_step(dc_ctx *ctx, const char *fn)
{
    return dc_error(ctx, DC_ERR_STATE, "%s: called inside a graph's step (captured or run eagerly)", fn);
}

/* Records the step (nothing runs on the device), `reuse` lending its
 * blocks: on success, *exec is the instantiated graph, *signature and
 * *kernels what the step queued; on failure, the status with the reason in
 * the context's message, and *retry whether a later capture may succeed
 * (the step needed new device memory, which an eager run makes), not when
 * the step failed for another reason or waited. */
static dc_status capture_step(dc_graph *g, dc_cuda_graph *reuse, dc_cuda_graph **exec, uint64_t *signature,
                              int64_t *kernels, bool *retry)
{
    dc_ctx *ctx = g->ctx;
    *exec = NULL;
    *retry = false;
    const uint64_t launches = dc_ctx_device_counters(ctx).kernel_launches;
    dc_status st = dc_cuda_capture_begin(ctx, reuse);
    if (st != DC_OK)
        return st;
    struct dc_capture seen = {0};
    ctx->capture = &seen;
    const dc_status step_status = run_step(g);
    ctx->capture = NULL;
    /* the step's reason, kept over what ending the capture says */
    char reason[sizeof g->fallback];
    snprintf(reason, sizeof reason, "%s", step_status != DC_OK ? dc_last_error(ctx) : "");
    const bool wanted_memory = dc_cuda_capture_wanted_memory(ctx);
    st = dc_cuda_capture_end(ctx, step_status == DC_OK, exec);
    *signature = seen.signature;
    *kernels = (int64_t)(dc_ctx_device_counters(ctx).kernel_launches - launches);
    if (step_status != DC_OK && wanted_memory) {
        *retry = true;
        return dc_error(ctx, step_status,
                        "dc_graph_capture: the step needs new device memory, which a step being captured cannot "
                        "have (it runs eagerly and is captured again at the next replay): %s",
                        reason);
    }
    if (step_status != DC_OK)
        return dc_error(ctx, step_status, "%s", reason);
    return st;
}

/* Runs the step eagerly, then captures it for the next replays. A capture
 * that may succeed later is tried again at the next replay, up to
 * MAX_RETRIES times in a row; where it cannot (the step waits), the graph
 * runs the step eagerly from then on and keeps why in g->fallback. */
enum { MAX_RETRIES = 3 };

static dc_status run_then_capture(dc_graph *g)
{
    dc_ctx *ctx = g->ctx;
    dc_cuda_graph_destroy(ctx, g->exec);
    g->exec = NULL;
    g->kernels = 0;
    const dc_status st = run_step(g);
    if (st != DC_OK)
        return st;
    if (!ctx->cuda) {
        snprintf(g->fallback, sizeof g->fallback, "the CPU backend runs steps as they are");
        g->eager = true;
        return DC_OK;
    }
    dc_cuda_graph *exec = NULL;
    uint64_t signature = 0;
    int64_t kernels = 0;
    bool retry = false;
    if (capture_step(g, NULL, &exec, &signature, &kernels, &retry) != DC_OK) {
        snprintf(g->fallback, sizeof g->fallback, "%s", dc_last_error(ctx));
        g->eager = !retry || ++g->retries > MAX_RETRIES;
        return DC_OK; /* the step ran; the capture's failure is the fallback */
    }
    g->exec = exec;
    g->signature = signature;
    g->kernels = kernels;
    g->releases = dc_cuda_releases(ctx);
    g->captures++;
    g->retries = 0;
    g->fallback[0] = '\0';
    return DC_OK;
}

dc_graph *dc_graph_capture(dc_ctx *ctx, dc_step_fn step, void *user, dc_status *status)
{
    dc_status st = DC_OK;
    dc_graph *g = NULL;
    if (!ctx || !step) {
        st = ctx ? dc_error(ctx, DC_ERR_ARG, "dc_graph_capture: the step function is NULL") : DC_ERR_ARG;
    } else if (ctx->capture || ctx->in_graph_step) {
        st = refuse_inside_step(ctx, "dc_graph_capture");
    } else if (!(g = calloc(1, sizeof *g))) {
        st = dc_error(ctx, DC_ERR_MEMORY, "dc_graph_capture: out of memory");
    } else {
        g->ctx = ctx;
        g->step = step;
        g->user = user;
        st = run_then_capture(g);
    }
    if (status)
        *status = st;
    if (st != DC_OK) {
        dc_graph_free(g);
        return NULL;
    }
    return g;
}

dc_status dc_graph_replay(dc_graph *g)
{
    if (!g)
        return DC_ERR_ARG;
    if (g->ctx->capture || g->ctx->in_graph_step)
        return refuse_inside_step(g->ctx, "dc_graph_replay");
    if (g->eager)
        return run_step(g);
    if (!g->exec || dc_cuda_releases(g->ctx) != g->releases)
        return run_then_capture(g);
    dc_status st = dc_cuda_graph_launch(g->ctx, g->exec);
    if (st == DC_OK)
        g->replays++;
    return st;
}

dc_status dc_graph_verify(dc_graph *g, bool *changed)
{
    if (changed)
        *changed = false;
    if (!g)
        return DC_ERR_ARG;
    if (g->ctx->capture || g->ctx->in_graph_step)
        return refuse_inside_step(g->ctx, "dc_graph_verify");
    if (!g->exec)
        return DC_OK; /* an eager step is the step; a pending capture sees it anew */
    dc_cuda_graph *exec = NULL;
    uint64_t signature = 0;
    int64_t kernels = 0;
    bool retry = false;
    const bool same_memory = dc_cuda_releases(g->ctx) == g->releases;
    dc_status st = capture_step(g, g->exec, &exec, &signature, &kernels, &retry);
    if (st != DC_OK)
        return st; /* the graph keeps its blocks */
    if (changed)
        *changed = !same_memory || signature != g->signature || kernels != g->kernels;
    /* the new graph holds the old one's blocks: it replaces it either way */
    dc_cuda_graph_destroy(g->ctx, g->exec);
    g->exec = exec;
    if (!same_memory || signature != g->signature || kernels != g->kernels)
        g->captures++;
    g->signature = signature;
    g->kernels = kernels;
    g->releases = dc_cuda_releases(g->ctx);
    return DC_OK;
}

const char *dc_graph_fallback(const dc_graph *g)
{
    return g && g->fallback[0] ? g->fallback : NULL;
}

int64_t dc_graph_captures(const dc_graph *g) { return g ? g->captures : 0; }
int64_t dc_graph_replays(const dc_graph *g) { return g ? g->replays : 0; }
int64_t dc_graph_kernels(const dc_graph *g) { return g ? g->kernels : 0; }

void dc_graph_free(dc_graph *g)
{
    if (!g)
        return;
    dc_cuda_graph_destroy(g->ctx, g->exec);
    free(g);
}
