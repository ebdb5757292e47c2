/* Runs a user broadcast function and a user associative operator through an
 * installed dualcast and checks their gradients against central differences. */
#include <stdio.h>

#include <dualcast.h>

DC_BFN_DECLARE(softclip);
DC_ASSOC_DECLARE(linrec);

static dc_tensor *loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    dc_tensor *args[2] = {in[0], user};
    return dc_op_sum(tape, dc_broadcast1(tape, DC_BFN_REF(softclip), 2, args), 0, NULL, false);
}

/* the sum of the recurrence x_t = a_t x_{t-1} + b_t over t */
static dc_tensor *recurrence(dc_tape *tape, dc_tensor *const *in, void *user)
{
    (void)user;
    dc_tensor *state[2];
    if (dc_op_scan_fn(tape, DC_ASSOC_REF(linrec), in, 0, false, state) != DC_OK)
        return NULL;
    return dc_op_sum(tape, dc_op_mul(tape, state[1], state[1]), 0, NULL, false);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    if (!ctx) {
        fprintf(stderr, "consumer: %s\n", dc_last_error(NULL));
        return 1;
    }
    const int64_t shape[1] = {6};
    const double xs[6] = {-2.0, 0.3, 0.9, 1.5, 2.5, 4.0}, lim = 1.0;
    dc_tensor *x = dc_tensor_from_host(ctx, DC_F64, 1, shape, xs);
    dc_tensor *limit = dc_tensor_from_host(ctx, DC_F64, 0, NULL, &lim);
    dc_tensor_set_requires_grad(x, true);
    dc_status st = dc_gradcheck(ctx, loss, limit, 1, &x, NULL, NULL);
    printf("consumer: softclip gradient check: %s%s%s\n", dc_status_name(st), st ? ": " : "",
           st ? dc_last_error(ctx) : "");
    const double as[6] = {0.5, 0.9, -0.3, 1.1, 0.7, 0.2}, bs[6] = {1, -2, 0.5, 0.25, 3, -1};
    dc_tensor *ab[2] = {dc_tensor_from_host(ctx, DC_F64, 1, shape, as), dc_tensor_from_host(ctx, DC_F64, 1, shape, bs)};
    dc_tensor_set_requires_grad(ab[0], true);
    dc_tensor_set_requires_grad(ab[1], true);
    const dc_status st2 = dc_gradcheck(ctx, recurrence, NULL, 2, ab, NULL, NULL);
    printf("consumer: linrec scan gradient check: %s%s%s\n", dc_status_name(st2), st2 ? ": " : "",
           st2 ? dc_last_error(ctx) : "");
    st = st != DC_OK ? st : st2;
    dc_tensor_free(ab[0]);
    dc_tensor_free(ab[1]);
    dc_tensor_free(x);
    dc_tensor_free(limit);
    dc_ctx_free(ctx);
    return st == DC_OK ? 0 : 1;
}
