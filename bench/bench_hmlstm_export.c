/* Exports one HM-LSTM training step for the comparison with PyTorch and JAX
 * (bench/peers/): builds the demo's model from its seed with the default
 * sizes, writes the parameters, the batch and the initial state, runs the
 * step (forward and backward) with dualcast's mixed-mode cell and writes its
 * loss and gradients.
 *
 *   bench_hmlstm_export DIR [--corpus PATH] [--cell mixed|pure]
 *
 * DIR/inputs receives what hmlstm_problem.h lists; DIR/dualcast the loss and
 * the gradients (one NAME.npy per parameter, loss.npy). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hmlstm_problem.h"

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "bench_hmlstm_export: cannot create %s: %s\n", path, strerror(errno));
    return -1;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *corpus = NULL;
    hm_cell_kind cell = HM_CELL_MIXED;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--corpus") == 0 && a + 1 < argc) {
            corpus = argv[++a];
        } else if (strcmp(argv[a], "--cell") == 0 && a + 1 < argc &&
                   (strcmp(argv[a + 1], "mixed") == 0 || strcmp(argv[a + 1], "pure") == 0)) {
            cell = strcmp(argv[++a], "pure") == 0 ? HM_CELL_PURE : HM_CELL_MIXED;
        } else if (argv[a][0] != '-' && !dir) {
            dir = argv[a];
        } else {
            fprintf(stderr, "usage: %s DIR [--corpus PATH] [--cell mixed|pure]\n", argv[0]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: %s DIR [--corpus PATH] [--cell mixed|pure]\n", argv[0]);
        return 2;
    }
    char inputs[4096], results[4096];
    snprintf(inputs, sizeof inputs, "%s/inputs", dir);
    snprintf(results, sizeof results, "%s/dualcast", dir);
    if (make_dir(dir) || make_dir(inputs) || make_dir(results))
        return 1;

    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx) {
        fprintf(stderr, "bench_hmlstm_export: %s\n", dc_last_error(NULL));
        return 1;
    }
    hm_problem p;
    char err[512];
    if (hm_problem_init(&p, ctx, corpus, err, sizeof err) != 0) {
        fprintf(stderr, "bench_hmlstm_export: %s\n", err);
        return 1;
    }
    dc_tape *tape = dc_tape_new(ctx);
    double loss = 0;
    dc_status st = tape ? hm_problem_write_inputs(&p, inputs) : DC_ERR_MEMORY;
    if (st == DC_OK)
        st = hm_problem_step(&p, tape, cell, DC_PARTIALS_STORE, &loss, NULL, NULL);
    if (st == DC_OK)
        st = hm_problem_write_grads(&p, results, loss);
    if (st != DC_OK) {
        fprintf(stderr, "bench_hmlstm_export: %s\n", dc_last_error(ctx));
        return 1;
    }
    printf("HM-LSTM step (%d layers x %d units, vocabulary %d, batch %d x %d): loss %.6f nats\n", p.cfg.layers,
           p.cfg.hidden, p.cfg.vocab, p.batch, p.seq, loss);
    printf("inputs in %s, dualcast's loss and gradients in %s\n", inputs, results);
    dc_tape_free(tape);
    hm_problem_free(&p);
    dc_ctx_free(ctx);
    return 0;
}
