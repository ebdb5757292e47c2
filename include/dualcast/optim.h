/* Optimizers and gradient clipping for persistent parameter tensors. */
#ifndef DUALCAST_OPTIM_H
#define DUALCAST_OPTIM_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_optimizer dc_optimizer;

typedef struct dc_adam_options {
    double lr;           /* default 1e-3 */
    double beta1;        /* default 0.9 */
    double beta2;        /* default 0.999 */
    double eps;          /* default 1e-8 */
    double weight_decay; /* decoupled (AdamW); default 0 */
} dc_adam_options;

/* The defaults given above. */
dc_adam_options dc_adam_options_default(void);

/* Adam over n persistent parameters (its moment buffers are allocated here,
 * once). The optimizer keeps the pointers; the parameters must outlive it.
 * NULL on error (see dc_last_error(ctx)). */
dc_optimizer *dc_optimizer_adam(dc_ctx *ctx, int n, dc_tensor *const *params, const dc_adam_options *options);

/* Stochastic gradient descent with momentum (0 for none). */
dc_optimizer *dc_optimizer_sgd(dc_ctx *ctx, int n, dc_tensor *const *params, double lr, double momentum);

/* Updates every parameter from its gradient; a parameter with no gradient
 * (none reached it) is left alone. */
dc_status dc_optimizer_step(dc_optimizer *opt);

/* Zeroes every parameter's gradient (costs nothing: see dc_tensor_zero_grad). */
void dc_optimizer_zero_grad(dc_optimizer *opt);

/* Sets / returns the learning rate (for a schedule). It also scales Adam's
 * decoupled weight decay; the bias correction is unaffected. A negative or
 * NaN rate is refused with DC_ERR_ARG in dc_last_error, the rate unchanged. */
void dc_optimizer_set_lr(dc_optimizer *opt, double lr);
double dc_optimizer_lr(const dc_optimizer *opt);

/* Frees the optimizer and its state, not the parameters. NULL is allowed. */
void dc_optimizer_free(dc_optimizer *opt);

/* Scales the gradients of the n tensors so that their global L2 norm is at
 * most max_norm; stores the norm before clipping in *norm if not NULL. A
 * norm that is not finite (a NaN or infinite gradient) is reported through
 * *norm and the gradients are left as they are. */
dc_status dc_clip_grad_norm(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, double *norm);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_OPTIM_H */
