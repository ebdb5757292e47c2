/* Fits an exponential moving average with resets to data by gradient
 * descent, through a prefix scan with a user-written associative operator
 * (ema_reset.dc.h): the whole recurrence of every sequence is one tape node,
 * and its gradient comes from the operator's dual passes.
 *
 * The data: B sequences of T inputs u and reset flags, and targets made by
 * the model y_t = alpha y_{t-1} + gain (1 - alpha) u_t (from 0 at t = 0 and
 * at every reset) with alpha = 0.9, gain = 2, plus a little noise. The
 * model starts from alpha = 0.5, gain = 1 and learns both with Adam,
 * printing the loss (the mean squared error) as it goes down.
 *
 *   ema_fit [steps]        DC_DEVICE=cuda runs it on the GPU
 *
 * Exits with 1 when the loss did not fall below a tenth of its start. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <dualcast.h>

DC_ASSOC_DECLARE(ema_reset);

enum { B = 4, T = 3000 };

/* The data on the host: inputs, flags and targets, B x T each. */
static void make_data(double *u, double *r, double *y)
{
    uint64_t s = 42;
    for (int i = 0; i < B * T; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = (double)(s >> 11) / 9007199254740992.0 * 2 - 1;
        r[i] = (s >> 7) % 97 == 0 ? 1.0 : 0.0; /* a reset about every 100 steps */
    }
    const double alpha = 0.9, gain = 2;
    for (int b = 0; b < B; ++b) {
        double x = 0;
        for (int t = 0; t < T; ++t) {
            const int i = b * T + t;
            x = (t == 0 || r[i] > 0.5 ? 0 : alpha * x) + gain * (1 - alpha) * u[i];
            y[i] = x + 0.01 * sin(0.37 * i);
        }
    }
}

/* A float32 tensor of n values. */
static dc_tensor *from_host(dc_ctx *ctx, int ndim, const int64_t *shape, const double *v)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; ++i)
        f[i] = (float)v[i];
    dc_tensor *t = dc_tensor_from_host(ctx, DC_F32, ndim, shape, f);
    free(f);
    return t;
}

/* The loss of one step: the scan along time, then the mean squared error. */
static dc_tensor *loss_of(dc_tape *tape, dc_tensor *logit, dc_tensor *gain, dc_tensor *ones, dc_tensor *u, dc_tensor *r,
                          dc_tensor *y)
{
    dc_tensor *alpha = dc_op_sigmoid(tape, logit); /* [1] */
    dc_tensor *x[3], *state[3];
    x[0] = dc_op_mul(tape, ones, alpha);                                                /* a_t = alpha */
    x[1] = dc_op_mul(tape, dc_op_mul(tape, u, gain), dc_op_affine(tape, alpha, -1, 1)); /* b_t = gain (1 - alpha) u_t */
    x[2] = r;
    if (dc_op_scan_fn(tape, DC_ASSOC_REF(ema_reset), x, 1, false, state) != DC_OK)
        return NULL;
    dc_tensor *err = dc_op_sub(tape, state[1], y);
    return dc_op_mean(tape, dc_op_mul(tape, err, err), 0, NULL, false);
}

enum { MAX_STEPS = 1000000 };

/* v as a number of steps: digits only, 1 to MAX_STEPS. */
static bool parse_steps(const char *v, int *out)
{
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 1 || x > MAX_STEPS)
        return false;
    *out = (int)x;
    return true;
}

int main(int argc, char **argv)
{
    int steps = 300;
    if (argc > 2 || (argc == 2 && !parse_steps(argv[1], &steps))) {
        fprintf(stderr, "usage: ema_fit [steps, 1 to %d]\n", MAX_STEPS);
        return 2;
    }
    dc_ctx_options o = dc_ctx_options_default();
    o.quiet = true;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx) {
        fprintf(stderr, "ema_fit: %s\n", dc_last_error(NULL));
        return 1;
    }
    double *u = malloc(3 * B * T * sizeof *u), *r = u + B * T, *y = r + B * T;
    make_data(u, r, y);
    const int64_t shape[2] = {B, T}, one = 1;
    const double start[2] = {0.0, 1.0}; /* logit(0.5), gain 1 */
    dc_tensor *tu = from_host(ctx, 2, shape, u), *tr = from_host(ctx, 2, shape, r), *ty = from_host(ctx, 2, shape, y);
    dc_tensor *ones = dc_tensor_new(ctx, DC_F32, 2, shape);
    dc_tensor *logit = from_host(ctx, 1, &one, &start[0]), *gain = from_host(ctx, 1, &one, &start[1]);
    free(u);
    if (!tu || !tr || !ty || !ones || !logit || !gain || dc_tensor_fill(ones, 1) != DC_OK ||
        dc_tensor_set_requires_grad(logit, true) != DC_OK || dc_tensor_set_requires_grad(gain, true) != DC_OK) {
        fprintf(stderr, "ema_fit: %s\n", dc_last_error(ctx));
        return 1;
    }
    dc_tensor *params[2] = {logit, gain};
    dc_adam_options ao = dc_adam_options_default();
    ao.lr = 0.05;
    dc_optimizer *opt = dc_optimizer_adam(ctx, 2, params, &ao);
    dc_tape *tape = dc_tape_new(ctx);
    printf("ema_fit on %s: %d sequences of %d steps, the EMA scan as one node\n", dc_ctx_device_name(ctx), B, T);
    double first = NAN, last = NAN;
    for (int step = 0; step <= steps; ++step) {
        dc_tape_reset(tape);
        dc_optimizer_zero_grad(opt);
        dc_tensor *loss = loss_of(tape, logit, gain, ones, tu, tr, ty);
        double a = 0, g = 0;
        if (!loss || dc_backward(tape, loss) != DC_OK || dc_tensor_item(loss, &last) != DC_OK ||
            dc_tensor_item(logit, &a) != DC_OK || dc_tensor_item(gain, &g) != DC_OK ||
            dc_optimizer_step(opt) != DC_OK) {
            fprintf(stderr, "ema_fit: step %d: %s\n", step, dc_last_error(ctx));
            return 1;
        }
        if (step == 0)
            first = last;
        if (step % 50 == 0 || step == steps)
            printf("step %4d  loss %.6f  alpha %.4f  gain %.4f\n", step, last, 1 / (1 + exp(-a)), g);
    }
    printf("loss %.6f -> %.6f (true alpha 0.9, gain 2)\n", first, last);
    dc_tape_free(tape);
    dc_optimizer_free(opt);
    dc_tensor_free(tu);
    dc_tensor_free(tr);
    dc_tensor_free(ty);
    dc_tensor_free(ones);
    dc_tensor_free(logit);
    dc_tensor_free(gain);
    dc_ctx_free(ctx);
    return last < first / 10 ? 0 : 1;
}
