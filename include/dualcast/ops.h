/* Primitive ops: one tape node each, with its own adjoint. Composing these is
 * pure reverse mode; dc_broadcast (broadcast.h) fuses many of them into one
 * node differentiated in forward mode.
 *
 * Every op takes the tape it records on and returns a tape tensor, or NULL on
 * error with the reason in dc_last_error (a shape mismatch names the op and
 * both shapes). An op given a NULL input returns NULL and keeps the status
 * and the message of the error that produced the NULL (the context's last
 * error: dc_clear_error once an error is handled), so a chain of ops can be
 * checked once at its end; with no error before, the status is DC_ERR_ARG.
 * Elementwise ops broadcast their operands NumPy-style, and their adjoints
 * sum over the broadcast dimensions. Operands must share a dtype. */
#ifndef DUALCAST_OPS_H
#define DUALCAST_OPS_H

#include <stdbool.h>

#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise arithmetic: a + b, a - b, a * b, a / b, a ^ b. For a ^ b (C's
 * pow), d/da = b a^(b-1) is taken as 0 where b == 0, and d/db = a^b log a
 * as 0 where a == 0 (its limit for b > 0). At a == 0 and b != 0, d/da is
 * b 0^(b-1): 0 for b > 1, 1 for b == 1, infinite for b < 1. For a < 0, d/db
 * is NaN (log a is), and a^b and d/da are NaN for a finite b that is not an
 * integer. A zero adjoint still gives exact zeros (see dc_op_select). */
dc_tensor *dc_op_add(dc_tape *tape, dc_tensor *a, dc_tensor *b);
dc_tensor *dc_op_sub(dc_tape *tape, dc_tensor *a, dc_tensor *b);
dc_tensor *dc_op_mul(dc_tape *tape, dc_tensor *a, dc_tensor *b);
dc_tensor *dc_op_div(dc_tape *tape, dc_tensor *a, dc_tensor *b);
dc_tensor *dc_op_pow(dc_tape *tape, dc_tensor *a, dc_tensor *b);

/* x * s + t for constants s and t (no gradient to the constants). */
dc_tensor *dc_op_affine(dc_tape *tape, dc_tensor *x, double s, double t);

/* Elementwise functions. relu'(0) = 0. */
dc_tensor *dc_op_neg(dc_tape *tape, dc_tensor *x);
dc_tensor *dc_op_exp(dc_tape *tape, dc_tensor *x);
dc_tensor *dc_op_log(dc_tape *tape, dc_tensor *x);
dc_tensor *dc_op_tanh(dc_tape *tape, dc_tensor *x);
dc_tensor *dc_op_sigmoid(dc_tape *tape, dc_tensor *x);
dc_tensor *dc_op_relu(dc_tape *tape, dc_tensor *x);

/* max(0, min(1, (slope * x + 1) / 2)), the HM-LSTM boundary gate; its
 * derivative is slope / 2 inside (0, 1) and 0 outside. */
dc_tensor *dc_op_hard_sigmoid(dc_tape *tape, dc_tensor *x, double slope);

/* x > threshold ? 1 : 0 forward; the straight-through estimator backward:
 * the gradient passes unchanged, as if the step were the identity. */
dc_tensor *dc_op_step_st(dc_tape *tape, dc_tensor *x, double threshold);

/* cond != 0 ? a : b, elementwise, the three operands broadcast together.
 * The gradient reaches only the side taken; the other side gets exact zeros,
 * and cond gets no gradient. Those zeros stay zero through the elementwise
 * ops and broadcast functions further down, even where their local
 * derivatives are infinite or NaN (dc_op_affine with an infinite s aside),
 * and through sums, layout ops and dc_op_embedding. They do not stay zero
 * through dc_op_matmul or dc_op_cross_entropy, whose adjoints are matrix
 * products and softmax terms: there a zero adjoint times an infinite or NaN
 * operand or logit gives NaN, as in other frameworks. */
dc_tensor *dc_op_select(dc_tape *tape, dc_tensor *cond, dc_tensor *a, dc_tensor *b);

/* Sum / mean over `axes` (n_axes of them; negative axes count from the end),
 * or over every axis when n_axes is 0. keepdims keeps reduced axes as size 1.
 * An axis out of range or given twice fails with DC_ERR_ARG. Over no
 * elements (a reduced axis of size 0) the sum is 0 and the mean NaN. On the
 * CPU both accumulate in double, in pieces of a fixed size: the same bits
 * whatever the number of threads (a mean is the sum times 1/count). */
dc_tensor *dc_op_sum(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);
dc_tensor *dc_op_mean(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims);

/* Matrix product over the last two axes: (..., m, k) x (..., k, n) -> (..., m, n),
 * leading (batch) axes broadcast. 1-D operands are not promoted: give 2-D. */
dc_tensor *dc_op_matmul(dc_tape *tape, dc_tensor *a, dc_tensor *b);

/* Swaps two axes (a view: no copy). */
dc_tensor *dc_op_transpose(dc_tape *tape, dc_tensor *x, int axis0, int axis1);

/* Same elements in a new shape; one entry may be -1 (inferred). A view when x
 * is contiguous, else a copy. */
dc_tensor *dc_op_reshape(dc_tape *tape, dc_tensor *x, int ndim, const int64_t *shape);

/* Elements start .. start + length - 1 of `axis` (a view: no copy). */
dc_tensor *dc_op_slice(dc_tape *tape, dc_tensor *x, int axis, int64_t start, int64_t length);

/* The n tensors joined along `axis`; all other sizes must agree. */
dc_tensor *dc_op_concat(dc_tape *tape, int n, dc_tensor *const *xs, int axis);

/* Rows of `table` ([V, E]) picked by `ids` (any shape, integer values in
 * 0..V-1 stored in the table's dtype): shape ids.shape + [E]. The adjoint
 * adds each row's gradient into the table's gradient (deterministically).
 * An id outside 0..V-1 fails with DC_ERR_ARG. ids get no gradient. */
dc_tensor *dc_op_embedding(dc_tape *tape, dc_tensor *table, dc_tensor *ids);

/* Mean over rows of -log softmax(logits)[target]: logits [N, C], targets [N]
 * (class indices in 0..C-1, in the logits' dtype). A scalar, in nats; one
 * fused pass, computed stably (the row maximum is subtracted). targets get
 * no gradient. A target that is not an integer in 0..C-1 fails with
 * DC_ERR_ARG naming it; C == 0 with N > 0 fails with DC_ERR_SHAPE. With
 * N == 0 the loss is NaN (the mean over no rows). */
dc_tensor *dc_op_cross_entropy(dc_tape *tape, dc_tensor *logits, dc_tensor *targets);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_OPS_H */
