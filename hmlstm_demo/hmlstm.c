#include "hmlstm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

DC_BFN_DECLARE(hmlstm_cell);
DC_BFN_DECLARE(hmlstm_boundary);

static double now(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

const char *hm_config_problem(const hm_config *cfg)
{
    if (cfg->layers < 1 || cfg->layers > HM_MAX_LAYERS)
        return "the number of layers must be 1 to 8";
    if (cfg->hidden < 1 || cfg->embed < 1 || cfg->out_embed < 1)
        return "hidden, embedding and output widths must be positive";
    if (cfg->hidden > HM_MAX_WIDTH || cfg->embed > HM_MAX_WIDTH || cfg->out_embed > HM_MAX_WIDTH)
        return "hidden, embedding and output widths must be at most 2^20";
    if (cfg->vocab < 2)
        return "the vocabulary needs at least 2 symbols";
    if (cfg->dtype != DC_F32 && cfg->dtype != DC_F64)
        return "the dtype must be f32 or f64";
    if (cfg->policy != DC_PARTIALS_STORE && cfg->policy != DC_PARTIALS_RECOMPUTE)
        return "the partials policy must be DC_PARTIALS_STORE or DC_PARTIALS_RECOMPUTE";
    return NULL;
}

const char *hm_state_problem(const hm_model *m, const hm_state *s)
{
    const hm_config *cfg = &m->cfg;
    if (s->layers != cfg->layers)
        return "the state has another number of layers than the model";
    for (int l = 0; l < s->layers; ++l) {
        const dc_tensor *t[3] = {s->h[l], s->c[l], s->z[l]};
        const int64_t width[3] = {cfg->hidden, cfg->hidden, 1};
        for (int i = 0; i < 3; ++i)
            if (dc_tensor_dtype(t[i]) != cfg->dtype || dc_tensor_ndim(t[i]) != 2 ||
                dc_tensor_dim(t[i], 0) != s->batch || dc_tensor_dim(t[i], 1) != width[i])
                return "the state's tensors do not match the model's width or dtype";
    }
    return NULL;
}

static int gates(const hm_config *cfg) { return 4 * cfg->hidden + 1; }

/* Rows of layer l's weight: bottom-up input, recurrent, top-down. */
static int64_t input_width(const hm_config *cfg, int l)
{
    const int64_t bottom = l == 0 ? cfg->embed : cfg->hidden;
    const int64_t top = l < cfg->layers - 1 ? cfg->hidden : 0;
    return bottom + cfg->hidden + top;
}

static dc_tensor *param(hm_model *m, dc_ctx *ctx, const char *name, int ndim, int64_t d0, int64_t d1, double bound)
{
    const int64_t shape[2] = {d0, d1};
    dc_tensor *t = dc_tensor_new(ctx, m->cfg.dtype, ndim, shape);
    if (!t)
        return NULL;
    if (bound > 0 && dc_tensor_fill_uniform(t, -bound, bound) != DC_OK) {
        dc_tensor_free(t);
        return NULL;
    }
    dc_tensor_set_requires_grad(t, true);
    dc_tensor_set_name(t, name);
    snprintf(m->names[m->n_params], sizeof m->names[0], "%s", name);
    m->params[m->n_params++] = t;
    return t;
}

void hm_model_free(hm_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; ++i)
        dc_tensor_free(m->params[i]);
    dc_tensor_free(m->slope);
    free(m);
}

dc_status hm_model_set_slope(hm_model *m, double slope)
{
    return m ? dc_tensor_fill(m->slope, slope) : DC_ERR_ARG;
}

hm_model *hm_model_new(dc_ctx *ctx, const hm_config *cfg, uint64_t seed)
{
    if (!ctx)
        return NULL;
    if (!cfg || hm_config_problem(cfg))
        return NULL;
    hm_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cfg = *cfg;
    dc_ctx_seed(ctx, seed);
    const int L = cfg->layers, H = cfg->hidden;
    char name[32];
    bool ok = (m->embedding = param(m, ctx, "embedding", 2, cfg->vocab, cfg->embed, 1.0)) != NULL;
    for (int l = 0; ok && l < L; ++l) {
        const int64_t in = input_width(cfg, l);
        snprintf(name, sizeof name, "w%d", l + 1);
        m->w[l] = param(m, ctx, name, 2, in, gates(cfg), 1.0 / sqrt((double)in));
        snprintf(name, sizeof name, "b%d", l + 1);
        m->b[l] = m->w[l] ? param(m, ctx, name, 1, gates(cfg), 0, 0.0) : NULL;
        ok = m->b[l] != NULL;
        /* forget gates start open */
        for (int64_t j = 0; ok && j < H; ++j)
            ok = dc_tensor_set(m->b[l], j, 1.0) == DC_OK;
    }
    if (ok)
        ok = (m->gate_w = param(m, ctx, "gate_w", 2, (int64_t)L * H, L, 1.0 / sqrt((double)L * H))) != NULL;
    for (int l = 0; ok && l < L; ++l) {
        snprintf(name, sizeof name, "out_w%d", l + 1);
        ok = (m->out_w[l] = param(m, ctx, name, 2, H, cfg->out_embed, 1.0 / sqrt((double)H))) != NULL;
    }
    if (ok)
        ok = (m->head_w = param(m, ctx, "head_w", 2, cfg->out_embed, cfg->vocab, 1.0 / sqrt((double)cfg->out_embed))) !=
             NULL;
    if (ok)
        ok = (m->head_b = param(m, ctx, "head_b", 1, cfg->vocab, 0, 0.0)) != NULL;
    const int64_t one = 1;
    if (ok)
        ok = (m->slope = dc_tensor_new(ctx, cfg->dtype, 1, &one)) != NULL && dc_tensor_fill(m->slope, 1.0) == DC_OK;
    if (!ok) {
        hm_model_free(m);
        return NULL;
    }
    return m;
}

void hm_state_free(hm_state *s)
{
    if (!s)
        return;
    for (int l = 0; l < s->layers; ++l) {
        dc_tensor_free(s->h[l]);
        dc_tensor_free(s->c[l]);
        dc_tensor_free(s->z[l]);
    }
    dc_tensor_free(s->ones);
    free(s->hs);
    free(s);
}

hm_state *hm_state_new(dc_ctx *ctx, const hm_config *cfg, int batch)
{
    if (!ctx || hm_config_problem(cfg) || batch < 1)
        return NULL;
    hm_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->batch = batch;
    s->layers = cfg->layers;
    const int64_t hs[2] = {batch, cfg->hidden}, zs[2] = {batch, 1};
    for (int l = 0; l < cfg->layers; ++l) {
        s->h[l] = dc_tensor_new(ctx, cfg->dtype, 2, hs);
        s->c[l] = dc_tensor_new(ctx, cfg->dtype, 2, hs);
        s->z[l] = dc_tensor_new(ctx, cfg->dtype, 2, zs);
        if (!s->h[l] || !s->c[l] || !s->z[l]) {
            hm_state_free(s);
            return NULL;
        }
    }
    s->ones = dc_tensor_new(ctx, cfg->dtype, 2, zs);
    if (!s->ones || dc_tensor_fill(s->ones, 1.0) != DC_OK) {
        hm_state_free(s);
        return NULL;
    }
    return s;
}

dc_status hm_state_reset(hm_state *s)
{
    dc_status st = DC_OK;
    for (int l = 0; l < s->layers && st == DC_OK; ++l) {
        st = dc_tensor_fill(s->h[l], 0.0);
        if (st == DC_OK)
            st = dc_tensor_fill(s->c[l], 0.0);
        if (st == DC_OK)
            st = dc_tensor_fill(s->z[l], 0.0);
    }
    return st;
}

dc_status hm_state_update(hm_state *s, const hm_forward_result *r)
{
    dc_status st = DC_OK;
    for (int l = 0; l < s->layers && st == DC_OK; ++l) {
        st = dc_tensor_copy(s->h[l], r->h[l]);
        if (st == DC_OK)
            st = dc_tensor_copy(s->c[l], r->c[l]);
        if (st == DC_OK)
            st = dc_tensor_copy(s->z[l], r->z[l]);
    }
    return st;
}

/* The cell from primitive ops: one node per op, both sides of each select
 * computed. */
static dc_status cell_pure(dc_tape *tape, dc_tensor *z_prev, dc_tensor *z_below, dc_tensor *const *p,
                           dc_tensor *c_prev, dc_tensor *h_prev, dc_tensor **c, dc_tensor **h)
{
    dc_tensor *sf = dc_op_sigmoid(tape, p[0]), *si = dc_op_sigmoid(tape, p[1]);
    dc_tensor *so = dc_op_sigmoid(tape, p[2]), *tg = dc_op_tanh(tape, p[3]);
    dc_tensor *flush = dc_op_mul(tape, si, tg);
    dc_tensor *update = dc_op_add(tape, dc_op_mul(tape, sf, c_prev), flush);
    *c = dc_op_select(tape, z_prev, flush, dc_op_select(tape, z_below, update, c_prev));
    dc_tensor *h_new = dc_op_mul(tape, so, dc_op_tanh(tape, *c));
    *h = dc_op_select(tape, z_prev, h_new, dc_op_select(tape, z_below, h_new, h_prev));
    return *c && *h ? DC_OK : DC_ERR_ARG;
}

static dc_status cell_mixed(dc_tape *tape, const hm_config *cfg, dc_tensor *z_prev, dc_tensor *z_below,
                            dc_tensor *const *p, dc_tensor *c_prev, dc_tensor *h_prev, dc_tensor **c, dc_tensor **h)
{
    dc_tensor *in[8] = {z_prev, z_below, p[0], p[1], p[2], p[3], c_prev, h_prev};
    dc_tensor *out[2];
    dc_status st = dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_cell), 8, in, 2, out, cfg->policy);
    *c = out[0];
    *h = out[1];
    return st;
}

/* FLUSH, COPY or UPDATE for each row, from the two boundary values. */
static dc_status count_ops(const dc_tensor *z_prev, const dc_tensor *z_below, int64_t batch, int64_t *ops)
{
    for (int64_t b = 0; b < batch; ++b) {
        double zp, zb = 1.0;
        dc_status st = dc_tensor_get(z_prev, b, &zp);
        if (st == DC_OK && z_below)
            st = dc_tensor_get(z_below, dc_tensor_numel(z_below) == 1 ? 0 : b, &zb);
        if (st != DC_OK)
            return st;
        ops[zp == 1.0 ? HM_FLUSH : zb == 0.0 ? HM_COPY : HM_UPDATE]++;
    }
    return DC_OK;
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        if (!(expr))                                                                               \
            return DC_ERR_ARG;                                                                     \
    } while (0)

dc_status hm_forward(dc_tape *tape, const hm_model *m, hm_state *s, hm_cell_kind cell, dc_tensor *ids,
                     dc_tensor *targets, bool do_count, float **z_trace, hm_forward_result *r)
{
    const hm_config *cfg = &m->cfg;
    const int L = cfg->layers, H = cfg->hidden;
    memset(r, 0, sizeof *r);
    if (hm_state_problem(m, s) || !ids || dc_tensor_ndim(ids) != 2 || dc_tensor_dim(ids, 1) != s->batch)
        return DC_ERR_SHAPE;
    const int64_t T = dc_tensor_dim(ids, 0), B = s->batch;
    dc_tensor *h[HM_MAX_LAYERS], *c[HM_MAX_LAYERS], *z[HM_MAX_LAYERS];
    for (int l = 0; l < L; ++l) {
        h[l] = s->h[l];
        c[l] = s->c[l];
        z[l] = s->z[l];
    }
    /* every step's hidden states, per layer, for the output module; the
     * array is kept in the state so that steady-state steps allocate nothing */
    if (s->hs_cap < L * T) {
        dc_tensor **grown = realloc(s->hs, (size_t)(L * T) * sizeof *grown);
        CHECK(grown);
        s->hs = grown;
        s->hs_cap = L * T;
    }
    dc_tensor **hs = s->hs;
    /* the embedded inputs as [T B, E]: step t's rows t B .. t B + B - 1 are a
     * slice, whose gradient lands in place */
    const int64_t rows_shape[2] = {T * B, cfg->embed};
    dc_tensor *x_all = dc_op_reshape(tape, dc_op_embedding(tape, m->embedding, ids), 2, rows_shape);
    /* the input layer's boundary, always 1: one constant for every step */
    dc_tensor *one = dc_tape_scalar(tape, cfg->dtype, 1.0);
    dc_status st = x_all && one ? DC_OK : DC_ERR_ARG;
    /* Each layer's weights with its bias as one more row, once per pass, so
     * that every step's product adds the bias (its input ends in a column of
     * ones) and its backward pass sums the bias's gradient over the batch:
     * no addition and no reduction of their own per step. */
    dc_tensor *wb[HM_MAX_LAYERS];
    for (int l = 0; l < L && st == DC_OK; ++l) {
        const int64_t row[2] = {1, dc_tensor_numel(m->b[l])};
        dc_tensor *both[2] = {m->w[l], dc_op_reshape(tape, m->b[l], 2, row)};
        CHECK(wb[l] = dc_op_concat(tape, 2, both, 0));
    }

    for (int64_t t = 0; t < T && st == DC_OK; ++t) {
        dc_tensor *below = dc_op_slice(tape, x_all, 0, t * B, B);
        dc_tensor *z_below = NULL; /* the input layer's boundary is always 1 */
        for (int l = 0; l < L && st == DC_OK; ++l) {
            /* [z_below * h_below, h_prev, z_prev * h_above_prev, 1] @ [W; b] */
            dc_tensor *parts[4];
            int n_parts = 0;
            parts[n_parts++] = z_below ? dc_op_mul(tape, z_below, below) : below;
            parts[n_parts++] = h[l];
            if (l < L - 1)
                parts[n_parts++] = dc_op_mul(tape, z[l], h[l + 1]);
            parts[n_parts++] = s->ones;
            dc_tensor *pre = dc_op_matmul(tape, dc_op_concat(tape, n_parts, parts, 1), wb[l]);
            /* the boundary: recorded with its straight-through derivative,
             * or as a constant */
            dc_tensor *boundary_in[2] = {m->slope, dc_op_slice(tape, pre, 1, 4 * (int64_t)H, 1)};
            dc_tensor *z_new = NULL;
            const bool was = dc_tape_set_recording(tape, cfg->straight_through && dc_tape_is_recording(tape));
            if (boundary_in[1])
                st = dc_broadcast_policy(tape, DC_BFN_REF(hmlstm_boundary), 2, boundary_in, 1, &z_new, cfg->policy);
            dc_tape_set_recording(tape, was);
            CHECK(pre && z_new);
            if (do_count)
                st = count_ops(z[l], z_below, B, r->ops[l]);

            const int region = dc_tape_set_region(tape, HM_REGION_CELL);
            const double t0 = now();
            dc_tensor *p[4];
            for (int k = 0; k < 4; ++k)
                p[k] = dc_op_slice(tape, pre, 1, (int64_t)k * H, H);
            dc_tensor *c_new = NULL, *h_new = NULL;
            dc_tensor *zb = z_below ? z_below : one;
            if (st == DC_OK)
                st = cell == HM_CELL_MIXED ? cell_mixed(tape, cfg, z[l], zb, p, c[l], h[l], &c_new, &h_new)
                                           : cell_pure(tape, z[l], zb, p, c[l], h[l], &c_new, &h_new);
            r->cell_forward_seconds += now() - t0;
            dc_tape_set_region(tape, region);

            if (z_trace && st == DC_OK)
                for (int64_t b = 0; b < B && st == DC_OK; ++b) {
                    double v;
                    st = dc_tensor_get(z_new, b, &v);
                    z_trace[l][t * B + b] = (float)v;
                }
            c[l] = c_new;
            h[l] = h_new;
            z[l] = z_new;
            hs[l * T + t] = h_new;
            below = h_new;
            z_below = z_new;
        }
    }

    /* Output module: gates g^l = sigmoid(w . [h^1..h^L]), h^e = relu(sum g^l W^e_l h^l). */
    dc_tensor *per_layer[HM_MAX_LAYERS];
    for (int l = 0; l < L && st == DC_OK; ++l)
        CHECK(per_layer[l] = dc_op_concat(tape, (int)T, hs + l * T, 0)); /* [T B, H] */
    dc_tensor *logits = NULL;
    if (st == DC_OK) {
        dc_tensor *g = dc_op_sigmoid(tape, dc_op_matmul(tape, dc_op_concat(tape, L, per_layer, 1), m->gate_w));
        dc_tensor *acc = NULL;
        for (int l = 0; l < L; ++l) {
            dc_tensor *term = dc_op_mul(tape, dc_op_slice(tape, g, 1, l, 1), dc_op_matmul(tape, per_layer[l], m->out_w[l]));
            acc = acc ? dc_op_add(tape, acc, term) : term;
        }
        logits = dc_op_add(tape, dc_op_matmul(tape, dc_op_relu(tape, acc), m->head_w), m->head_b);
        const int64_t flat[1] = {T * B};
        r->loss = dc_op_cross_entropy(tape, logits, dc_op_reshape(tape, targets, 1, flat));
        st = r->loss ? DC_OK : DC_ERR_ARG;
    }
    r->logits = logits;
    for (int l = 0; l < L; ++l) {
        r->h[l] = h[l];
        r->c[l] = c[l];
        r->z[l] = z[l];
    }
    return st;
}
