#include "hmlstm_problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "peer_io.h"

/* Releases what init made so far and reports why it stopped. */
static int fail(hm_problem *p, char *err, size_t size, const char *what, const char *why)
{
    snprintf(err, size, "%s: %s", what, why);
    hm_problem_free(p);
    return -1;
}

/* h in (-1, 1), c in (-2, 2), z in {0, 1}, from a fixed seed. */
static dc_status random_state(hm_problem *p)
{
    const int B = p->batch, H = p->cfg.hidden;
    float *buf = malloc((size_t)B * (size_t)H * sizeof *buf);
    if (!buf)
        return DC_ERR_MEMORY;
    dc_status st = DC_OK;
    for (int l = 0; l < p->cfg.layers && st == DC_OK; ++l) {
        bench_fill_uniform(buf, (int64_t)B * H, -1.0f, 1.0f, 100 + 3 * (uint64_t)l);
        st = dc_tensor_from_host_copy(p->state->h[l], buf, (size_t)B * (size_t)H * sizeof *buf);
        bench_fill_uniform(buf, (int64_t)B * H, -2.0f, 2.0f, 101 + 3 * (uint64_t)l);
        if (st == DC_OK)
            st = dc_tensor_from_host_copy(p->state->c[l], buf, (size_t)B * (size_t)H * sizeof *buf);
        bench_fill_uniform(buf, B, 0.0f, 1.0f, 102 + 3 * (uint64_t)l);
        for (int b = 0; b < B; ++b)
            buf[b] = buf[b] < 0.5f ? 0.0f : 1.0f;
        if (st == DC_OK)
            st = dc_tensor_from_host_copy(p->state->z[l], buf, (size_t)B * sizeof *buf);
    }
    free(buf);
    return st;
}

int hm_problem_init(hm_problem *p, dc_ctx *ctx, const char *corpus_path, char *err, size_t err_size)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    const char *path = corpus_path ? corpus_path : HM_PROBLEM_CORPUS;
    if (hm_corpus_load(&p->corpus, 1, &path, 0.05, err, err_size) != 0)
        return -1;
    p->cfg = (hm_config){3, 128, 64, 128, p->corpus.vocab, DC_F32, true, DC_PARTIALS_STORE};
    p->batch = 32;
    p->seq = 64;
    p->slope = 1.0;
    p->seed = 1;
    p->model = hm_model_new(ctx, &p->cfg, p->seed);
    if (!p->model || hm_model_set_slope(p->model, p->slope) != DC_OK)
        return fail(p, err, err_size, "model", dc_last_error(ctx));
    p->state = hm_state_new(ctx, &p->cfg, p->batch);
    if (!p->state || random_state(p) != DC_OK)
        return fail(p, err, err_size, "state", dc_last_error(ctx));
    const int64_t shape[2] = {p->seq, p->batch};
    const size_t n = (size_t)p->seq * (size_t)p->batch;
    float *ids = malloc(n * sizeof *ids), *targets = malloc(n * sizeof *targets);
    if (!ids || !targets) {
        free(ids);
        free(targets);
        return fail(p, err, err_size, "batch", "out of memory");
    }
    if (hm_corpus_batch(&p->corpus, 0, p->corpus.train_len, p->seq, p->batch, 0, ids, targets) != 0) {
        free(ids);
        free(targets);
        return fail(p, err, err_size, "batch", "the corpus holds no batch of this size");
    }
    p->ids = dc_tensor_from_host(ctx, DC_F32, 2, shape, ids);
    p->targets = dc_tensor_from_host(ctx, DC_F32, 2, shape, targets);
    free(ids);
    free(targets);
    if (!p->ids || !p->targets)
        return fail(p, err, err_size, "batch", dc_last_error(ctx));
    return 0;
}

void hm_problem_free(hm_problem *p)
{
    dc_tensor_free(p->ids);
    dc_tensor_free(p->targets);
    hm_state_free(p->state);
    hm_model_free(p->model);
    hm_corpus_free(&p->corpus);
    memset(p, 0, sizeof *p);
}

dc_status hm_problem_forward(hm_problem *p, dc_tape *tape, hm_cell_kind cell, dc_partials_policy policy,
                             dc_tensor **loss)
{
    p->model->cfg.policy = policy;
    dc_tape_reset(tape);
    for (int k = 0; k < p->model->n_params; ++k)
        dc_tensor_zero_grad(p->model->params[k]);
    hm_forward_result r;
    const dc_status st = hm_forward(tape, p->model, p->state, cell, p->ids, p->targets, false, NULL, &r);
    *loss = st == DC_OK ? r.loss : NULL;
    return st;
}

dc_status hm_problem_step(hm_problem *p, dc_tape *tape, hm_cell_kind cell, dc_partials_policy policy, double *loss,
                          double *t_fwd, double *t_bwd)
{
    const double t0 = bench_now();
    dc_tensor *loss_tensor = NULL;
    dc_status st = hm_problem_forward(p, tape, cell, policy, &loss_tensor);
    const double t1 = bench_now();
    if (st == DC_OK)
        st = dc_backward(tape, loss_tensor);
    const double t2 = bench_now();
    if (t_fwd)
        *t_fwd = t1 - t0;
    if (t_bwd)
        *t_bwd = t2 - t1;
    if (st == DC_OK && loss)
        st = dc_tensor_item(loss_tensor, loss);
    return st;
}

dc_status hm_problem_write_inputs(const hm_problem *p, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return DC_ERR_ARG;
    fprintf(f,
            "{\n  \"layers\": %d,\n  \"hidden\": %d,\n  \"embed\": %d,\n  \"out_embed\": %d,\n  \"vocab\": %d,\n"
            "  \"batch\": %d,\n  \"seq\": %d,\n  \"slope\": %.17g,\n  \"seed\": %llu,\n  \"params\": [",
            p->cfg.layers, p->cfg.hidden, p->cfg.embed, p->cfg.out_embed, p->cfg.vocab, p->batch, p->seq, p->slope,
            (unsigned long long)p->seed);
    for (int k = 0; k < p->model->n_params; ++k)
        fprintf(f, "%s\"%s\"", k ? ", " : "", p->model->names[k]);
    fprintf(f, "]\n}\n");
    if (fclose(f) != 0)
        return DC_ERR_ARG;
    dc_status st = DC_OK;
    for (int k = 0; k < p->model->n_params && st == DC_OK; ++k)
        st = npy_write_tensor(dir, p->model->names[k], p->model->params[k]);
    if (st == DC_OK)
        st = npy_write_tensor(dir, "ids", p->ids);
    if (st == DC_OK)
        st = npy_write_tensor(dir, "targets", p->targets);
    for (int l = 0; l < p->cfg.layers && st == DC_OK; ++l) {
        char name[16];
        snprintf(name, sizeof name, "h%d", l + 1);
        st = npy_write_tensor(dir, name, p->state->h[l]);
        snprintf(name, sizeof name, "c%d", l + 1);
        if (st == DC_OK)
            st = npy_write_tensor(dir, name, p->state->c[l]);
        snprintf(name, sizeof name, "z%d", l + 1);
        if (st == DC_OK)
            st = npy_write_tensor(dir, name, p->state->z[l]);
    }
    return st;
}

dc_status hm_problem_write_grads(const hm_problem *p, const char *dir, double loss)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/loss.npy", dir);
    const float l = (float)loss;
    if (npy_write_f32(path, 0, NULL, &l) != 0)
        return DC_ERR_ARG;
    dc_status st = DC_OK;
    for (int k = 0; k < p->model->n_params && st == DC_OK; ++k) {
        dc_tensor *param = p->model->params[k];
        const dc_tensor *g = dc_tensor_grad(param);
        if (g) {
            st = npy_write_tensor(dir, p->model->names[k], g);
        } else {
            dc_tensor *zero = dc_tensor_new(p->ctx, DC_F32, dc_tensor_ndim(param), dc_tensor_shape(param));
            st = zero ? npy_write_tensor(dir, p->model->names[k], zero) : DC_ERR_MEMORY;
            dc_tensor_free(zero);
        }
    }
    return st;
}
