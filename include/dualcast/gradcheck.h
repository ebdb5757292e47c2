/* Gradient check: backprop against central differences in float64. */
#ifndef DUALCAST_GRADCHECK_H
#define DUALCAST_GRADCHECK_H

#include <stdint.h>

#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds a loss from the inputs on `tape` and returns it (one element), or
 * NULL on error. Called once recording and many times with recording off. */
typedef dc_tensor *(*dc_gradcheck_fn)(dc_tape *tape, dc_tensor *const *inputs, void *user);

typedef struct dc_gradcheck_options {
    double eps;             /* central difference step; default 1e-6 */
    double atol;            /* pass if |backprop - numeric| <= atol + rtol * max(|b|, |n|) */
    double rtol;            /* defaults 1e-8 and 1e-6 */
    int64_t max_per_input;  /* check at most this many elements per input, spread evenly; 0: all */
} dc_gradcheck_options;

typedef struct dc_gradcheck_report {
    int64_t checked;        /* elements compared */
    double max_abs_err;
    double max_rel_err;     /* |b - n| / max(|b|, |n|), over elements where that is defined */
    int worst_input;        /* input and element with the largest excess over the tolerance */
    int64_t worst_index;
    double worst_backprop;
    double worst_numeric;
} dc_gradcheck_report;

/* The default options (the values given in the comments above). */
dc_gradcheck_options dc_gradcheck_options_default(void);

/* Checks d(loss)/d(input) for every input that requires a gradient; the
 * other inputs are not checked. Returns DC_OK when every element is within
 * tolerance and DC_ERR_MISMATCH otherwise, with a message naming the worst
 * element (the first whose excess is largest, a NaN counting as the
 * largest; a backprop and a central difference that are the same infinity
 * agree); any other status is an error of fn or of the arguments: where fn
 * returns NULL, the status of the error that made it (DC_ERR_ARG where it
 * reported none), its message quoted.
 * `options` and `report` may be NULL. The inputs must be persistent tensors
 * (DC_ERR_ARG for a tape tensor) of float64 (DC_ERR_DTYPE). With no input
 * that requires a gradient, fn records no node and the backward pass fails
 * with DC_ERR_STATE (unless fn uses other tensors that require one: then
 * nothing is checked and the result is DC_OK). Options out of range (eps
 * not finite and positive, a negative atol, rtol or max_per_input) give
 * DC_ERR_ARG.
 * The inputs' gradients are overwritten: dc_gradcheck zeroes them and runs
 * one backward pass into them, so on return they hold this loss's gradient
 * (none if fn failed when first called). Other tensors fn uses that require
 * a gradient get that pass's gradient added to theirs. Input values are
 * restored before it returns, also after an error. */
dc_status dc_gradcheck(dc_ctx *ctx, dc_gradcheck_fn fn, void *user, int n_inputs, dc_tensor *const *inputs,
                       const dc_gradcheck_options *options, dc_gradcheck_report *report);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_GRADCHECK_H */
