/* User-written associative operators: reductions, prefix scans and
 * reductions by index over a state of k fields, with gradients from the
 * operator's dual-number instantiation (never a hand-written adjoint).
 *
 * An operator is written once, in a file of its own (no include guard):
 *
 *   // linrec.dc.h: the composition of affine maps x -> a x + b
 *   DC_ASSOC(linrec, DC_STATE(a, b), DC_NEUTRAL(1, 0))
 *   {   // (l then r): x -> r_a (l_a x + l_b) + r_b
 *       DC_RETURN(dc_mul(r_a, l_a), dc_add(dc_mul(r_a, l_b), r_b));
 *   }
 *
 * built with dc_add_assoc_fn(<target> linrec.dc.h) in CMake, declared with
 * DC_ASSOC_DECLARE(linrec) and passed as DC_ASSOC_REF(linrec). The body
 * language is the broadcast functions' (broadcast/README.md): the left
 * operand's fields are l_<field>, the right one's r_<field>, every one
 * differentiable; branch on values through dc_val(x).
 *
 * What the library assumes and cannot check:
 * - (+) is associative: (a (+) b) (+) c == a (+) (b (+) c), up to rounding.
 *   The results associate the elements in a fixed order of their own (below),
 *   which for an operator that is not associative is some other result.
 * - the neutral element e is neutral: e (+) a == a (+) e == a, with the
 *   partials of the identity (it starts every piece of work, and stands in
 *   for missing neighbours in the gradients).
 * Commutativity is not assumed: elements are combined left to right in
 * index order (a matrix product, an affine map's composition are fine).
 *
 * Determinism: the same inputs give the same bits on every run. On the CPU
 * every row is cut into pieces of DC_ASSOC_CHUNK elements whatever the
 * number of threads: each piece is combined in order, then the pieces'
 * totals in order. CUDA cuts the rows in the same pieces and uses no
 * atomics: a piece of a row of one lane (a scan or reduction along the
 * last axis, at least 256 elements long) is combined by a block, in runs of
 * consecutive elements per thread whose totals the block scans in a fixed
 * tree; other pieces by one thread per lane, in order. The gradients walk
 * such a piece by a block as well (the states or the adjoint's linear maps
 * of the runs scanned in a fixed tree), and the states around the pieces
 * are scans of the pieces' totals as the forward's. CPU and CUDA results
 * may therefore differ in their last bits (and where nvcc contracts a
 * multiply-add).
 *
 * Gradients, each from dual-number passes of (+) (one pass gives the
 * partials of a result with respect to both operands' 2k fields):
 * - reduce: with l_i the elements before i combined from the left and r_i
 *   those after it, abar_i = ybar^T d((l_i (+) a_i) (+) r_i)/d a_i, two
 *   passes chained (the partials of l_i (+) a_i carried through (+) r_i).
 *   Each piece of DC_ASSOC_CHUNK starts from the states before and after it
 *   (the forward's piece totals combined in order), walks r back into a
 *   buffer of its own, then l forward, and writes the gradient in place;
 *   l_i and r_i associate their elements differently from y, so the
 *   partials are those of y up to rounding;
 * - scan: the reverse recurrence lambda_i = ybar_i + lambda_{i+1}^T
 *   d(y_i (+) a_{i+1})/d y_i, then abar_i = lambda_i^T d(y_{i-1} (+) a_i)/d a_i;
 * - segment reduce: per segment as a reduce, from the exclusive scans of
 *   each segment from the left and from the right.
 * Where the operator is not differentiable (a maximum at a tie, a branch's
 * edge) the partials are those of the branch the body takes. A NaN or an
 * infinite partial times a zero adjoint adds exactly zero (a zero, whose
 * sign is that of the product where the partial is finite), and so does a
 * zero adjoint carried across pieces through a scan's map in which such a
 * partial left an infinite or NaN entry. A NaN among the
 * inputs goes where the body sends it (a comparison through dc_val with a
 * NaN is false). Each field's input gets its gradient when it requires
 * one; an output no gradient reached counts as a zero adjoint.
 *
 * Common arguments and errors. x (or values) is an array of k = op->n_state
 * tensors of one shape and one dtype, field f of every element in x[f]; out
 * receives k new tape tensors. Refused before out is touched: a NULL tape;
 * a NULL op, or one compiled for another DC_ASSOC_ABI_VERSION (DC_ERR_ARG);
 * a NULL x or out array, or an out array that overlaps x's (DC_ERR_ARG:
 * the outputs would replace the inputs); an operator built without GPU kernels
 * on a CUDA context (DC_ERR_UNSUPPORTED). Then out[] is set to NULL and a
 * NULL input (the status of the error that produced it), inputs of another
 * tape or context (DC_ERR_ARG), two fields of different shapes (DC_ERR_SHAPE,
 * naming both fields and both shapes) or dtypes (DC_ERR_DTYPE) are refused.
 * After any error out[] holds no usable result. An input over no elements
 * gets an empty gradient. */
#ifndef DUALCAST_ASSOC_H
#define DUALCAST_ASSOC_H

#include <stdbool.h>
#include <stdint.h>

#include "assoc_abi.h"
#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif


/* The reduction of x over n_axes axes (negative ones count from the end;
 * n_axes == 0 reduces every axis; keepdims keeps them with size 1), as
 * dc_op_sum: out[f] has the reduced shape. The elements of one output are
 * combined in row-major order of the reduced axes. Along an empty axis the
 * result is the neutral element. An axis out of range or given twice is
 * refused (DC_ERR_ARG). */
dc_status dc_op_reduce_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *x, int n_axes, const int *axes,
                          bool keepdims, dc_tensor **out);

/* The prefix scan of x along `axis` (negative counts from the end), of x's
 * shape: element i is x[0] (+) x[1] (+) ... (+) x[i] (inclusive), or the
 * same up to x[i - 1] (exclusive: element 0 is the neutral element). An
 * axis out of range is refused (DC_ERR_ARG). */
dc_status dc_op_scan_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *x, int axis, bool exclusive,
                        dc_tensor **out);

/* A reduction by index: values of shape [n, ...] (k fields) and index of
 * shape [n] (integers 0..n_segments-1 stored in a tensor of values' dtype,
 * as dc_op_embedding's ids: a control input, without a gradient). Result
 * [n_segments, ...]: row s is the (+) of the rows i with index[i] == s,
 * taken in ascending i; a segment no row reaches holds the neutral element.
 * An index that is not an integer in 0..n_segments-1 is refused with
 * DC_ERR_ARG naming it: on the CPU at the call; on CUDA, where the host
 * does not wait for the device, by the next call that waits for it, the row
 * counted in segment 0 until then. index of another shape than [n], an
 * n_segments that makes [n_segments, ...] too large for a tensor
 * (DC_ERR_SHAPE), a negative n_segments, or 0 with n > 0 (DC_ERR_ARG) are
 * refused. Each segment is combined by one thread in order (a long segment
 * is not split). */
dc_status dc_op_segment_reduce_fn(dc_tape *tape, const dc_assoc *op, dc_tensor *const *values, dc_tensor *index,
                                  int64_t n_segments, dc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_ASSOC_H */
