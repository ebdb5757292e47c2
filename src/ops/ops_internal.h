/* Helpers shared by the ops: running a kernel forward into a new tensor, and
 * running a backward kernel whose results go into input gradients. */
#ifndef DC_OPS_INTERNAL_H
#define DC_OPS_INTERNAL_H

#include "../engine/kernels.h"
#include "../tape_internal.h"

/* Broadcasts n tensors for `op`: checks for NULL, a common dtype,
 * compatible shapes and a result within dc_tensor_new's bound, naming the
 * operands with `labels` in messages. */
dc_status dc_broadcast_check(dc_ctx *ctx, const char *op, int n, dc_tensor *const *tensors,
                             const char *const *labels, int *out_ndim, int64_t *out_shape);

/* Broadcasts the inputs (checking NULLs, dtypes, shapes), allocates the
 * output and runs kernel `id` into it. NULL on error. */
dc_tensor *dc_forward_kernel(dc_tape *tape, const char *op, dc_kernel_id id, const void *arg, int n_in,
                             dc_tensor *const *in, const char *const *labels);

/* Runs kernel `id` over `shape`, reading `reads` (broadcast to shape), and
 * adds its k-th output into the gradient of targets[k], summed over the axes
 * along which targets[k] is broadcast. A NULL target, or one that does not
 * require a gradient, is computed and dropped. */
dc_status dc_backward_kernel(dc_tape *tape, dc_kernel_id id, const void *arg, int ndim, const int64_t *shape,
                             int n_reads, const dc_tensor *const *reads, int n_targets, dc_tensor *const *targets);

/* Fills out[k] to write into the gradient of targets[k] (allocated if
 * needed; overwritten when it holds no value yet, else added to), or to
 * discard when targets[k] is NULL or needs no gradient. After running the
 * loop, call dc_grad_outputs_done. */
dc_status dc_grad_outputs(dc_tape *tape, int ndim, const int64_t *shape, int n_targets, dc_tensor *const *targets,
                          dc_loop_out *out);
void dc_grad_outputs_done(int n_targets, dc_tensor *const *targets);

/* The gradient of t as a contiguous tensor (a copy when it is a broadcast
 * view, as a seeded gradient can be); NULL when out of memory. */
const dc_tensor *dc_grad_contiguous(dc_tape *tape, const dc_tensor *t);

#endif /* DC_OPS_INTERNAL_H */
