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
 * Returns NULL on error, with the reason in dc_last_error(ctx): DC_ERR_ARG
 * when n < 1, params or a parameter is NULL, a parameter is a tape tensor,
 * is not contiguous, belongs to another context or is given twice (it would
 * be updated twice a step), or an option is out of
 * range (lr and weight_decay finite and >= 0, 0 <= beta1 < 1, 0 <= beta2 <
 * 1, eps finite and > 0; NaN is out of range); DC_ERR_MEMORY. options NULL: the defaults; ctx
 * NULL: NULL, with no message.
 * Each step, for a parameter w with gradient g, its t-th update:
 *   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2,
 *   w -= lr m_hat / (sqrt(v_hat) + eps) + lr weight_decay w,
 * with m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t) (folded into the
 * step size and eps) and w on the right its value before the step. */
dc_optimizer *dc_optimizer_adam(dc_ctx *ctx, int n, dc_tensor *const *params, const dc_adam_options *options);

/* Stochastic gradient descent with momentum (0 for none). Each step, with a
 * buffer b that starts at zero: b = momentum b + g, then w -= lr b (no
 * dampening, no Nesterov, no weight decay). Errors as for dc_optimizer_adam,
 * with lr finite and >= 0 and 0 <= momentum < 1. */
dc_optimizer *dc_optimizer_sgd(dc_ctx *ctx, int n, dc_tensor *const *params, double lr, double momentum);

/* Updates every parameter from its gradient; a parameter with no gradient
 * (none reached it) is left alone, and its update count (Adam's t) does not
 * advance. */
dc_status dc_optimizer_step(dc_optimizer *opt);

/* Zeroes every parameter's gradient (costs nothing: see dc_tensor_zero_grad). */
void dc_optimizer_zero_grad(dc_optimizer *opt);

/* Sets / returns the learning rate (for a schedule). It also scales Adam's
 * decoupled weight decay; the bias correction is unaffected. A negative,
 * infinite or NaN rate is refused with DC_ERR_ARG in dc_last_error, the
 * rate unchanged.
 * On CUDA the rate lives in device memory, written by a kernel without a
 * host wait: a captured step (dualcast/graph.h) replays with the rate set
 * before the replay. */
void dc_optimizer_set_lr(dc_optimizer *opt, double lr);
double dc_optimizer_lr(const dc_optimizer *opt);

/* Frees the optimizer and its state, not the parameters. NULL is allowed. */
void dc_optimizer_free(dc_optimizer *opt);

/* Scales the gradients of the n tensors so that their global L2 norm is at
 * most max_norm; stores the norm before clipping in *norm if not NULL. A
 * norm that is not finite (a NaN or infinite gradient, or a norm beyond the
 * double range) is reported through *norm and the gradients are left as they
 * are. The sum of squares is taken in double; where it overflows or falls
 * below the normal doubles (float64 elements beyond about 1e154 or below
 * about 1e-154), the elements are summed again scaled by a power of two, so
 * the norm keeps its precision at any magnitude. Each element is multiplied
 * by max_norm / norm in double. The sums run in a fixed order: the same norm
 * on any number of threads. DC_ERR_ARG for n < 0, a NULL params or tensor,
 * a max_norm that is not positive, a tensor of another context, a gradient
 * that is a view (a slice's, which lies in its base's gradient, contiguous
 * or not, or an output's that is the adjoint given to dc_backward_with), or
 * a tensor given twice (its gradient would count twice); DC_ERR_STATE for a
 * tape tensor whose tape was reset since: all refused before a gradient is
 * read. */
dc_status dc_clip_grad_norm(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, double *norm);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_OPTIM_H */
