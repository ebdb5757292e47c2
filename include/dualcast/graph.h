/* A training step captured once and replayed.
 *
 * On CUDA a step is thousands of small kernels; launched one by one from the
 * host, the launches cost more than the kernels. dc_graph_capture runs a
 * step function once as it is, then records what it queues on the
 * context's stream as a CUDA graph (nothing runs while it records), and
 * dc_graph_replay launches the whole graph at once.
 *
 * A captured step must never wait for the device: no result read back
 * (dc_tensor_item, dc_tensor_to_host, dc_tensor_get, a dc_clip_grad_norm
 * asked for the norm), no copy from the host (dc_tensor_from_host_copy,
 * dc_tensor_set, a tape tensor made from host data), no
 * dc_ctx_synchronize. Inside a capture those calls fail with DC_ERR_STATE
 * and a message naming them. Put per-step inputs (a batch, a slope) into
 * persistent tensors before each replay, and read results (a loss on the
 * step's tape) after it; a learning rate set with dc_optimizer_set_lr
 * between replays is read on the device.
 *
 * A replay runs the kernels of the capture on the addresses it saw, and
 * changes no host state: the step function's host code runs at the
 * capture, not at replays (keep counters outside it). Whenever device memory
 * handed out before the capture was released since (a tensor or a tape
 * freed, a tape consolidating its blocks), the graph may point at memory
 * now another's: the next replay then runs the step as it is and captures
 * it again (counted in dc_graph_captures). Memory taken and given back after
 * the capture (ops run eagerly between replays, on other tapes) is in no
 * graph and costs no capture. What a graph cannot see is host logic in
 * the step that would choose other ops or tensors (a branch on a host
 * counter): dc_graph_verify records the step again without running it and
 * takes the new graph where the ops differ.
 *
 * Where a step cannot be captured (the CPU backend, a build without CUDA, a
 * call that waits), the graph runs the step eagerly at every replay, and
 * dc_graph_fallback says why; the same code works on every backend. A
 * capture refused only because the step needed new device memory is tried
 * again at the next replays (after an eager run that makes the memory).
 *
 * A graph is used by one thread at a time and freed before its context;
 * a context records one capture at a time. */
#ifndef DUALCAST_GRAPH_H
#define DUALCAST_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_ctx dc_ctx;
typedef struct dc_graph dc_graph;

/* A step: queues its work on the context (ops on a tape, backward,
 * clipping, an optimizer step) and returns DC_OK, or the status of the
 * first call that failed. */
typedef dc_status (*dc_step_fn)(void *user);

/* Runs step(user) on ctx once, eagerly, then captures it for the replays
 * (see dc_graph_fallback where it cannot). Returns NULL, with *status if
 * not NULL, when the step failed (its status; the message is in
 * dc_last_error(ctx)), when called inside a graph's step, or when out of
 * memory. Inside a graph's step (its eager runs included, on every
 * backend, so that a step that runs on the CPU runs on CUDA too),
 * dc_graph_capture, dc_graph_replay and dc_graph_verify are refused with
 * DC_ERR_STATE. */
dc_graph *dc_graph_capture(dc_ctx *ctx, dc_step_fn step, void *user, dc_status *status);

/* Runs the step again: launches the graph, or, where device memory was
 * released since the capture or a capture is pending, runs the step as it
 * is and captures it again; where the graph runs eagerly, calls the step.
 * Returns the launch's status or the step's. */
dc_status dc_graph_replay(dc_graph *graph);

/* Records the step again without running it and compares the ops it
 * queues (their names, operand addresses, dtypes and shapes, and the
 * kernels launched) with the graph's: where they differ, the new capture
 * replaces the graph (counted in dc_graph_captures). *changed (if not
 * NULL) says whether they did. DC_OK, or the failure of the new recording
 * (the graph is then unchanged). */
dc_status dc_graph_verify(dc_graph *graph, bool *changed);

/* NULL while the graph replays a capture; else why it runs the step
 * eagerly ("the CPU backend runs steps as they are", or the message of the
 * call that broke the capture). */
const char *dc_graph_fallback(const dc_graph *graph);

/* Captures taken into use (1 after a successful dc_graph_capture, more
 * after recaptures); 0 where the graph runs eagerly. */
int64_t dc_graph_captures(const dc_graph *graph);

/* Replays that launched the graph (not those that ran the step eagerly). */
int64_t dc_graph_replays(const dc_graph *graph);

/* Kernel launches the captured step holds (a cuBLAS product counts as
 * one); 0 where the graph runs eagerly. */
int64_t dc_graph_kernels(const dc_graph *graph);

/* Frees the graph (the step's tensors are the caller's). NULL is allowed. */
void dc_graph_free(dc_graph *graph);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_GRAPH_H */
