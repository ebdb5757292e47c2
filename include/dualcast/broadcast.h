/* Fused broadcast nodes: mixed-mode AD of a user-written elementwise function.
 *
 * dc_broadcast runs a broadcast function (declared with DC_BFN_DECLARE and
 * built by dc_add_broadcast_fn in CMake) over its inputs broadcast together.
 * One pass of its dual-number instantiation writes the outputs and the partial
 * derivative of every output with respect to every differentiable input, and
 * the tape records ONE node. Its adjoint multiplies the partials with the
 * output adjoints, sums over outputs and over broadcast dimensions in a single
 * pass. Control inputs (DC_CTRL) never get a gradient. */
#ifndef DUALCAST_BROADCAST_H
#define DUALCAST_BROADCAST_H

#include "bfn_abi.h"
#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dc_partials_policy {
    /* Store the partials in the forward pass; the backward only multiplies
     * and reduces. Most memory, least work. The partials are those of the
     * inputs' values at the forward pass. */
    DC_PARTIALS_STORE = 0,
    /* Store nothing beyond the inputs; the backward runs the dual
     * instantiation again. Least memory and fewest bytes written forward. */
    DC_PARTIALS_RECOMPUTE = 1,
} dc_partials_policy;

/* Runs `fn` over n_inputs inputs (in the order of its DC_BFN) and stores its
 * n_outputs results, new tape tensors of the broadcast shape, in outputs[].
 * Inputs must share a dtype. With recording off, or when no differentiable
 * input requires a gradient, only the primal instantiation runs.
 * Errors found before outputs[] is touched: wrong counts (DC_ERR_ARG, naming
 * the function's inputs), a NULL tape, fn, inputs or outputs array, an
 * unknown policy, a function compiled for another DC_BFN_ABI_VERSION (all
 * DC_ERR_ARG), a function built without GPU kernels called on a CUDA
 * context (DC_ERR_UNSUPPORTED). Otherwise outputs[] is set to NULL before
 * the inputs are checked: a NULL input (as for ops, the status of the
 * error that produced it), an input of another tape or context (DC_ERR_ARG),
 * shapes that do not broadcast (DC_ERR_SHAPE, naming both), mixed dtypes
 * (DC_ERR_DTYPE). After any error outputs[] holds no usable result. */
dc_status dc_broadcast(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs,
                       int n_outputs, dc_tensor **outputs);

/* dc_broadcast with a choice of partials policy for this node. */
dc_status dc_broadcast_policy(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs,
                              int n_outputs, dc_tensor **outputs, dc_partials_policy policy);

/* The single output of a one-output function, or NULL on error. */
dc_tensor *dc_broadcast1(dc_tape *tape, const dc_bfn *fn, int n_inputs, dc_tensor *const *inputs);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_BROADCAST_H */
