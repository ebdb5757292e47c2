/* One HM-LSTM training step as the comparison with PyTorch and JAX runs it:
 * the demo's model (hmlstm_demo/hmlstm.c) with its default sizes, built from
 * a seed, one batch of the corpus and a random initial state, so that every
 * operation (FLUSH, COPY, UPDATE) occurs from the first step on. */
#ifndef DC_BENCH_HMLSTM_PROBLEM_H
#define DC_BENCH_HMLSTM_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "hmlstm.h"

#define HM_PROBLEM_CORPUS "/usr/share/games/fortunes"

typedef struct hm_problem {
    dc_ctx *ctx;
    hm_corpus corpus;
    hm_config cfg;
    int batch, seq;
    double slope;
    uint64_t seed;
    hm_model *model;
    hm_state *state; /* the initial state; a step reads it and never changes it */
    dc_tensor *ids, *targets;
} hm_problem;

/* The demo's defaults: 3 layers x 128 units, embedding 64, output module
 * 128, batch 32 x 64 characters, seed 1, slope 1 (the start of training);
 * the vocabulary is the corpus's. Batch 0 of the training text. Returns 0,
 * or -1 with a message in err. */
int hm_problem_init(hm_problem *p, dc_ctx *ctx, const char *corpus_path, char *err, size_t err_size);
void hm_problem_free(hm_problem *p);

/* The forward half of a step on `tape`: sets the cell's partials policy,
 * resets the tape, zeroes the parameters' gradients and queues the forward
 * pass; the loss tensor (on the tape) through *loss. It never waits for the
 * device, so a step built on it (this, then dc_backward) can be captured as
 * a CUDA graph (include/dualcast/graph.h); read the loss after it ran. */
dc_status hm_problem_forward(hm_problem *p, dc_tape *tape, hm_cell_kind cell, dc_partials_policy policy,
                             dc_tensor **loss);

/* One step on `tape`: reset, forward, backward into the parameters'
 * gradients (which it zeroes first). The loss in nats through *loss; with
 * t_fwd and t_bwd, the seconds of the forward and the backward pass. */
dc_status hm_problem_step(hm_problem *p, dc_tape *tape, hm_cell_kind cell, dc_partials_policy policy, double *loss,
                          double *t_fwd, double *t_bwd);

/* Writes the inputs of a step into dir: meta.json (sizes, slope, the
 * parameters' names in order), one NAME.npy per parameter, ids.npy and
 * targets.npy ([T, B] symbol indices as float32), h<l>.npy, c<l>.npy [B, H]
 * and z<l>.npy [B, 1] for l = 1..L (the initial state). */
dc_status hm_problem_write_inputs(const hm_problem *p, const char *dir);

/* Writes the step's results into dir: loss.npy (a scalar) and one NAME.npy
 * per parameter gradient (zeros for a parameter that got none). */
dc_status hm_problem_write_grads(const hm_problem *p, const char *dir, double loss);

#endif /* DC_BENCH_HMLSTM_PROBLEM_H */
