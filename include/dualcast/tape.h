/* The tape: define-by-run reverse mode.
 *
 * Every op called with a tape appends one node when recording is on and one
 * of its inputs requires a gradient. dc_backward walks the nodes in reverse
 * and accumulates gradients into the tensors that require them. A tape owns
 * every tensor its ops return, in an arena that dc_tape_reset rewinds for the
 * next step: a training loop allocates nothing once the first step has run. */
#ifndef DUALCAST_TAPE_H
#define DUALCAST_TAPE_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_tape dc_tape;

/* A new, empty tape, recording. NULL when out of memory. */
dc_tape *dc_tape_new(dc_ctx *ctx);

/* Frees the tape and every tensor it owns. NULL is allowed. */
void dc_tape_free(dc_tape *tape);

/* Forgets every node and frees the step's tensors (their memory is kept for
 * the next step). Persistent tensors and their gradients are untouched. */
void dc_tape_reset(dc_tape *tape);

/* Reverse sweep from a loss with one element, seeded with 1. Each node reads
 * the tensors it needs (its inputs, its outputs) when the sweep reaches it,
 * besides what it kept at the op: index inputs (embedding ids,
 * cross-entropy targets, segment indices) are copied there, a broadcast
 * under DC_PARTIALS_STORE keeps its partials, and some reductions keep
 * facts about their inputs (a maximum's winners, whether a product's
 * factors hold a zero). So a tensor written between its op and the sweep
 * gives a gradient of neither its old values nor its new ones: write
 * tensors that nodes read after the sweep (index inputs may be written at
 * any time). Fails with
 * DC_ERR_STATE on a tape that holds no nodes (reset since the loss was made)
 * or that already ran backward, with DC_ERR_SHAPE if the loss has more than
 * one element, with DC_ERR_ARG if the loss was not recorded on this tape
 * since its last reset. A loss pointer kept across a reset is stale: once a
 * new step is recorded its address may belong to a new tensor. */
dc_status dc_backward(dc_tape *tape, dc_tensor *loss);

/* Reverse sweep from `output` seeded with `adjoint` (same shape; may be a
 * broadcastable shape, for example a scalar 1 for an all-ones adjoint). The
 * output's gradient is then a view of `adjoint`, not a copy: it has the
 * adjoint's strides (0 along the dimensions the adjoint is broadcast over),
 * is valid while `adjoint` lives and until dc_tape_reset, and changes when
 * `adjoint` is written. An adjoint that is itself a gradient
 * (dc_tensor_grad) is copied into the output's gradient instead. Fails as
 * dc_backward does (the one-element rule aside), with DC_ERR_SHAPE if
 * `adjoint` does not broadcast to the output's shape, DC_ERR_DTYPE if their
 * dtypes differ and DC_ERR_ARG if it is NULL or belongs to another context
 * or tape. */
dc_status dc_backward_with(dc_tape *tape, dc_tensor *output, const dc_tensor *adjoint);

/* Turns recording on or off (no-grad mode) and returns the previous setting.
 * Ops still compute while off, but record nothing and need no partials. */
bool dc_tape_set_recording(dc_tape *tape, bool recording);
bool dc_tape_is_recording(const dc_tape *tape);

/* A tape tensor of zeros, or a copy of `data` (host memory) if not NULL. */
dc_tensor *dc_tape_tensor_new(dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape,
                              const void *data);

/* A tape tensor of rank 0 holding `value`. */
dc_tensor *dc_tape_scalar(dc_tape *tape, dc_dtype dtype, double value);

/* Nodes recorded since the last reset. */
size_t dc_tape_node_count(const dc_tape *tape);

/* Bytes of the tape's arenas in use now, and their peak since the tape was
 * made (tensors, partials, gradients of the step; alignment padding
 * included). The tape has two arenas, one of host memory for its bookkeeping
 * and one for tensor data (device memory on CUDA); both numbers are sums over
 * the two, and the peak adds each arena's own peak, which may come from
 * different steps: an upper bound on the most the tape used at one time. */
size_t dc_tape_bytes_in_use(const dc_tape *tape);
size_t dc_tape_peak_bytes(const dc_tape *tape);

/* Bytes of memory the arena holds (reserved, used or not). */
size_t dc_tape_reserved_bytes(const dc_tape *tape);

/* The context the tape was made in. */
dc_ctx *dc_tape_ctx(const dc_tape *tape);

/* Regions attribute backward work to parts of a model. Nodes recorded after
 * dc_tape_set_region(tape, r) belong to region r (0 to DC_TAPE_REGIONS - 1;
 * 0 by default; another r is refused with DC_ERR_ARG in dc_last_error and
 * the region stays as it was); with timing on, each backward pass adds the
 * time spent in the adjoints of a region's nodes to
 * dc_tape_region_seconds(tape, r). */
#define DC_TAPE_REGIONS 8
int dc_tape_set_region(dc_tape *tape, int region); /* returns the previous region */
/* Turns the timing of backward passes on or off (off by default). */
void dc_tape_set_timing(dc_tape *tape, bool on);
/* Seconds the backward passes timed so far spent in region r's adjoints. */
double dc_tape_region_seconds(const dc_tape *tape, int region);
/* Sets every region's time back to 0. */
void dc_tape_clear_timing(dc_tape *tape);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_TAPE_H */
