/* Runs a user broadcast function through an installed dualcast and checks
 * its gradient against central differences. */
#include <stdio.h>

#include <dualcast.h>

DC_BFN_DECLARE(softclip);

static dc_tensor *loss(dc_tape *tape, dc_tensor *const *in, void *user)
{
    dc_tensor *args[2] = {in[0], user};
    return dc_op_sum(tape, dc_broadcast1(tape, DC_BFN_REF(softclip), 2, args), 0, NULL, false);
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
    dc_tensor_free(x);
    dc_tensor_free(limit);
    dc_ctx_free(ctx);
    return st == DC_OK ? 0 : 1;
}
