/* One HM-LSTM cell node, forward and backward, across hidden sizes: the
 * fused mixed-mode cell (store and recompute policies) against the same
 * math from primitive ops and select (pure reverse mode).
 *
 *   bench_hmlstm_cell [--batch 32] [--hidden 128,256,512,1024] [--reps N] [--gates separate|slices]
 *
 * Control: a third of the rows FLUSH, a third COPY, a third UPDATE. With
 * --gates slices the four gate pre-activations are slices of one
 * [batch, 4 hidden + 1] tensor, as in the HM-LSTM demo (where they come out
 * of one matrix product), and the slicing counts as forward time. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

#include "bench_common.h"

DC_BFN_DECLARE(hmlstm_cell);

typedef struct cell_inputs {
    dc_tensor *z, *zb, *x[6]; /* pf, pi, po, pg, c_prev, h_prev */
} cell_inputs;

enum { MIXED_STORE, MIXED_RECOMPUTE, PURE, N_VARIANTS };
static const char *const names[N_VARIANTS] = {"mixed, store", "mixed, recompute", "pure reverse"};

static void die(dc_ctx *ctx, const char *what)
{
    fprintf(stderr, "bench_hmlstm_cell: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

static void cell(dc_tape *t, const cell_inputs *in, int variant, dc_tensor **c, dc_tensor **h)
{
    if (variant != PURE) {
        dc_tensor *args[8] = {in->z, in->zb, in->x[0], in->x[1], in->x[2], in->x[3], in->x[4], in->x[5]};
        dc_tensor *out[2] = {NULL, NULL};
        dc_broadcast_policy(t, DC_BFN_REF(hmlstm_cell), 8, args, 2, out,
                            variant == MIXED_STORE ? DC_PARTIALS_STORE : DC_PARTIALS_RECOMPUTE);
        *c = out[0];
        *h = out[1];
        return;
    }
    dc_tensor *sf = dc_op_sigmoid(t, in->x[0]), *si = dc_op_sigmoid(t, in->x[1]);
    dc_tensor *so = dc_op_sigmoid(t, in->x[2]), *tg = dc_op_tanh(t, in->x[3]);
    dc_tensor *flush = dc_op_mul(t, si, tg);
    dc_tensor *update = dc_op_add(t, dc_op_mul(t, sf, in->x[4]), flush);
    *c = dc_op_select(t, in->z, flush, dc_op_select(t, in->zb, update, in->x[4]));
    dc_tensor *hn = dc_op_mul(t, so, dc_op_tanh(t, *c));
    *h = dc_op_select(t, in->z, hn, dc_op_select(t, in->zb, hn, in->x[5]));
}

int main(int argc, char **argv)
{
    int64_t batch = 32, hidden[8] = {128, 256, 512, 1024};
    int n_hidden = 4, reps = 400;
    bool slices = false;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--batch") == 0 && a + 1 < argc) {
            batch = atoll(argv[++a]);
        } else if (strcmp(argv[a], "--hidden") == 0 && a + 1 < argc) {
            n_hidden = 0;
            for (char *tok = strtok(argv[++a], ","); tok && n_hidden < 8; tok = strtok(NULL, ","))
                hidden[n_hidden++] = atoll(tok);
        } else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "--gates") == 0 && a + 1 < argc && strcmp(argv[a + 1], "slices") == 0) {
            slices = true;
            ++a;
        } else if (strcmp(argv[a], "--gates") == 0 && a + 1 < argc && strcmp(argv[a + 1], "separate") == 0) {
            slices = false;
            ++a;
        } else {
            fprintf(stderr, "usage: %s [--batch 32] [--hidden 128,256,512,1024] [--reps N] [--gates separate|slices]\n",
                    argv[0]);
            return 2;
        }
    }
    if (batch < 3 || reps < 1)
        return fprintf(stderr, "bench_hmlstm_cell: batch >= 3 and reps >= 1\n"), 2;
    dc_ctx_options o = dc_ctx_options_default();
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx)
        die(NULL, "context");
    printf("# HM-LSTM cell node, forward + backward, float32, %s, gates %s\n", dc_ctx_device_name(ctx),
           slices ? "sliced from one [batch, 4 hidden + 1] tensor" : "in separate tensors");
    bench_print_machine();
    printf("\n");
    printf("| batch x hidden | variant | forward us | backward us | total us | vs pure | peak tape KiB |\n");
    printf("|---|---|---:|---:|---:|---:|---:|\n");
    for (int hi = 0; hi < n_hidden; ++hi) {
        const int64_t s[2] = {batch, hidden[hi]}, zs[2] = {batch, 1}, pre_shape[2] = {batch, 4 * hidden[hi] + 1};
        cell_inputs in;
        dc_tensor *pre = dc_tensor_new(ctx, DC_F32, 2, pre_shape);
        if (!pre || dc_tensor_fill_uniform(pre, -1.5, 1.5) != DC_OK)
            die(ctx, "pre-activations");
        dc_tensor_set_requires_grad(pre, true);
        for (int k = 0; k < 6; ++k) {
            in.x[k] = dc_tensor_new(ctx, DC_F32, 2, s);
            if (!in.x[k] || dc_tensor_fill_uniform(in.x[k], -1.5, 1.5) != DC_OK)
                die(ctx, "inputs");
            dc_tensor_set_requires_grad(in.x[k], true);
        }
        in.z = dc_tensor_new(ctx, DC_F32, 2, zs);
        in.zb = dc_tensor_new(ctx, DC_F32, 2, zs);
        for (int64_t b = 0; b < batch; ++b) { /* FLUSH, COPY, UPDATE in turn */
            dc_tensor_set(in.z, b, b % 3 == 0);
            dc_tensor_set(in.zb, b, b % 3 == 2);
        }
        dc_tensor *adj = dc_tensor_new(ctx, DC_F32, 2, s);
        dc_tensor_fill_uniform(adj, -1, 1);
        bench_samples t[N_VARIANTS];
        dc_tape *tapes[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; ++v) {
            bench_samples_init(&t[v], reps);
            tapes[v] = dc_tape_new(ctx);
            if (!tapes[v])
                die(ctx, "tape");
        }
        for (int r = -20; r < reps; ++r) { /* warm-up rounds, then every variant once per round */
            for (int v = 0; v < N_VARIANTS; ++v) {
                dc_tape_reset(tapes[v]);
                for (int k = 0; k < 6; ++k)
                    dc_tensor_zero_grad(in.x[k]);
                dc_tensor_zero_grad(pre);
                dc_tensor *c, *h;
                const double t0 = bench_now();
                cell_inputs used = in;
                for (int k = 0; slices && k < 4; ++k)
                    used.x[k] = dc_op_slice(tapes[v], pre, 1, k * hidden[hi], hidden[hi]);
                cell(tapes[v], &used, v, &c, &h);
                if (!c || !h)
                    die(ctx, names[v]);
                const double t1 = bench_now();
                dc_tensor *sum = dc_op_add(tapes[v], c, h);
                if (dc_backward_with(tapes[v], sum, adj) != DC_OK || dc_ctx_synchronize(ctx) != DC_OK)
                    die(ctx, "backward");
                const double t2 = bench_now();
                if (r >= 0)
                    bench_samples_add(&t[v], t1 - t0, t2 - t1);
            }
        }
        double fwd[N_VARIANTS], bwd[N_VARIANTS], total[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; ++v)
            bench_samples_medians(&t[v], &fwd[v], &bwd[v], &total[v]);
        for (int v = 0; v < N_VARIANTS; ++v) {
            printf("| %lld x %lld | %s | %.1f | %.1f | %.1f | %.2fx | %.0f |\n", (long long)batch, (long long)hidden[hi],
                   names[v], 1e6 * fwd[v], 1e6 * bwd[v], 1e6 * total[v], total[PURE] / total[v],
                   (double)dc_tape_peak_bytes(tapes[v]) / 1024);
            bench_samples_free(&t[v]);
            dc_tape_free(tapes[v]);
        }
        for (int k = 0; k < 6; ++k)
            dc_tensor_free(in.x[k]);
        dc_tensor_free(in.z);
        dc_tensor_free(in.zb);
        dc_tensor_free(pre);
        dc_tensor_free(adj);
        fflush(stdout);
    }
    dc_ctx_free(ctx);
    return 0;
}
