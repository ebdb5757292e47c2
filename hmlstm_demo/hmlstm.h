/* A hierarchical multiscale LSTM language model (Chung, Ahn, Bengio, ICLR
 * 2017) on dualcast, with its cell either fused (one mixed-mode broadcast
 * node) or built from primitive ops (pure reverse mode). */
#ifndef HMLSTM_H
#define HMLSTM_H

#include <stdbool.h>
#include <stdint.h>

#include <dualcast.h>

#define HM_MAX_LAYERS 8
#define HM_MAX_WIDTH (1 << 20) /* hidden, embedding and output widths */
#define HM_REGION_CELL 1 /* tape region of the cell's own work */

typedef enum hm_cell_kind {
    HM_CELL_MIXED, /* one broadcast node per layer and step */
    HM_CELL_PURE,  /* primitive ops and select */
} hm_cell_kind;

typedef struct hm_config {
    int layers;            /* L */
    int hidden;            /* H, per layer */
    int embed;             /* width of the input embedding (h^0) */
    int out_embed;         /* width of the output module's hidden layer */
    int vocab;             /* number of symbols */
    dc_dtype dtype;
    bool straight_through; /* z's gradient: straight-through (training) or none */
    dc_partials_policy policy; /* of the mixed cell */
} hm_config;

typedef struct hm_model {
    hm_config cfg;
    dc_tensor *embedding;                /* [V, E] */
    dc_tensor *w[HM_MAX_LAYERS];         /* [in + H (+ H), 4H + 1]: bottom-up, recurrent, top-down rows */
    dc_tensor *b[HM_MAX_LAYERS];         /* [4H + 1]: gates f, i, o, g, then the boundary unit */
    dc_tensor *gate_w;                   /* [L H, L]: the output module's layer gates */
    dc_tensor *out_w[HM_MAX_LAYERS];     /* [H, Eo] */
    dc_tensor *head_w;                   /* [Eo, V] */
    dc_tensor *head_b;                   /* [V] */
    /* [1]: the slope of the boundary detector's hard sigmoid, read by every
     * forward pass from the tensor (hm_model_set_slope); not a parameter */
    dc_tensor *slope;
    int n_params;
    dc_tensor *params[4 + 3 * HM_MAX_LAYERS];
    char names[4 + 3 * HM_MAX_LAYERS][32];
} hm_model;

/* The recurrent state carried from one batch to the next. */
typedef struct hm_state {
    int batch;
    int layers;
    dc_tensor *h[HM_MAX_LAYERS], *c[HM_MAX_LAYERS], *z[HM_MAX_LAYERS]; /* [B, H], [B, H], [B, 1] */
    dc_tensor *ones; /* [B, 1] of ones: the column that multiplies the bias in each layer's product */
    dc_tensor **hs;  /* scratch of hm_forward */
    int64_t hs_cap;
} hm_state;

/* What one forward pass produced besides the loss. */
typedef struct hm_forward_result {
    dc_tensor *loss;                     /* mean NLL in nats */
    dc_tensor *logits;                   /* [T B, V] */
    dc_tensor *h[HM_MAX_LAYERS], *c[HM_MAX_LAYERS], *z[HM_MAX_LAYERS]; /* state after the last step */
    double cell_forward_seconds;         /* time in the cell's forward work */
    int64_t ops[HM_MAX_LAYERS][3];       /* FLUSH, COPY, UPDATE counts (when count_ops) */
} hm_forward_result;

enum { HM_FLUSH, HM_COPY, HM_UPDATE };

/* NULL when the configuration is usable, else what is wrong with it:
 * layers outside 1..HM_MAX_LAYERS, a width outside 1..HM_MAX_WIDTH, a
 * vocabulary under 2, a dtype or partials policy that does not exist. */
const char *hm_config_problem(const hm_config *cfg);

/* Parameters initialized from `seed`: uniform in +-1/sqrt(fan in), the
 * forget gates' biases at 1. NULL on error (dc_last_error(ctx)). */
hm_model *hm_model_new(dc_ctx *ctx, const hm_config *cfg, uint64_t seed);
void hm_model_free(hm_model *m);

/* Sets the hard sigmoid's slope a (1 after hm_model_new) for the forward
 * passes that follow; on CUDA a kernel writes it, without a host wait, so a
 * captured step replays with the slope set before each replay. */
dc_status hm_model_set_slope(hm_model *m, double slope);

/* A zero state for batches of `batch` streams; NULL for a configuration
 * that hm_config_problem refuses, a batch under 1, or out of memory. */
hm_state *hm_state_new(dc_ctx *ctx, const hm_config *cfg, int batch);
void hm_state_free(hm_state *s);
dc_status hm_state_reset(hm_state *s);

/* NULL when the state fits the model (its layers, its tensors' widths and
 * dtype), else what does not. */
const char *hm_state_problem(const hm_model *m, const hm_state *s);

/* Copies the final state of a forward pass into s (after its backward pass:
 * the pass still reads the old state until then). */
dc_status hm_state_update(hm_state *s, const hm_forward_result *r);

/* Runs T = ids->shape[0] steps over a batch of B = ids->shape[1] streams:
 * ids and targets are [T, B] symbol indices; the hard sigmoid's slope is
 * the model's (hm_model_set_slope). With z_trace, also stores z[l][t * B + b] (host memory, L arrays
 * of T B floats) for the boundary view; with count_ops, the operation counts.
 * DC_ERR_SHAPE, with nothing recorded and no message of its own, where the
 * state does not fit the model (hm_state_problem says how) or ids is not
 * [T, s->batch]; other failures are the ops', with their messages. */
dc_status hm_forward(dc_tape *tape, const hm_model *m, hm_state *s, hm_cell_kind cell, dc_tensor *ids,
                     dc_tensor *targets, bool count_ops, float **z_trace, hm_forward_result *r);

#endif /* HMLSTM_H */
